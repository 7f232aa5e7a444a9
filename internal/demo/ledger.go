//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || illumos

package demo

import (
	"encoding/json"
	"os"
	"syscall"
)

// ledger is the resource the demo's lock guards: a file that accepts a
// write only with a token at least as high as any it has accepted. The
// check-and-write is atomic across processes (flock), as a storage
// server's compare-and-set would be.
type ledger struct{ path string }

type ledgerState struct {
	Highest uint64       `json:"highest"`
	Writes  []ledgerItem `json:"writes"`
	Refused int          `json:"refused"`
}

type ledgerItem struct {
	W     int    `json:"w"`
	Token uint64 `json:"token"`
}

func (l *ledger) init() error {
	return l.update(func(*ledgerState) {})
}

func (l *ledger) read() (*ledgerState, error) {
	var st ledgerState
	b, err := os.ReadFile(l.path)
	if err != nil {
		return nil, err
	}
	return &st, json.Unmarshal(b, &st)
}

// write appends w's write with token, unless token is below the highest
// accepted, which it returns.
func (l *ledger) write(w int, token uint64) (accepted bool, highest uint64, err error) {
	err = l.update(func(st *ledgerState) {
		if token < st.Highest {
			st.Refused++
			highest = st.Highest
			return
		}
		st.Highest, accepted, highest = token, true, token
		st.Writes = append(st.Writes, ledgerItem{W: w, Token: token})
	})
	return accepted, highest, err
}

// update applies f to the ledger under an exclusive flock.
func (l *ledger) update(f func(*ledgerState)) error {
	lf, err := os.OpenFile(l.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	var st ledgerState
	if b, err := os.ReadFile(l.path); err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			return err
		}
	}
	f(&st)
	b, err := json.Marshal(&st)
	if err != nil {
		return err
	}
	tmp := l.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, l.path)
}
