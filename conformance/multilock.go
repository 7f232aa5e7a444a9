package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
)

var multilockChecks = []check{
	{
		name:   "multilock/an_acquisition_that_fails_or_is_cancelled_leaves_nothing_held",
		proves: []string{CapMultiLock, CapCancellation},
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			a, b, c := s.name(t, "a"), s.name(t, "b"), s.name(t, "c")
			holder := locked(t, ctx, s.client(t), b)
			cl := s.client(t)
			ml := cl.NewMultiLock([]string{c, b, a})
			if ok, err := ml.TryLock(ctx); ok || err != nil {
				t.Fatalf("TryLock of a set with a name held elsewhere = %v, %v; want false", ok, err)
			}
			if ok, err := ml.LockTimeout(ctx, 50*time.Millisecond); ok || err != nil {
				t.Fatalf("LockTimeout of a set with a name held elsewhere = %v, %v; want false", ok, err)
			}
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			if err := ml.Lock(cctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Lock with a deadline = %v, want DeadlineExceeded", err)
			}
			cancel()
			// a, taken before b in the set's order, was given back: free,
			// and not renewed (a renewal would find it free and fail).
			other := s.client(t)
			if !s.free(t, ctx, other, a) {
				t.Error("a name of the set is held after the set's acquisition failed")
			}
			if !s.free(t, ctx, other, c) {
				t.Error("a name after the busy one is held after the set's acquisition failed")
			}
			if n := cl.LocalWaiters(a) + cl.LocalWaiters(b) + cl.LocalWaiters(c); n != 0 {
				t.Errorf("%d acquisitions of the set's names still wait in its Client", n)
			}
			mustUnlock(t, ctx, holder)
			if err := ml.Lock(ctx); err != nil {
				t.Fatalf("Lock of the free set: %v", err)
			}
			if err := ml.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			for _, n := range []string{a, b, c} {
				if !s.free(t, ctx, other, n) {
					t.Errorf("%s is held after the set's Unlock", n)
				}
			}
		},
	},
	{
		name:   "multilock/sets_given_in_opposite_orders_never_deadlock",
		proves: []string{CapMultiLock, CapExclusion},
		run: func(t *testing.T, s *suite) {
			const rounds = 10
			ctx := s.ctx(t)
			x, y, z := s.name(t, "x"), s.name(t, "y"), s.name(t, "z")
			orders := [][]string{{x, y, z}, {z, y, x}, {y, z, x}}
			res := &resource{}
			var wg sync.WaitGroup
			for _, names := range orders {
				ml := s.client(t).NewMultiLock(names)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range rounds {
						if err := acquireSomehow(ctx, ml, i); err != nil {
							t.Errorf("%v: %v", names, err)
							return
						}
						res.enter("a set", 0)
						res.exit()
						if err := ml.Unlock(ctx); err != nil {
							t.Errorf("%v: Unlock: %v", names, err)
							return
						}
					}
				}()
			}
			within(t, s.h.Timeout, "three sets of the same names in opposite orders", wg.Wait)
			res.check(t, len(orders)*rounds)
		},
	},
	{
		name:   "multilock/one_deadline_bounds_the_whole_set",
		proves: []string{CapMultiLock},
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			// The first name is free, the next five are held: a timeout
			// of d per name would wait 5d; the set's one deadline gives
			// up after about d (with quick to spare, less than 4d).
			const held = 5
			const d = quick / (held - 1)
			names := []string{s.name(t, "0")}
			other := s.client(t)
			for i := range held {
				n := s.name(t, fmt.Sprint(i+1))
				locked(t, ctx, other, n)
				names = append(names, n)
			}
			ml := s.client(t).NewMultiLock(names)
			start := time.Now()
			ok, err := ml.LockTimeout(ctx, d)
			took := time.Since(start)
			if ok || err != nil {
				t.Fatalf("LockTimeout = %v, %v; want false", ok, err)
			}
			if took < d-10*time.Millisecond {
				t.Errorf("LockTimeout(%v) gave up after %v", d, took)
			}
			if took > d+quick {
				t.Errorf("LockTimeout(%v) of a set with %d held names took %v: the timeout applied to each name", d, held, took)
			}
			if !s.free(t, ctx, s.client(t), names[0]) {
				t.Error("the set's first name is held after its LockTimeout gave up")
			}
		},
	},
	{
		name:   "multilock/the_set_is_lost_when_any_of_its_holds_is",
		proves: []string{CapMultiLock, CapLostSignal},
		skip:   needDrop,
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			a, b, c := s.name(t, "a"), s.name(t, "b"), s.name(t, "c")
			ml := s.client(t).NewMultiLock([]string{a, b, c}, locker.WithRenewInterval(s.ttl/10))
			lost := make(chan error, 1)
			if err := locker.Do(ctx, ml, func(ctx context.Context) error {
				s.drop(t, ctx, b)
				select {
				case <-ml.Lost():
				case <-time.After(s.settle() + quick):
					t.Error("the set's Lost did not close after one of its holds was dropped")
				}
				select {
				case <-ctx.Done():
				case <-time.After(quick):
				}
				lost <- context.Cause(ctx)
				return nil
			}); !errors.Is(err, locker.ErrLost) {
				t.Errorf("Do of the set = %v, want ErrLost", err)
			}
			if err := <-lost; !errors.Is(err, locker.ErrLost) {
				t.Errorf("Do's ctx ended with %v, want ErrLost", err)
			}
			if err := ml.Err(); !errors.Is(err, locker.ErrLost) {
				t.Errorf("Err = %v, want ErrLost", err)
			}
			// The others were unlocked by Do: free.
			other := s.client(t)
			for _, n := range []string{a, c} {
				if !s.free(t, ctx, other, n) {
					t.Errorf("%s is held after the set's Do returned", n)
				}
			}
		},
	},
}
