package casdriver_test

import (
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/golocker/locker"
	"github.com/golocker/locker/examples/casdriver"
)

func TestOpenByURL(t *testing.T) {
	ctx := t.Context()
	store := casdriver.NewStore()
	casdriver.Register("cas-test", store)

	c, err := locker.Open(ctx, "cas-test://?key_prefix=app1/")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := c.NewMutex("orders/42")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if r := store.Get("app1/orders/42"); r.Fence != m.Token() || r.Owner == "" {
		t.Errorf("the record under the prefix is %+v, want the hold's (token %d)", r, m.Token())
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	for raw, want := range map[string]string{
		"cas-test://host:1":                     "the store lives in this program",
		"cas-test://u:pw@":                      "the store lives in this program",
		"cas-test:///path":                      "the store lives in this program",
		"cas-test://?prefix=x":                  `unknown parameter "prefix" (known: key_prefix)`,
		"cas-test://?key_prefix=a&key_prefix=b": `parameter "key_prefix" given 2 times`,
		"cas-test://?key_prefix=a%00":           "NUL",
		"cas-test://?%zz":                       "malformed query",
	} {
		c, err := locker.Open(ctx, raw)
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, locker.ErrBadURL) || !strings.Contains(err.Error(), ": bad URL: casdriver: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s) = %v, want ErrBadURL saying %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "pw@") {
			t.Errorf("Open(%s) = %v shows the password", raw, err)
		}
	}
}

// TestOnlyPublicImports: the example imports what a driver in another
// module can import, which is what docs/writing-a-driver.md uses: the
// standard library and golocker's public packages.
func TestOnlyPublicImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal") || strings.HasPrefix(path, "internal/") {
				t.Errorf("%s imports %s, which a driver in another module cannot", name, path)
			}
		}
	}
}
