package keys

import (
	"strings"
	"testing"

	"github.com/golocker/locker/internal/testserver/redisserver"
)

func TestKeys(t *testing.T) {
	k := Keys{Prefix: DefaultPrefix}
	for _, name := range []string{
		"orders/42", "}", "}x", "{", "{}", "a}b{c", "%", "%7D", "%25", "a%7Bb", "*?[]\\", "日本", "x:fence",
	} {
		key := k.Lock(name)
		if got, ok := k.Name(key); !ok || got != name {
			t.Errorf("Name(Lock(%q)) = %q, %v", name, got, ok)
		}
		if strings.Count(key, "{") != 1 || strings.Count(key, "}") != 1 {
			t.Errorf("Lock(%q) = %q: want exactly one hash tag", name, key)
		}
		for _, other := range Queued(key) {
			if a, b := redisserver.KeySlot(key), redisserver.KeySlot(other); a != b {
				t.Errorf("%q: lock key in slot %d, %s in slot %d", name, a, other, b)
			}
		}
	}
	if k.Lock("a") == k.Lock("a}") || k.Lock("%7D") == k.Lock("}") {
		t.Error("distinct names share a key")
	}
	for _, key := range []string{"golocker:{a}:fence", "golocker:{a}:queue", "golocker:{a}:waiters", "golocker:{a", "other:{a}", "golocker:{a}b}", "golocker:{%zz}", "golocker:{a{b}"} {
		if name, ok := k.Name(key); ok {
			t.Errorf("Name(%q) = %q, want no lock name", key, name)
		}
	}
}

// TestPattern: the SCAN pattern of a prefix matches the keys of the names
// under it, glob characters in the prefix quoted.
func TestPattern(t *testing.T) {
	k := Keys{Prefix: "app*:"}
	if got, want := k.Pattern("a[1]/"), `app\*:{a\[1\]/*`; got != want {
		t.Errorf("Pattern = %q, want %q", got, want)
	}
	for _, p := range []string{"", "golocker:", strings.Repeat("x", maxPrefixLen)} {
		if err := ValidPrefix(p); err != nil {
			t.Errorf("ValidPrefix(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"a{", "}", strings.Repeat("x", maxPrefixLen+1)} {
		if ValidPrefix(p) == nil {
			t.Errorf("ValidPrefix(%q) = nil, want an error", p)
		}
	}
}
