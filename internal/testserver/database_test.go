package testserver

import (
	"strings"
	"testing"
)

func TestUniqueDBName(t *testing.T) {
	for _, name := range []string{
		"TestX",
		"TestMutex/unlock_by_stale_owner_is_rejected_" + strings.Repeat("x", 200),
		"Test/ü/日本/--/",
	} {
		got := UniqueDBName(fakeNameTB{name: name})
		if len(got) > 63 || !strings.HasPrefix(got, "lk_") {
			t.Errorf("UniqueDBName(%q) = %q: want lk_ prefix and at most 63 bytes", name, got)
		}
		for _, r := range got {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
				t.Errorf("UniqueDBName(%q) = %q: character %q", name, got, r)
			}
		}
		if again := UniqueDBName(fakeNameTB{name: name}); again == got {
			t.Errorf("UniqueDBName(%q) returned %q twice", name, got)
		}
	}
}

// fakeNameTB is a TB whose only working method is Name.
type fakeNameTB struct {
	TB
	name string
}

func (f fakeNameTB) Name() string { return f.name }
