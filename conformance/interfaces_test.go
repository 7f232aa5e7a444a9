package conformance_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/golocker/locker/conformance"
)

// TestInterfacesListsEveryOptionalInterface fails when package backend
// defines an optional interface that conformance.Interfaces has no field
// for, or when a field names no interface of package backend. Every exported
// interface of package backend but Driver and Lease is optional.
func TestInterfacesListsEveryOptionalInterface(t *testing.T) {
	required := []string{"Driver", "Lease"}
	files, err := filepath.Glob(filepath.Join("..", "backend", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var optional []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				ts := spec.(*ast.TypeSpec)
				if _, ok := ts.Type.(*ast.InterfaceType); ok && ts.Name.IsExported() && !slices.Contains(required, ts.Name.Name) {
					optional = append(optional, ts.Name.Name)
				}
			}
		}
	}
	if len(optional) == 0 {
		t.Fatalf("no optional interface found in %v", files)
	}
	var fields []string
	typ := reflect.TypeFor[conformance.Interfaces]()
	for i := range typ.NumField() {
		fields = append(fields, typ.Field(i).Name)
	}
	for _, name := range optional {
		if !slices.Contains(fields, name) {
			t.Errorf("package backend defines the optional interface %s, which conformance.Interfaces does not list", name)
		}
	}
	for _, name := range fields {
		if !slices.Contains(optional, name) {
			t.Errorf("conformance.Interfaces lists %s, which is no optional interface of package backend", name)
		}
	}
}
