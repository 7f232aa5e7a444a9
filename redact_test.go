package locker_test

import (
	"testing"

	"github.com/golocker/locker"
)

func TestRedact(t *testing.T) {
	tests := []struct{ name, in, want string }{
		// Passwords.
		{"a_password_is_hidden_and_the_user_kept", "redis://user:s3cret@host:6379/0", "redis://user:xxxxx@host:6379/0"},
		{"a_password_without_a_user_is_hidden", "redis://:s3cret@host:6379", "redis://:xxxxx@host:6379"},
		{"an_escaped_password_is_hidden", "redis://u:p%40ss%2Fw@host", "redis://u:xxxxx@host"},
		{"an_empty_password_is_hidden", "redis://u:@host", "redis://u:xxxxx@host"},
		{"a_user_without_a_password_is_kept", "etcd://alice@h1:2379,h2:2379/prefix", "etcd://alice@h1:2379,h2:2379/prefix"},
		{"a_password_of_a_multi_host_URL_is_hidden", "mongodb://u:s3cret@h1,h2/db", "mongodb://u:xxxxx@h1,h2/db"},

		// Query parameters.
		{"a_password_parameter_is_hidden", "redis://host/0?password=s3cret", "redis://host/0?password=xxxxx"},
		{"parameters_that_look_secret_are_hidden_and_others_kept", "sqlite:///tmp/db?AuthToken=t0k&mode=ro", "sqlite:///tmp/db?AuthToken=xxxxx&mode=ro"},
		{"every_value_of_a_repeated_secret_parameter_is_hidden", "x://h?key=a&key=b", "x://h?key=xxxxx"},
		{"harmless_parameters_are_kept", "redis://host/0?dial_timeout=5s", "redis://host/0?dial_timeout=5s"},

		// Strings that are not URLs, or not the URL the user meant.
		{"an_empty_string_stays_empty", "", ""},
		{"a_plain_word_is_kept", "locallock", "locallock"},
		{"an_address_is_kept", "127.0.0.1:6379", "127.0.0.1:6379"},
		{"an_unparsable_URLs_password_is_hidden", "x://u:s3cret@ho st/%zz", "x://u:xxxxx@ho st/%zz"},
		{"an_unparsable_URLs_query_is_hidden", "x://ho st/?password=s3cret", "x://ho st/?xxxxx"},
		{"a_password_with_an_unescaped_slash_is_hidden", "redis://u:s3/cret@host", "redis://u:xxxxx@host"},
		{"a_password_with_an_unescaped_hash_is_hidden", "redis://u:s3#cret@host", "redis://u:xxxxx@host"},
		{"a_password_with_an_unescaped_question_mark_is_hidden", "redis://u:s3?cret@host", "redis://u:xxxxx@host"},
		// Without slashes the scheme cannot be told from the user: both go.
		{"a_password_in_a_URL_missing_its_slashes_is_hidden", "redis:user:s3cret@host", "redis:xxxxx@host"},
		{"a_password_without_a_scheme_is_hidden", "user:s3cret@host", "user:xxxxx@host"},

		// Redact returns its input with secrets replaced, not a
		// re-serialization of it.
		{"a_URL_with_nothing_to_hide_is_returned_as_given", "mem://", "mem://"},
		{"a_sentence_is_returned_as_given", "not a url", "not a url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := locker.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
