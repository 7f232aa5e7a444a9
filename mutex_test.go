package locker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/locallock"
)

func TestOptions(t *testing.T) {
	ctx := testCtx(t)
	badTTLs := []time.Duration{locker.MinTTL - time.Nanosecond, time.Millisecond, 0, -time.Second}
	for _, ttl := range badTTLs {
		t.Run(fmt.Sprintf("a_TTL_of_%v_is_ErrInvalidTTL_from_New", ttl), func(t *testing.T) {
			if c, err := locker.New(locallock.New(nil), locker.WithTTL(ttl)); !errors.Is(err, locker.ErrInvalidTTL) {
				closeIfOpen(c)
				t.Errorf("New = %v, want ErrInvalidTTL", err)
			}
		})
		t.Run(fmt.Sprintf("a_TTL_of_%v_is_ErrInvalidTTL_from_every_method_of_the_handle", ttl), func(t *testing.T) {
			m := newClient(t, locallock.New(nil)).NewMutex("options/ttl", locker.WithTTL(ttl))
			for op, err := range allMethods(ctx, m) {
				if !errors.Is(err, locker.ErrInvalidTTL) {
					t.Errorf("%s = %v, want ErrInvalidTTL", op, err)
				}
			}
		})
	}
	t.Run("a_TTL_of_exactly_MinTTL_is_accepted", func(t *testing.T) {
		m := newClient(t, locallock.New(nil)).NewMutex("options/min", locker.WithTTL(locker.MinTTL), locker.WithFixedLease())
		mustLock(t, ctx, m)
		_ = m.Unlock(ctx) // the lease may already have ended: ErrLost is fine
	})

	badClientOptions := []struct {
		name string
		opt  locker.Option
	}{
		{"a_nil_logger", locker.WithLogger(nil)},
		{"a_zero_release_timeout", locker.WithReleaseTimeout(0)},
		{"a_negative_release_timeout", locker.WithReleaseTimeout(-time.Second)},
	}
	for _, tc := range badClientOptions {
		t.Run(tc.name+"_is_ErrInvalidOption_from_New", func(t *testing.T) {
			if c, err := locker.New(locallock.New(nil), tc.opt); !errors.Is(err, locker.ErrInvalidOption) {
				closeIfOpen(c)
				t.Errorf("New = %v, want ErrInvalidOption", err)
			}
		})
	}
	t.Run("a_zero_release_timeout_is_ErrInvalidOption_from_the_handle", func(t *testing.T) {
		m := newClient(t, locallock.New(nil)).NewMutex("options/rt", locker.WithReleaseTimeout(0))
		for op, err := range allMethods(ctx, m) {
			if !errors.Is(err, locker.ErrInvalidOption) {
				t.Errorf("%s = %v, want ErrInvalidOption", op, err)
			}
		}
	})
	t.Run("a_logger_given_to_NewMutex_is_ErrInvalidOption_from_Lock", func(t *testing.T) {
		m := newClient(t, locallock.New(nil)).NewMutex("options/logger", locker.WithLogger(slog.Default()))
		err := m.Lock(ctx)
		if !errors.Is(err, locker.ErrInvalidOption) || !strings.Contains(err.Error(), "WithLogger") {
			t.Errorf("Lock = %v, want ErrInvalidOption naming WithLogger", err)
		}
	})
	t.Run("a_logger_given_to_New_is_accepted", func(t *testing.T) {
		m := newClient(t, locallock.New(nil), locker.WithLogger(slog.Default())).NewMutex("options/logger")
		mustLock(t, ctx, m)
		mustUnlock(t, ctx, m)
	})
	t.Run("a_nil_option_is_ignored", func(t *testing.T) {
		m := newClient(t, locallock.New(nil), nil).NewMutex("options/nil", nil)
		mustLock(t, ctx, m)
		mustUnlock(t, ctx, m)
	})
	t.Run("New_with_a_nil_driver_is_an_error_not_a_panic", func(t *testing.T) {
		c, err := locker.New(nil)
		if c != nil || !errors.Is(err, locker.ErrInvalidOption) {
			t.Errorf("New(nil) = %v, %v; want nil, ErrInvalidOption", c, err)
		}
	})
}

func TestLockTimeout(t *testing.T) {
	ctx := testCtx(t)
	store := locallock.NewStore()
	holder := newClient(t, locallock.New(store)).NewMutex("timeout/held")
	mustLock(t, ctx, holder)
	t.Cleanup(func() { _ = holder.Unlock(context.Background()) })
	c := newClient(t, locallock.New(store))

	for _, wait := range []time.Duration{0, -time.Second} {
		t.Run(fmt.Sprintf("a_wait_of_%v_takes_a_free_lock_as_TryLock", wait), func(t *testing.T) {
			m := c.NewMutex("timeout/free")
			if ok, err := m.LockTimeout(ctx, wait); !ok || err != nil {
				t.Fatalf("LockTimeout = %v, %v; want true, nil", ok, err)
			}
			mustUnlock(t, ctx, m)
		})
		t.Run(fmt.Sprintf("a_wait_of_%v_on_a_held_lock_returns_false_at_once", wait), func(t *testing.T) {
			within(t, 5*time.Second, "LockTimeout", func() {
				if ok, err := c.NewMutex("timeout/held").LockTimeout(ctx, wait); ok || err != nil {
					t.Errorf("LockTimeout = %v, %v; want false, nil", ok, err)
				}
			})
		})
	}

	// The caller's ctx ending is an error, not "the wait ran out".
	parents := []struct {
		name  string
		ctx   func() (context.Context, context.CancelFunc)
		cause error
	}{
		{"a_parent_deadline_before_the_wait_is_an_error", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 100*time.Millisecond)
		}, context.DeadlineExceeded},
		{"a_parent_cancelled_during_the_wait_is_an_error", func() (context.Context, context.CancelFunc) {
			pctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(100*time.Millisecond, cancel)
			return pctx, cancel
		}, context.Canceled},
	}
	for _, tc := range parents {
		t.Run(tc.name, func(t *testing.T) {
			pctx, cancel := tc.ctx()
			defer cancel()
			within(t, 5*time.Second, "LockTimeout", func() {
				ok, err := c.NewMutex("timeout/held").LockTimeout(pctx, time.Minute)
				if ok || !errors.Is(err, tc.cause) {
					t.Errorf("LockTimeout = %v, %v; want false, %v", ok, err, tc.cause)
				}
			})
		})
	}
}

func TestTryLock(t *testing.T) {
	t.Run("on_a_handle_whose_other_goroutine_waits_in_Lock_returns_false_at_once", func(t *testing.T) {
		ctx := testCtx(t)
		store := locallock.NewStore()
		holder := newClient(t, locallock.New(store)).NewMutex("trylock/shared")
		mustLock(t, ctx, holder)
		d := locallock.New(store)
		m := newClient(t, d).NewMutex("trylock/shared")
		waited := make(chan error, 1)
		go func() { waited <- m.Lock(ctx) }()
		drivertest.Eventually(t, 5*time.Second, "the handle waits in Lock", func() bool {
			n, err := d.Waiters(ctx, "trylock/shared")
			return err == nil && n == 1
		})
		within(t, 5*time.Second, "TryLock", func() {
			if ok, err := m.TryLock(ctx); ok || err != nil {
				t.Errorf("TryLock = %v, %v; want false, nil", ok, err)
			}
		})
		mustUnlock(t, ctx, holder)
		if err := <-waited; err != nil {
			t.Fatalf("the waiting Lock = %v", err)
		}
		mustUnlock(t, ctx, m)
	})
}

func TestDriverErrors(t *testing.T) {
	ctx := testCtx(t)
	cause := errors.New("dial tcp 10.0.0.1:6379: i/o timeout")
	for _, tc := range []struct {
		name string
		err  error
		is   error
	}{
		{"a_driver_error_is_wrapped_once_with_the_operation_and_name", cause, cause},
		{"a_driver_error_wrapping_a_sentinel_still_matches_it", fmt.Errorf("store gone: %w", backend.ErrClosed), locker.ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newWrapDriver(nil, false)
			d.acquireErr = tc.err
			_, err := newClient(t, d).NewMutex("errors/n").TryLock(ctx)
			var oe *locker.OpError
			if !errors.As(err, &oe) || oe.Op != "trylock" || oe.Name != "errors/n" {
				t.Fatalf("TryLock = %#v, want an *OpError for trylock \"errors/n\"", err)
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.is)
			}
			if want := `locker: trylock "errors/n": ` + tc.err.Error(); err.Error() != want {
				t.Errorf("TryLock = %q, want %q", err, want)
			}
		})
	}
	t.Run("a_permanent_error_ends_a_Lock_at_once", func(t *testing.T) {
		d := newWrapDriver(nil, false)
		d.acquireErr = fmt.Errorf("store gone: %w", backend.ErrClosed)
		err := newClient(t, d).NewMutex("errors/p").Lock(ctx)
		if want := `locker: lock "errors/p": store gone: locker: closed`; err == nil || err.Error() != want {
			t.Errorf("Lock = %v, want %q", err, want)
		}
	})
	t.Run("a_failed_attempt_is_made_again_by_a_new_owner", func(t *testing.T) {
		d := &failOnce{Driver: locallock.New(nil)}
		m := newClient(t, pollOnly{d}).NewMutex("errors/again")
		mustLock(t, ctx, m)
		mustUnlock(t, ctx, m)
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.owners) != 2 || d.owners[0] == d.owners[1] {
			t.Errorf("Acquire was called by %q, want two calls by two owners", d.owners)
		}
	})
}

// failOnce is a driver whose first Acquire fails with a transient error
// whose outcome is unknown, and which notes the owner of each call.
type failOnce struct {
	backend.Driver
	mu     sync.Mutex
	owners []string
}

func (d *failOnce) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	d.mu.Lock()
	d.owners = append(d.owners, r.Owner)
	first := len(d.owners) == 1
	d.mu.Unlock()
	if first {
		return nil, errTransient
	}
	return d.Driver.Acquire(ctx, r)
}

func TestClient(t *testing.T) {
	t.Run("Close_releases_holds_makes_handles_return_ErrClosed_and_is_idempotent", func(t *testing.T) {
		ctx := testCtx(t)
		store := locallock.NewStore()
		c, err := locker.New(locallock.New(store))
		if err != nil {
			t.Fatal(err)
		}
		held := c.NewMutex("close/held")
		octx := locker.WithOwner(ctx)
		mustLock(t, octx, held)
		mustLock(t, octx, held) // re-entered: Close frees it all the same
		idle := c.NewMutex("close/idle")
		for i := range 2 {
			if err := c.Close(); err != nil {
				t.Errorf("Close #%d = %v", i+1, err)
			}
		}
		other := newClient(t, locallock.New(store)).NewMutex("close/held")
		if ok, err := other.TryLock(ctx); !ok || err != nil {
			t.Errorf("TryLock after Close = %v, %v; want true, nil", ok, err)
		} else {
			mustUnlock(t, ctx, other)
		}
		for _, m := range []*locker.Mutex{held, idle, c.NewMutex("close/new")} {
			for op, err := range allMethods(ctx, m) {
				if !errors.Is(err, locker.ErrClosed) {
					t.Errorf("%s(%s) after Close = %v, want ErrClosed", op, m.Name(), err)
				}
			}
		}
		if n := held.HoldCount(); n != 0 {
			t.Errorf("HoldCount after Close = %d, want 0", n)
		}
	})
	t.Run("Holds_and_ForceRelease_are_ErrNotSupported_without_an_Inspector", func(t *testing.T) {
		ctx := testCtx(t)
		c := newClient(t, newWrapDriver(nil, false))
		if hs, err := c.Holds(ctx, ""); hs != nil || !errors.Is(err, locker.ErrNotSupported) {
			t.Errorf("Holds = %v, %v; want nil, ErrNotSupported", hs, err)
		}
		if err := c.ForceRelease(ctx, "x"); !errors.Is(err, locker.ErrNotSupported) {
			t.Errorf("ForceRelease = %v, want ErrNotSupported", err)
		}
	})
	t.Run("Holds_lists_by_prefix_and_ForceRelease_of_a_free_lock_is_ErrNotHeld", func(t *testing.T) {
		ctx := testCtx(t)
		c := newClient(t, locallock.New(nil))
		for _, n := range []string{"jobs/b", "jobs/a", "orders/1"} {
			m := c.NewMutex(n)
			mustLock(t, ctx, m)
			t.Cleanup(func() { _ = m.Unlock(context.Background()) })
		}
		hs, err := c.Holds(ctx, "jobs/")
		if err != nil || len(hs) != 2 || hs[0].Name != "jobs/a" || hs[1].Name != "jobs/b" {
			t.Errorf("Holds(jobs/) = %+v, %v; want jobs/a and jobs/b", hs, err)
		}
		if err := c.ForceRelease(ctx, "jobs/free"); !errors.Is(err, locker.ErrNotHeld) {
			t.Errorf("ForceRelease of a free lock = %v, want ErrNotHeld", err)
		}
		if err := c.ForceRelease(ctx, ""); !errors.Is(err, locker.ErrInvalidName) {
			t.Errorf("ForceRelease(\"\") = %v, want ErrInvalidName", err)
		}
	})
}

// allMethods calls each method of m that may take a hold, and Unlock, and
// returns their errors by name. A call that succeeds is undone.
func allMethods(ctx context.Context, m *locker.Mutex) map[string]error {
	errs := map[string]error{}
	if errs["Lock"] = m.Lock(ctx); errs["Lock"] == nil {
		_ = m.Unlock(ctx)
	}
	ok, err := m.TryLock(ctx)
	if errs["TryLock"] = err; ok {
		_ = m.Unlock(ctx)
	}
	ok, err = m.LockTimeout(ctx, time.Millisecond)
	if errs["LockTimeout"] = err; ok {
		_ = m.Unlock(ctx)
	}
	errs["Unlock"] = m.Unlock(ctx)
	return errs
}

// Helpers shared by the package's external tests.

// testCtx bounds a test: a hang fails instead of stalling the run.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newClient returns a Client on d that the test's cleanup closes.
func newClient(t *testing.T, d backend.Driver, opts ...locker.Option) *locker.Client {
	t.Helper()
	c, err := locker.New(d, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func closeIfOpen(c *locker.Client) {
	if c != nil {
		_ = c.Close()
	}
}

func mustLock(t *testing.T, ctx context.Context, m *locker.Mutex) {
	t.Helper()
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock(%s): %v", m.Name(), err)
	}
}

func mustUnlock(t *testing.T, ctx context.Context, m *locker.Mutex) {
	t.Helper()
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock(%s): %v", m.Name(), err)
	}
}

// within fails the test if f has not returned after d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}
