package mysqllock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver/sqlserver"
	"github.com/golocker/locker/mysqllock"
)

// TestCancelledWaitsLeaveNoGateHeld has a holder take and release a lock
// in a loop while another Client's LockTimeout waits on its gate and gives
// up after a millisecond or a few, so that waits end at every moment —
// among them as the gate is granted, when the cancel can fail the
// statement after the grant. When everything has stopped, the gate must be
// free: a gate left held by a pooled session would make every later wait
// on the name pass it only after the free-lock grace.
func TestCancelledWaitsLeaveNoGateHeld(t *testing.T) {
	forDialects(t, serverDialects, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		const name, waiters = "cancelled-waits", 3
		holder := client(t, open(t, db.URL), 10*time.Second).NewMutex(name)
		end := time.Now().Add(3 * time.Second)
		var wg sync.WaitGroup
		errs := make(chan error, waiters+1)
		wg.Go(func() {
			for time.Now().Before(end) {
				if err := holder.Lock(ctx); err != nil {
					errs <- err
					return
				}
				time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
				if err := holder.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
		var waits, got atomic.Int64
		drivers := make([]*mysqllock.Driver, waiters)
		for i := range drivers {
			drivers[i] = open(t, db.URL)
			m := client(t, drivers[i], 10*time.Second).NewMutex(name)
			wg.Go(func() {
				for time.Now().Before(end) {
					ok, err := m.LockTimeout(ctx, time.Duration(200+rand.IntN(3000))*time.Microsecond)
					if err != nil {
						errs <- err
						return
					}
					waits.Add(1)
					if ok {
						got.Add(1)
						if err := m.Unlock(ctx); err != nil {
							errs <- err
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Logf("%d waits, %d got the lock", waits.Load(), got.Load())
		free, err := mysqllock.GateFree(ctx, drivers[0], name)
		if err != nil {
			t.Fatal(err)
		}
		if !free {
			t.Fatal("the gate is held after every hold was released and every wait ended")
		}
	})
}

// TestAWaiterPassesAStalledGate: a holder whose process stalls keeps its
// gate (its session lives on) after its lease ran out. A waiter blocked on
// the gate takes the lock once that lease ran out, and a later waiter,
// queued behind the stalled session, gets the lock when it is released.
func TestAWaiterPassesAStalledGate(t *testing.T) {
	forDialects(t, serverDialects, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		const name, ttl = "stalled-gate", time.Second
		fn := conformance.NewFaultNet()
		stalled := locked(t, ctx, client(t, open(t, db.URL, mysqllock.WithDialer(fn.Dial)), ttl), name)
		fn.Pause()
		defer fn.Resume()
		next := client(t, open(t, db.URL), ttl).NewMutex(name)
		if err := next.Lock(ctx); err != nil {
			t.Fatalf("a waiter behind a stalled holder: %v", err)
		}
		select {
		case <-stalled.Lost():
		default:
			t.Error("the next owner got the lock while the stalled holder had not declared it lost")
		}
		after := client(t, open(t, db.URL), ttl).NewMutex(name)
		got := make(chan error, 1)
		go func() { got <- after.Lock(ctx) }()
		if err := next.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		drivertest.Succeeds(t, got, 30*time.Second, "a waiter behind the stalled gate, after the release")
		if err := after.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		fn.Resume()
		if err := stalled.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
			t.Errorf("the stalled holder's Unlock = %v, want ErrLost", err)
		}
	})
}

// TestALockWithoutAWaitConnectionWaitsByAttempts: with one wait
// connection, a Client that holds a lock through it waits for a second
// lock by attempts, and gets it when it is released.
func TestALockWithoutAWaitConnectionWaitsByAttempts(t *testing.T) {
	forDialects(t, serverDialects, func(t *testing.T, db *sqlserver.SQLDatabase, ctx context.Context) {
		c := client(t, open(t, db.URL+sep(db.URL)+"wait_conns=1"), 10*time.Second)
		a := locked(t, ctx, c, "one")
		other := locked(t, ctx, client(t, open(t, db.URL), 10*time.Second), "two")
		got := make(chan error, 1)
		go func() { got <- c.NewMutex("two").Lock(ctx) }()
		drivertest.Eventually(t, 10*time.Second, "the Lock waits", func() bool { return c.LocalWaiters("two") == 1 })
		if err := other.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		drivertest.Succeeds(t, got, 30*time.Second, "the Lock without a wait connection")
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
