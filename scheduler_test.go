package locker_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/locallock"
)

// wrapDriver is a locallock Driver whose leases can be watched and made to
// misbehave: renewals are counted and can fail or hang, and the store's lost
// signal can be hidden so that only the watchdog can tell a hold is gone. It
// does not implement backend.Inspector.
type wrapDriver struct {
	backend.Driver
	hideLost bool

	mode       atomic.Int32 // a renewMode
	failNext   atomic.Int64 // this many renewals fail before mode applies
	acquireErr error        // returned by Acquire when set

	mu     sync.Mutex
	renews []time.Time
}

type renewMode int32

const (
	renewOK   renewMode = iota
	renewFail           // transient error
	renewHang           // until the renewal's ctx ends
	renewSlow           // succeeds after slowRenewal
)

// slowRenewal is how long a renewSlow renewal takes.
const slowRenewal = 20 * time.Millisecond

var errTransient = errors.New("test: store unreachable")

// newWrapDriver returns a wrapDriver on store (a private one when nil).
func newWrapDriver(store *locallock.Store, hideLost bool) *wrapDriver {
	return &wrapDriver{Driver: locallock.New(store), hideLost: hideLost}
}

func (d *wrapDriver) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	c.LostSignal = c.LostSignal && !d.hideLost
	return c
}

func (d *wrapDriver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if d.acquireErr != nil {
		return nil, d.acquireErr
	}
	return d.wrap(d.Driver.Acquire(ctx, r))
}

func (d *wrapDriver) AcquireWait(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if d.acquireErr != nil {
		return nil, d.acquireErr
	}
	return d.wrap(d.Driver.(backend.Waiter).AcquireWait(ctx, r))
}

func (d *wrapDriver) wrap(l backend.Lease, err error) (backend.Lease, error) {
	if err != nil {
		return nil, err
	}
	return &wrapLease{Lease: l, d: d}, nil
}

// renewals returns how many renewals were attempted.
func (d *wrapDriver) renewals() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.renews)
}

type wrapLease struct {
	backend.Lease
	d *wrapDriver
}

func (l *wrapLease) Renew(ctx context.Context, ttl time.Duration) error {
	d := l.d
	d.mu.Lock()
	d.renews = append(d.renews, time.Now())
	d.mu.Unlock()
	if d.failNext.Add(-1) >= 0 {
		return errTransient
	}
	switch renewMode(d.mode.Load()) {
	case renewFail:
		return errTransient
	case renewHang:
		<-ctx.Done()
		return ctx.Err()
	case renewSlow:
		t := time.NewTimer(slowRenewal)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return l.Lease.Renew(ctx, ttl)
}

func (l *wrapLease) Lost() *backend.LostSignal {
	if l.d.hideLost {
		return nil
	}
	return l.Lease.Lost()
}

func TestWatchdog(t *testing.T) {
	t.Run("renews_a_lease_about_every_third_of_its_TTL_and_stops_after_Unlock", func(t *testing.T) {
		const ttl = 300 * time.Millisecond
		ctx := testCtx(t)
		d := newWrapDriver(nil, false)
		m := newClient(t, d, locker.WithTTL(ttl)).NewMutex("watchdog/rate")
		mustLock(t, ctx, m)
		start := time.Now()
		time.Sleep(time.Second) // let renewals happen
		n, el := d.renewals(), time.Since(start)
		mustUnlock(t, ctx, m)
		// Every TTL/3 is 3 per TTL. The bounds leave room for a loaded
		// machine under -race, and still fail a watchdog that renews once
		// per TTL or spins.
		perTTL := float64(n) * float64(ttl) / float64(el)
		t.Logf("%d renewals in %v: %.2f per TTL", n, el, perTTL)
		if perTTL < 2 || perTTL > 5 {
			t.Errorf("%d renewals in %v: %.1f per TTL of %v, want 2 to 5", n, el, perTTL, ttl)
		}
		time.Sleep(ttl / 2) // a renewal would be due in this time
		if after := d.renewals(); after != n {
			t.Errorf("%d renewals after Unlock", after-n)
		}
	})

	t.Run("retries_failed_renewals_and_keeps_the_hold_once_one_succeeds", func(t *testing.T) {
		const ttl = 300 * time.Millisecond
		ctx := testCtx(t)
		store := locallock.NewStore()
		d := newWrapDriver(store, false) // the store's own lost signal stays on
		d.failNext.Store(3)
		m := newClient(t, d, locker.WithTTL(ttl)).NewMutex("watchdog/retry")
		mustLock(t, ctx, m)
		// 3 failures, then successes well past the first lease's end.
		drivertest.Eventually(t, 5*time.Second, "renewals resume after the failures", func() bool { return d.renewals() >= 7 })
		select {
		case <-m.Lost():
			t.Fatal("Lost closed although a retry succeeded")
		default:
		}
		other := newClient(t, locallock.New(store)).NewMutex("watchdog/retry")
		if ok, err := other.TryLock(ctx); ok || err != nil {
			t.Errorf("another client's TryLock = %v, %v; want false, nil while the hold is renewed", ok, err)
		}
		mustUnlock(t, ctx, m)
	})

	// The store's lost signal is hidden: only the watchdog can tell, and it
	// must tell before the lease could have run out on the store (which
	// started counting after `before`).
	for _, tc := range []struct {
		name string
		mode renewMode
	}{
		{"when_the_store_returns_errors", renewFail},
		{"when_the_store_hangs", renewHang},
	} {
		t.Run("reports_the_hold_lost_before_its_lease_runs_out_"+tc.name, func(t *testing.T) {
			const ttl = 600 * time.Millisecond
			ctx := testCtx(t)
			d := newWrapDriver(nil, true)
			d.mode.Store(int32(tc.mode))
			m := newClient(t, d, locker.WithTTL(ttl)).NewMutex("watchdog/lost")
			before := time.Now()
			mustLock(t, ctx, m)
			lostAt := awaitLost(t, m, 5*ttl)
			t.Logf("Lost closed %v after Lock was called, %d renewal attempts", lostAt.Sub(before), d.renewals())
			if !lostAt.Before(before.Add(ttl)) {
				t.Errorf("Lost closed %v after Lock was called, not before the %v lease ran out", lostAt.Sub(before), ttl)
			}
			if el := lostAt.Sub(before); el < ttl/2 {
				t.Errorf("Lost closed after %v: the watchdog gave up long before the deadline", el)
			}
			if n := d.renewals(); tc.mode == renewFail && n < 2 {
				t.Errorf("%d renewal attempts, want retries", n)
			}
			if err := m.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
				t.Errorf("Unlock after the loss = %v, want ErrLost", err)
			}
		})
	}

	t.Run("never_renews_a_fixed_lease_and_reports_its_end_in_time", func(t *testing.T) {
		const ttl = 300 * time.Millisecond
		ctx := testCtx(t)
		d := newWrapDriver(nil, true)
		m := newClient(t, d, locker.WithTTL(ttl), locker.WithFixedLease()).NewMutex("watchdog/fixed")
		before := time.Now()
		mustLock(t, ctx, m)
		lostAt := awaitLost(t, m, 10*ttl)
		if !lostAt.Before(before.Add(ttl)) {
			t.Errorf("Lost closed %v after Lock was called, not before the %v lease ran out", lostAt.Sub(before), ttl)
		}
		if n := d.renewals(); n != 0 {
			t.Errorf("%d renewals of a fixed lease", n)
		}
		if err := m.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
			t.Errorf("Unlock after the fixed lease ended = %v, want ErrLost", err)
		}
	})

	t.Run("renewals_beyond_the_calls_in_flight_wait_their_turn_and_keep_their_holds", func(t *testing.T) {
		// 640 holds renewed one call each, 20 ms a call, 64 calls at a
		// time: a round of renewals takes 200 ms of the 333 ms between
		// rounds, so most renewals wait for a call slot to free.
		const n, ttl = 640, time.Second
		ctx := testCtx(t)
		d := newWrapDriver(nil, true)
		d.mode.Store(int32(renewSlow))
		c := newClient(t, d, locker.WithTTL(ttl))
		ms := make([]*locker.Mutex, n)
		for i := range ms {
			ms[i] = c.NewMutex(fmt.Sprintf("watchdog/queued/%d", i))
			mustLock(t, ctx, ms[i])
		}
		drivertest.Eventually(t, 20*time.Second, "every hold renewed three times", func() bool {
			return d.renewals() >= 3*n
		})
		for _, m := range ms {
			select {
			case <-m.Lost():
				t.Fatalf("%s lost while its renewal waited for a call slot", m.Name())
			default:
			}
			mustUnlock(t, ctx, m)
		}
	})

	t.Run("serves_many_holds_without_a_goroutine_per_hold", func(t *testing.T) {
		// A driver with a lost signal gets one watcher goroutine per hold
		// by design; the wrapper hides it so that only the scheduler's
		// goroutines are counted.
		few, many := holdGoroutines(t, 10), holdGoroutines(t, 1000)
		t.Logf("at most %d goroutines with 10 holds, %d with 1000", few, many)
		// Renewals in flight are bounded by a semaphore of 64.
		if grew := many - few; grew > 64+16 {
			t.Errorf("goroutines: %d with 10 holds, %d with 1000: the count grows with the holds", few, many)
		}
	})
}

// holdGoroutines takes n holds on one Client, keeps them through a few
// rounds of renewals, and returns the most goroutines seen meanwhile.
func holdGoroutines(t *testing.T, n int) int {
	t.Helper()
	const ttl = time.Second
	ctx := testCtx(t)
	d := newWrapDriver(nil, true)
	c := newClient(t, d, locker.WithTTL(ttl))
	ms := make([]*locker.Mutex, n)
	for i := range ms {
		ms[i] = c.NewMutex(fmt.Sprintf("watchdog/many/%d", i))
		mustLock(t, ctx, ms[i])
	}
	most := 0
	drivertest.Eventually(t, 10*time.Second, "every hold renewed twice", func() bool {
		most = max(most, runtime.NumGoroutine())
		return d.renewals() >= 2*n
	})
	for _, m := range ms {
		select {
		case <-m.Lost():
			t.Fatalf("%s lost while %d holds were renewed", m.Name(), n)
		default:
		}
		mustUnlock(t, ctx, m)
	}
	return most
}

// awaitLost waits for m's Lost to close and returns when it did.
func awaitLost(t *testing.T, m *locker.Mutex, bound time.Duration) time.Time {
	t.Helper()
	select {
	case <-m.Lost():
		return time.Now()
	case <-time.After(bound):
		t.Fatalf("Lost did not close within %v", bound)
		return time.Time{}
	}
}
