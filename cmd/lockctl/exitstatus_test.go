package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestExitStatusesAreDocumented: the lists of exit statuses in the package
// doc, lockctl's help and the README name each status the code has a
// constant for, and nothing else but the statuses of an interrupted wait
// (128+SIGINT, 128+SIGTERM).
func TestExitStatusesAreDocumented(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, sp := range gd.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "exit") {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					t.Fatalf("%s is not a literal", n.Name)
				}
				v, _ := strconv.Atoi(lit.Value)
				want = append(want, v)
			}
		}
	}
	want = append(want, 130, 143)
	slices.Sort(want)
	if len(want) < 10 {
		t.Fatalf("found the exit constants %v in main.go; the test does not read them right", want)
	}

	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for where, text := range map[string]string{
		"the package doc": section(string(doc), "// # Exit status", "package main"),
		"lockctl help":    section(usageText, "Exit status:", ""),
		"README.md":       section(string(readme), "Exit status:", "\n\n"),
	} {
		if got := statuses(text); !slices.Equal(got, want) {
			t.Errorf("%s lists the exit statuses %v; the code has %v:\n%s", where, got, want, text)
		}
	}
}

// section returns the part of s from start to end ("" for the rest).
func section(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.Index(s, end); end != "" && j >= 0 {
		s = s[:j]
	}
	return s
}

// statuses returns the numbers in an exit status list, sorted, without
// those of "128+N" and "--wait 0".
func statuses(text string) []int {
	text = strings.NewReplacer("128+N", "", "--wait 0", "").Replace(text)
	var got []int
	for _, m := range regexp.MustCompile(`\b\d+\b`).FindAllString(text, -1) {
		n, _ := strconv.Atoi(m)
		if !slices.Contains(got, n) {
			got = append(got, n)
		}
	}
	slices.Sort(got)
	return got
}
