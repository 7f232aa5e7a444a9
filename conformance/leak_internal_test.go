package conformance

import (
	"slices"
	"testing"
)

// TestGrown: a goroutine that replaced one of the same function is no
// growth; one more of a function is, and so is a function that did not
// run before; the test framework's goroutines never count.
func TestGrown(t *testing.T) {
	const watcher = "github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1()"
	before := map[string]string{"1": "main.main()", "7": watcher, "8": "pkg.loop()"}
	for _, tc := range []struct {
		name string
		now  map[string]string
		want []string
	}{
		{"unchanged", map[string]string{"1": "main.main()", "7": watcher, "8": "pkg.loop()"}, nil},
		{"a watcher replaced", map[string]string{"1": "main.main()", "9": watcher, "8": "pkg.loop()"}, nil},
		{"one ended", map[string]string{"1": "main.main()", "7": watcher}, nil},
		{"one more watcher", map[string]string{"1": "main.main()", "7": watcher, "8": "pkg.loop()", "9": watcher},
			[]string{"goroutine 9: " + watcher}},
		{"a new function", map[string]string{"1": "main.main()", "7": watcher, "8": "pkg.loop()", "10": "pkg.leak()"},
			[]string{"goroutine 10: pkg.leak()"}},
		{"the framework's", map[string]string{"1": "main.main()", "7": watcher, "8": "pkg.loop()", "11": "testing.tRunner()"}, nil},
	} {
		if got := grown(before, tc.now); !slices.Equal(got, tc.want) {
			t.Errorf("%s: grown = %q, want %q", tc.name, got, tc.want)
		}
	}
}
