package backend_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/golocker/locker/backend"
)

// TestCheckName: every rule of a lock name, and the cause each error
// names.
func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name, want string // want: "" for a valid name, else a part of the error
	}{
		{"orders/42", ""},
		{"ü/日本", ""},
		{strings.Repeat("x", backend.MaxNameLen), ""},
		{"", "empty"},
		{strings.Repeat("x", backend.MaxNameLen+1), "513 bytes, more than 512"},
		{"a\xffb", "not valid UTF-8"},
		{"a\x00b", "NUL byte"},
	} {
		err := backend.CheckName(tc.name)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckName(%.20q) = %v, want nil", tc.name, err)
		case tc.want != "" && (!errors.Is(err, backend.ErrInvalidName) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckName(%.20q) = %v, want ErrInvalidName saying %q", tc.name, err, tc.want)
		}
	}
}
