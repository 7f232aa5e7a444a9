package locker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/locallock"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu       sync.Mutex
	starts   []locker.AcquireStart
	ends     []locker.AcquireEnd
	holds    []locker.HoldEnd
	renewals []locker.Renewal
	ctxSeen  []bool // HoldEnded received the ctx AcquireStarted returned
}

type spanKey struct{}

func (r *recorder) AcquireStarted(ctx context.Context, e locker.AcquireStart) context.Context {
	r.mu.Lock()
	r.starts = append(r.starts, e)
	r.mu.Unlock()
	return context.WithValue(ctx, spanKey{}, e.Name)
}

func (r *recorder) AcquireEnded(ctx context.Context, e locker.AcquireEnd) {
	r.mu.Lock()
	r.ends = append(r.ends, e)
	r.mu.Unlock()
}

func (r *recorder) HoldEnded(ctx context.Context, e locker.HoldEnd) {
	r.mu.Lock()
	r.holds = append(r.holds, e)
	r.ctxSeen = append(r.ctxSeen, ctx.Value(spanKey{}) == e.Name)
	r.mu.Unlock()
}

func (r *recorder) Renewed(e locker.Renewal) {
	r.mu.Lock()
	r.renewals = append(r.renewals, e)
	r.mu.Unlock()
}

func (r *recorder) snapshot() (ends []locker.AcquireEnd, holds []locker.HoldEnd, renewals int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]locker.AcquireEnd(nil), r.ends...), append([]locker.HoldEnd(nil), r.holds...), len(r.renewals)
}

func TestObserver(t *testing.T) {
	ctx := testCtx(t)
	store := locallock.NewStore()
	rec := &recorder{}
	var hooked []locker.HoldEnd
	var hmu sync.Mutex
	c := newClient(t, locallock.New(store), locker.WithTTL(300*time.Millisecond), locker.WithObserver(rec),
		locker.WithLostHook(func(e locker.HoldEnd) { hmu.Lock(); hooked = append(hooked, e); hmu.Unlock() }))
	other := newClient(t, locallock.New(store))

	// acquired, re-entered, released
	octx := locker.WithOwner(ctx)
	m := c.NewMutex("obs/a")
	mustLock(t, octx, m)
	mustLock(t, octx, m)
	mustUnlock(t, octx, m)
	mustUnlock(t, octx, m)
	// busy, timed out
	holder := other.NewMutex("obs/b")
	mustLock(t, ctx, holder)
	if ok, err := c.NewMutex("obs/b").TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	if ok, err := c.NewMutex("obs/b").LockTimeout(ctx, 30*time.Millisecond); ok || err != nil {
		t.Fatalf("LockTimeout = %v, %v", ok, err)
	}
	// cancelled
	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	if err := c.NewMutex("obs/b").Lock(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock = %v", err)
	}
	cancel()
	mustUnlock(t, ctx, holder)
	// failed
	if err := c.NewMutex("").Lock(ctx); !errors.Is(err, locker.ErrInvalidName) {
		t.Fatalf("Lock(\"\") = %v", err)
	}
	// lost, after renewals
	l := c.NewMutex("obs/lost")
	mustLock(t, ctx, l)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, _, n := rec.snapshot(); n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no renewal observed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := locallock.New(store).ForceRelease(ctx, "obs/lost"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("not lost")
	}
	if err := l.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Fatalf("Unlock = %v", err)
	}

	// The store's loss reaches the observer from the goroutine that
	// declared it, after Lost closed: poll for it.
	drivertest.Eventually(t, 5*time.Second, "the lost hold's end observed", func() bool {
		_, holds, _ := rec.snapshot()
		return len(holds) >= 2
	})
	ends, holds, _ := rec.snapshot()
	want := []struct {
		name    string
		op      string
		outcome locker.Outcome
		reentry bool
	}{
		{"obs/a", "lock", locker.OutcomeAcquired, false},
		{"obs/a", "lock", locker.OutcomeAcquired, true},
		{"obs/b", "trylock", locker.OutcomeBusy, false},
		{"obs/b", "locktimeout", locker.OutcomeTimedOut, false},
		{"obs/b", "lock", locker.OutcomeCancelled, false},
		{"", "lock", locker.OutcomeFailed, false},
		{"obs/lost", "lock", locker.OutcomeAcquired, false},
	}
	if len(ends) != len(want) {
		t.Fatalf("%d acquisitions observed, want %d: %+v", len(ends), len(want), ends)
	}
	for i, w := range want {
		e := ends[i]
		if e.Name != w.name || e.Op != w.op || e.Outcome != w.outcome || e.Reentry != w.reentry {
			t.Errorf("acquisition %d = %s %s %v reentry=%v, want %s %s %v reentry=%v", i, e.Name, e.Op, e.Outcome, e.Reentry, w.name, w.op, w.outcome, w.reentry)
		}
		if w.outcome == locker.OutcomeAcquired && e.Token == 0 {
			t.Errorf("acquisition %d: no token", i)
		}
		if w.outcome == locker.OutcomeTimedOut && e.Wait < 30*time.Millisecond {
			t.Errorf("acquisition %d: waited %v, less than its timeout", i, e.Wait)
		}
	}
	if len(holds) != 2 {
		t.Fatalf("%d hold ends observed, want 2: %+v", len(holds), holds)
	}
	if h := holds[0]; h.Name != "obs/a" || h.Reason != locker.Released || h.Lost() || h.Cause != nil {
		t.Errorf("first hold end = %+v, want obs/a released", h)
	}
	if h := holds[1]; h.Name != "obs/lost" || h.Reason != locker.LostStore || !h.Lost() || !errors.Is(h.Cause, locker.ErrLost) {
		t.Errorf("second hold end = %+v, want obs/lost lost by the store", h)
	}
	for i, ok := range rec.ctxSeen {
		if !ok {
			t.Errorf("HoldEnded %d did not get the ctx that AcquireStarted returned", i)
		}
	}
	hmu.Lock()
	defer hmu.Unlock()
	if len(hooked) != 1 || hooked[0].Name != "obs/lost" {
		t.Errorf("the lost hook heard %+v, want obs/lost only", hooked)
	}
}

func TestObserverOptionsAreClientOnly(t *testing.T) {
	c := newClient(t, locallock.New(nil))
	for _, o := range []locker.Option{locker.WithObserver(&recorder{}), locker.WithLostHook(func(locker.HoldEnd) {})} {
		if err := c.NewMutex("x", o).Lock(context.Background()); !errors.Is(err, locker.ErrInvalidOption) {
			t.Errorf("an observer option given to NewMutex: Lock = %v, want ErrInvalidOption", err)
		}
	}
	for _, o := range []locker.Option{locker.WithObserver(nil), locker.WithLostHook(nil)} {
		if _, err := locker.New(locallock.New(nil), o); !errors.Is(err, locker.ErrInvalidOption) {
			t.Errorf("New with a nil observer or hook = %v, want ErrInvalidOption", err)
		}
	}
}
