package matrix

import (
	"slices"
	"testing"

	"github.com/golocker/locker/conformance"
)

// TestRowsMatchTheChecks keeps the matrix's rows and the suite's checks
// together: a row's capability is proved by some check (its ✅ means
// something), every check proves a capability that has a row (none is
// left out of the matrix), and every capability proved is a row or is
// listed, with its reason, in notRows.
func TestRowsMatchTheChecks(t *testing.T) {
	checks := conformance.Checks()
	proved := map[string][]string{} // capability → the checks that prove it
	for _, c := range checks {
		for _, p := range c.Proves {
			proved[p] = append(proved[p], c.Name)
		}
	}
	hasRow := map[string]bool{}
	titles := map[string]bool{}
	for _, r := range rows {
		if r.title == "" {
			t.Errorf("the row of %q has no title", r.cap)
		}
		if titles[r.title] {
			t.Errorf("two rows are titled %q", r.title)
		}
		titles[r.title] = true
		if hasRow[r.cap] {
			t.Errorf("two rows show %q", r.cap)
		}
		hasRow[r.cap] = true
		if len(proved[r.cap]) == 0 {
			t.Errorf("row %q shows %q, which no check of the suite proves", r.title, r.cap)
		}
		if _, ok := notRows[r.cap]; ok {
			t.Errorf("%q has a row and is listed in notRows", r.cap)
		}
	}
	for cp, names := range proved {
		if !hasRow[cp] && notRows[cp] == "" {
			t.Errorf("checks %v prove %q, which has no row and no reason in notRows", names, cp)
		}
	}
	for cp := range notRows {
		if len(proved[cp]) == 0 {
			t.Errorf("notRows lists %q, which no check of the suite proves", cp)
		}
	}
	for _, c := range checks {
		if !slices.ContainsFunc(c.Proves, func(p string) bool { return hasRow[p] }) {
			t.Errorf("check %s proves %v, none of which has a row", c.Name, c.Proves)
		}
	}
}
