package redislock

import (
	"strings"
	"testing"

	"github.com/golocker/locker/internal/testserver/redisserver"
)

func TestKeys(t *testing.T) {
	k := keys{prefix: DefaultKeyPrefix}
	for _, name := range []string{
		"orders/42", "}", "}x", "{", "{}", "a}b{c", "%", "%7D", "%25", "a%7Bb", "*?[]\\", "日本", "x:fence",
	} {
		key := k.lock(name)
		if got, ok := k.name(key); !ok || got != name {
			t.Errorf("name(lock(%q)) = %q, %v", name, got, ok)
		}
		if strings.Count(key, "{") != 1 || strings.Count(key, "}") != 1 {
			t.Errorf("lock(%q) = %q: want exactly one hash tag", name, key)
		}
		if a, b := redisserver.KeySlot(key), redisserver.KeySlot(fenceKey(key)); a != b {
			t.Errorf("%q: lock key in slot %d, fence key in slot %d", name, a, b)
		}
	}
	if k.lock("a") == k.lock("a}") || k.lock("%7D") == k.lock("}") {
		t.Error("distinct names share a key")
	}
	for _, key := range []string{"golocker:{a}:fence", "golocker:{a}:queue", "golocker:{a}:waiters", "golocker:{a", "other:{a}", "golocker:{a}b}", "golocker:{%zz}", "golocker:{a{b}"} {
		if name, ok := k.name(key); ok {
			t.Errorf("name(%q) = %q, want no lock name", key, name)
		}
	}
}
