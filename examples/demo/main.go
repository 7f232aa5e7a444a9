// Command demo shows golocker on the in-process backend: workers contend for
// one lock and append to a shared ledger that accepts a write only with a
// fencing token at least as high as any it has seen. One worker is paused
// past its lease, as a long GC pause would; when it wakes, its write is
// refused. It prints a timeline and a verdict, and exits non-zero if the
// ledger saw two owners at once or accepted a stale write.
//
//	go run ./examples/demo
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/golocker/locker"
	_ "github.com/golocker/locker/locallock"
)

// ledger is the resource the lock guards: it refuses writes whose token is
// lower than the highest it has accepted.
type ledger struct {
	mu      sync.Mutex
	highest uint64
	inside  int
	entries []string
	refused int
	overlap bool
}

func (l *ledger) write(who string, token uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if token < l.highest {
		l.refused++
		return fmt.Errorf("token %d is below %d: stale owner", token, l.highest)
	}
	l.highest = token
	l.entries = append(l.entries, who)
	return nil
}

func (l *ledger) enter() {
	l.mu.Lock()
	l.inside++
	l.overlap = l.overlap || l.inside > 1
	l.mu.Unlock()
}
func (l *ledger) exit() { l.mu.Lock(); l.inside--; l.mu.Unlock() }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Printf("%7.1fms  %s\n", float64(time.Since(start).Microseconds())/1000, fmt.Sprintf(format, args...))
	}

	const workers, rounds = 4, 3
	led := &ledger{}
	var wg sync.WaitGroup
	for w := range workers {
		c, err := locker.Open(ctx, "mem://demo", locker.WithTTL(200*time.Millisecond))
		if err != nil {
			return err
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := fmt.Sprintf("worker-%d", w)
			for r := range rounds {
				m := c.NewMutex("ledger")
				paused := w == 0 && r == 0
				if paused {
					// A fixed lease: nothing renews it while the worker
					// is "paused".
					m = c.NewMutex("ledger", locker.WithFixedLease())
				}
				if err := m.Lock(ctx); err != nil {
					say("%s: lock failed: %v", who, err)
					return
				}
				tok := m.Token()
				say("%s holds the lock, token %d", who, tok)
				if paused {
					say("%s pauses for 400ms (its lease is 200ms)", who)
					<-m.Lost()
					say("%s: lease lost while paused", who)
					time.Sleep(200 * time.Millisecond)
					if err := led.write(who, tok); err != nil {
						say("%s wakes and writes: REFUSED (%v)", who, err)
					} else {
						say("%s wakes and writes: accepted", who)
					}
					if err := m.Unlock(ctx); errors.Is(err, locker.ErrLost) {
						say("%s: Unlock reports the hold was lost", who)
					}
					continue
				}
				led.enter()
				if err := led.write(who, tok); err != nil {
					say("%s: write refused: %v", who, err)
				}
				time.Sleep(10 * time.Millisecond)
				led.exit()
				if err := m.Unlock(ctx); err != nil {
					say("%s: unlock: %v", who, err)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("\n%d writes accepted, %d stale write(s) refused, overlapping owners: %v\n", len(led.entries), led.refused, led.overlap)
	if led.overlap || led.refused != 1 {
		fmt.Println("verdict: FAIL")
		return errors.New("the ledger was not protected")
	}
	fmt.Println("verdict: OK — one owner at a time, and the paused owner's stale write was refused by its fencing token")
	return nil
}
