//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || illumos

package demo

import (
	"path/filepath"
	"testing"
)

// TestLedger: the ledger accepts a token at least as high as any it has
// accepted, and refuses a lower one, saying the highest.
func TestLedger(t *testing.T) {
	led := &ledger{path: filepath.Join(t.TempDir(), "ledger.json")}
	if err := led.init(); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		token    uint64
		accepted bool
		highest  uint64
	}{{3, true, 3}, {3, true, 3}, {5, true, 5}, {4, false, 5}, {9, true, 9}, {1, false, 9}} {
		ok, highest, err := led.write(0, w.token)
		if err != nil || ok != w.accepted || highest != w.highest {
			t.Errorf("write(%d) = %v, %d, %v; want %v, %d", w.token, ok, highest, err, w.accepted, w.highest)
		}
	}
	st, err := led.read()
	if err != nil || len(st.Writes) != 4 || st.Refused != 2 || st.Highest != 9 {
		t.Errorf("read = %+v, %v; want 4 writes, 2 refused, highest 9", st, err)
	}
}
