package conformance

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

// errCut is what a cut-off driver returns: a transient failure, as a
// network partition would give.
var errCut = errors.New("conformance: connection cut by the suite")

// cutDriver wraps a driver so the suite can cut it off from the store: once
// cut, every call fails with errCut and nothing reaches the store.
type cutDriver struct {
	backend.Driver
	cut atomic.Bool
}

func (d *cutDriver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if d.cut.Load() {
		return nil, errCut
	}
	l, err := d.Driver.Acquire(ctx, r)
	if err != nil {
		return nil, err
	}
	return &cutLease{Lease: l, d: d}, nil
}

func (d *cutDriver) Close() error {
	if d.cut.Load() {
		// The process is gone: it closes nothing gracefully. The real
		// driver is still closed so the check leaks no goroutine.
		_ = d.Driver.Close()
		return errCut
	}
	return d.Driver.Close()
}

type cutLease struct {
	backend.Lease
	d *cutDriver
}

func (l *cutLease) Renew(ctx context.Context, ttl time.Duration) error {
	if l.d.cut.Load() {
		return errCut
	}
	return l.Lease.Renew(ctx, ttl)
}

func (l *cutLease) Release(ctx context.Context) error {
	if l.d.cut.Load() {
		return errCut
	}
	return l.Lease.Release(ctx)
}

// crashable returns a Client and a function that crashes it: through the
// harness's Crash hook when there is one, else by cutting it off.
func (s *suite) crashable(t *testing.T, opts ...locker.Option) (*locker.Client, func()) {
	t.Helper()
	d := s.driver(t)
	if s.h.Crash != nil {
		c := s.clientOn(t, d, opts...)
		return c, func() {
			if err := s.h.Crash(d); err != nil {
				t.Fatalf("Crash: %v", err)
			}
		}
	}
	cd := &cutDriver{Driver: d}
	return s.clientOn(t, cd, opts...), func() { cd.cut.Store(true) }
}

// cuttable returns a Client whose renewals and releases the suite can make
// fail, and the function that cuts it.
func (s *suite) cuttable(t *testing.T, opts ...locker.Option) (*locker.Client, func()) {
	t.Helper()
	cd := &cutDriver{Driver: s.driver(t)}
	return s.clientOn(t, cd, opts...), func() { cd.cut.Store(true) }
}

// drop makes the store forget the hold on name.
func (s *suite) drop(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if s.h.Drop != nil {
		if err := s.h.Drop(ctx, name); err != nil {
			t.Fatalf("Drop(%s): %v", name, err)
		}
		return
	}
	d := s.driver(t)
	defer d.Close()
	in, ok := d.(backend.Inspector)
	if !ok {
		t.Fatal("the driver declares Inspect but does not implement backend.Inspector")
	}
	if err := in.ForceRelease(ctx, name); err != nil {
		t.Fatalf("ForceRelease(%s): %v", name, err)
	}
}
