package locker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/locallock"
)

// memClient returns a Client on a fresh in-process store, closed by the
// test's cleanup.
func memClient(t *testing.T, s *locallock.Store, opts ...locker.Option) *locker.Client {
	t.Helper()
	c, err := locker.New(locallock.New(s), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// mutexOnly is a driver that does not declare Weighted.
type mutexOnly struct{ *locallock.Driver }

func (d mutexOnly) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	c.Weighted = false
	return c
}

func TestPrimitivesRefuseBadInput(t *testing.T) {
	ctx := testCtx(t)
	c := memClient(t, nil)
	plain, err := locker.New(mutexOnly{locallock.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	var zeroRW locker.RWMutex
	var zeroSem locker.Semaphore
	var zeroSet locker.MultiLock
	long := strings.Repeat("x", backend.MaxNameLen+1)
	for _, tc := range []struct {
		name string
		call func() error
		want error
		says string
	}{
		{"a limit of 0", func() error { _, err := c.NewSemaphore("s", 0).Acquire(ctx, 1); return err }, locker.ErrInvalidOption, "semaphore limit 0"},
		{"a limit above MaxLimit", func() error { _, err := c.NewSemaphore("s", backend.MaxLimit+1).TryAcquire(ctx, 1); return err }, locker.ErrInvalidOption, "must be 1 to"},
		{"0 permits", func() error { _, err := c.NewSemaphore("s", 2).Acquire(ctx, 0); return err }, locker.ErrInvalidOption, "0 permits"},
		{"more permits than the limit", func() error { _, err := c.NewSemaphore("s", 2).Acquire(ctx, 3); return err }, locker.ErrInvalidOption, "3 permits of a semaphore of 2"},
		{"a bad semaphore name", func() error { _, err := c.NewSemaphore("", 2).Acquire(ctx, 1); return err }, locker.ErrInvalidName, "empty"},
		{"a bad read-write lock name", func() error { return c.NewRWMutex(long).RLock(ctx) }, locker.ErrInvalidName, "bytes"},
		{"a nil ctx for RLock", func() error { var nilCtx context.Context; return c.NewRWMutex("rw").RLock(nilCtx) }, locker.ErrNilContext, "nil context"},
		{"a semaphore on a driver without weighted holds", func() error { _, err := plain.NewSemaphore("s", 2).Acquire(ctx, 1); return err }, locker.ErrNotSupported, "Weighted"},
		{"a read-write lock on a driver without weighted holds", func() error { return plain.NewRWMutex("rw").Lock(ctx) }, locker.ErrNotSupported, "rwmutex"},
		{"the zero RWMutex", func() error { return zeroRW.RLock(ctx) }, locker.ErrZeroHandle, "NewRWMutex"},
		{"the zero Semaphore", func() error { _, err := zeroSem.Acquire(ctx, 1); return err }, locker.ErrZeroHandle, "NewSemaphore"},
		{"the zero MultiLock", func() error { return zeroSet.Lock(ctx) }, locker.ErrZeroHandle, "NewMultiLock"},
		{"an empty MultiLock", func() error { return c.NewMultiLock(nil).Lock(ctx) }, locker.ErrInvalidOption, "at least one name"},
		{"a bad name in a MultiLock", func() error { return c.NewMultiLock([]string{"a", ""}).Lock(ctx) }, locker.ErrInvalidName, "empty"},
		{"a nil Permit's release", func() error { var p *locker.Permit; return p.Release(ctx) }, locker.ErrNotHeld, "not held"},
		{"a Locker of another package in Do", func() error { return locker.Do(ctx, foreign{}, func(context.Context) error { return nil }) }, locker.ErrInvalidOption, "Lockers of package locker"},
		{"RUnlock of nothing", func() error { return c.NewRWMutex("rw").RUnlock(ctx) }, locker.ErrNotHeld, "not held"},
		{"Downgrade of nothing", func() error { return c.NewRWMutex("rw").Downgrade(ctx) }, locker.ErrNotHeld, "not held"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("got %v, want %v saying %q", err, tc.want, tc.says)
			}
		})
	}
}

type foreign struct{ locker.Locker }

func TestRWMutexOwnership(t *testing.T) {
	ctx := testCtx(t)
	s := locallock.NewStore()
	rw := memClient(t, s).NewRWMutex("rw")
	other := memClient(t, s).NewRWMutex("rw")
	o := locker.WithOwner(ctx)

	// A writer may read and write again: one hold, one token.
	must(t, rw.Lock(o))
	h, _ := rw.Hold(o)
	must(t, rw.Lock(o))
	must(t, rw.RLock(o))
	if h2, _ := rw.Hold(o); h2.Token() != h.Token() {
		t.Errorf("token %d after re-entry, want %d", h2.Token(), h.Token())
	}
	must(t, rw.Unlock(o))
	if ok, _ := other.TryRLock(ctx); ok {
		t.Fatal("a reader got in while a write level was still held")
	}
	// The last write level with a read level left: a downgrade.
	must(t, rw.Unlock(o))
	if ok, _ := other.TryRLock(ctx); !ok {
		t.Fatal("a reader was refused after the writer's last write level, with a read level kept")
	}
	must(t, other.RUnlock(ctx))
	if err := rw.Unlock(o); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Unlock with no write level = %v, want ErrNotHeld", err)
	}
	must(t, rw.RUnlock(o))
	if ok, _ := other.TryLock(ctx); !ok {
		t.Fatal("a writer was refused after every level was released")
	}
	must(t, other.Unlock(ctx))

	// Without an owner in ctx, holds belong to the handle: any goroutine
	// may release them, a downgraded one with RUnlock.
	must(t, rw.Lock(ctx))
	must(t, rw.Downgrade(ctx))
	must(t, rw.RUnlock(ctx))
	if ok, _ := other.TryLock(ctx); !ok {
		t.Fatal("a writer was refused after the downgraded hold was released")
	}
	must(t, other.Unlock(ctx))
}

func TestPermits(t *testing.T) {
	ctx := testCtx(t)
	s := locallock.NewStore()
	sem := memClient(t, s).NewSemaphore("s", 3)
	p, err := sem.Acquire(ctx, 2)
	must(t, err)
	if p.Count() != 2 || p.Name() != "s" || p.Err() != nil {
		t.Errorf("Count, Name, Err = %d, %q, %v", p.Count(), p.Name(), p.Err())
	}
	must(t, p.Release(ctx))
	if err := p.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("a second Release = %v, want ErrNotHeld", err)
	}
	// The wait of AcquireTimeout runs out without an error.
	q, err := sem.Acquire(ctx, 3)
	must(t, err)
	start := time.Now()
	r, err := memClient(t, s).NewSemaphore("s", 3).AcquireTimeout(ctx, 1, 50*time.Millisecond)
	if r != nil || err != nil || time.Since(start) < 40*time.Millisecond {
		t.Errorf("AcquireTimeout while the limit is held = %v, %v after %v", r, err, time.Since(start))
	}
	// Closing the Client loses its permits.
	c := memClient(t, s)
	waiting := make(chan error, 1)
	go func() { _, err := c.NewSemaphore("s", 3).Acquire(ctx, 1); waiting <- err }()
	must(t, q.Release(ctx))
	if err := <-waiting; err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 0 {
		t.Errorf("the store keeps %d names after every permit ended", n)
	}
}

func TestObserverSeesKinds(t *testing.T) {
	ctx := testCtx(t)
	var rec recorder
	c := memClient(t, nil, locker.WithObserver(&rec))
	p, err := c.NewSemaphore("s", 2).Acquire(ctx, 1)
	must(t, err)
	must(t, p.Release(ctx))
	rw := c.NewRWMutex("rw")
	must(t, rw.RLock(ctx))
	must(t, rw.RUnlock(ctx))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var got []string
	for _, e := range rec.ends {
		got = append(got, e.Kind.String()+":"+e.Op)
	}
	if want := "semaphore:acquire rwmutex:rlock"; strings.Join(got, " ") != want {
		t.Errorf("acquisitions seen = %q, want %q", strings.Join(got, " "), want)
	}
	if len(rec.holds) != 2 || rec.holds[0].Kind != backend.Semaphore || rec.holds[1].Kind != backend.RWMutex {
		t.Errorf("hold ends = %+v", rec.holds)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestElectionRefusesBadInput(t *testing.T) {
	ctx := testCtx(t)
	c := memClient(t, nil)
	var zero locker.Election
	var nilTerm *locker.Term
	var nilCtx context.Context
	e := c.NewElection("e")
	for _, tc := range []struct {
		name string
		call func() error
		want error
		says string
	}{
		{"the zero Election", func() error { _, err := zero.Campaign(ctx, "v"); return err }, locker.ErrZeroHandle, "NewElection"},
		{"the zero Election's Leader", func() error { _, err := zero.Leader(ctx); return err }, locker.ErrZeroHandle, "zero handle"},
		{"a bad election name", func() error { _, err := c.NewElection("").TryCampaign(ctx, "v"); return err }, locker.ErrInvalidName, "empty"},
		{"a value too long", func() error {
			_, err := e.Campaign(ctx, strings.Repeat("v", backend.MaxValueLen+1))
			return err
		}, locker.ErrInvalidOption, "4097 bytes"},
		{"a nil ctx", func() error { _, err := e.Campaign(nilCtx, "v"); return err }, locker.ErrNilContext, "nil context"},
		{"Leader of a free election", func() error { _, err := e.Leader(ctx); return err }, locker.ErrNoLeader, "no leader"},
		{"a nil Term's Proclaim", func() error { return nilTerm.Proclaim(ctx, "v") }, locker.ErrNotHeld, "not held"},
		{"Run without a function", func() error { return e.Run(ctx, "v", nil) }, locker.ErrInvalidOption, "nil function"},
		{"Observe with a nil ctx", func() error { _, err := e.Observe(nilCtx); return err }, locker.ErrNilContext, "nil context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("got %v, want %v saying %q", err, tc.want, tc.says)
			}
		})
	}
	if err := nilTerm.Resign(ctx); err != nil {
		t.Errorf("a nil Term's Resign = %v, want nil", err)
	}
	if cause := context.Cause(nilTerm.Context()); !errors.Is(cause, locker.ErrNotHeld) {
		t.Errorf("a nil Term's Context ended with %v, want ErrNotHeld", cause)
	}
}

func TestObserveEndsWithTheClient(t *testing.T) {
	ctx := testCtx(t)
	c, err := locker.New(locallock.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	views, err := c.NewElection("e").Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-views
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range views {
	}
	if _, err := c.NewElection("e").Observe(ctx); !errors.Is(err, locker.ErrClosed) {
		t.Errorf("Observe on a closed Client = %v, want ErrClosed", err)
	}
}
