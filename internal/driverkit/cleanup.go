package driverkit

import (
	"context"
	"sync"
	"time"
)

// CleanupAgain are the delays after which Cleanup releases again, in the
// background, for a grant whose request reached the store only after the
// first release (a request abandoned on a cancelled ctx still runs there).
var CleanupAgain = []time.Duration{100 * time.Millisecond, time.Second}

// Cleanup releases by owner a grant that may have happened although an
// attempt failed, for a store that only answers requests (mysqllock,
// mongolock): release runs at once, with ctx's values but not its end
// (ctx may be the cancelled one), and again after each of CleanupAgain,
// in a goroutine that bg tracks, until closed closes. release bounds its
// own time. The owner is unique to the failed attempt, so a late release
// frees nothing else.
func Cleanup(ctx context.Context, bg *sync.WaitGroup, closed <-chan struct{}, release func(context.Context)) {
	release(context.WithoutCancel(ctx))
	bg.Add(1)
	go func() {
		defer bg.Done()
		for _, after := range CleanupAgain {
			t := time.NewTimer(after)
			select {
			case <-t.C:
			case <-closed:
				t.Stop()
				return
			}
			release(context.Background())
		}
	}()
}
