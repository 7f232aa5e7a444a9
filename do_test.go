package locker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/locallock"
)

func TestDo(t *testing.T) {
	t.Run("returns_fns_error_and_unlocks", func(t *testing.T) {
		ctx := testCtx(t)
		m := newClient(t, locallock.New(nil)).NewMutex("do/err")
		want := errors.New("charge declined")
		var held int
		err := locker.Do(ctx, m, func(context.Context) error {
			held = m.HoldCount()
			return want
		})
		if err != want {
			t.Errorf("Do = %v, want fn's error %v", err, want)
		}
		if held != 1 {
			t.Errorf("HoldCount inside fn = %d, want 1", held)
		}
		if n := m.HoldCount(); n != 0 {
			t.Errorf("HoldCount after Do = %d, want 0", n)
		}
	})

	t.Run("unlocks_when_fn_panics", func(t *testing.T) {
		ctx := testCtx(t)
		store := locallock.NewStore()
		m := newClient(t, locallock.New(store)).NewMutex("do/panic")
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("recovered %v, want fn's panic", r)
				}
			}()
			_ = locker.Do(ctx, m, func(context.Context) error { panic("boom") })
		}()
		other := newClient(t, locallock.New(store)).NewMutex("do/panic")
		if ok, err := other.TryLock(ctx); !ok || err != nil {
			t.Fatalf("TryLock after the panic = %v, %v; want true, nil", ok, err)
		}
		mustUnlock(t, ctx, other)
	})

	t.Run("cancels_fns_ctx_with_cause_ErrLost_when_the_hold_is_force_released", func(t *testing.T) {
		ctx := testCtx(t)
		d := locallock.New(nil)
		m := newClient(t, d).NewMutex("do/lost")
		var cause error
		err := locker.Do(ctx, m, func(fctx context.Context) error {
			if err := d.ForceRelease(ctx, "do/lost"); err != nil {
				return err
			}
			select {
			case <-fctx.Done():
				cause = context.Cause(fctx)
				return fctx.Err()
			case <-time.After(5 * time.Second):
				return errors.New("fn's ctx was not cancelled after the force release")
			}
		})
		if !errors.Is(cause, locker.ErrLost) {
			t.Errorf("context.Cause = %v, want ErrLost", cause)
		}
		if !errors.Is(err, locker.ErrLost) || !errors.Is(err, context.Canceled) {
			t.Errorf("Do = %v, want fn's context.Canceled joined with ErrLost", err)
		}
	})

	t.Run("with_a_nil_ctx_is_ErrNilContext_and_does_not_run_fn", func(t *testing.T) {
		m := newClient(t, locallock.New(nil)).NewMutex("do/nil")
		ran := false
		var nilCtx context.Context
		err := locker.Do(nilCtx, m, func(context.Context) error { ran = true; return nil })
		if !errors.Is(err, locker.ErrNilContext) || ran {
			t.Errorf("Do(nil ctx) = %v, ran fn: %v; want ErrNilContext, false", err, ran)
		}
	})

	t.Run("returns_Locks_error_and_does_not_run_fn", func(t *testing.T) {
		ctx := testCtx(t)
		m := newClient(t, locallock.New(nil)).NewMutex("")
		ran := false
		err := locker.Do(ctx, m, func(context.Context) error { ran = true; return nil })
		var oe *locker.OpError
		if !errors.Is(err, locker.ErrInvalidName) || !errors.As(err, &oe) || oe.Op != "lock" || ran {
			t.Errorf("Do = %v, ran fn: %v; want Lock's ErrInvalidName, false", err, ran)
		}
	})

	// Close releases every hold, so fn would go on without the lock while
	// another owner takes it: its ctx must end as for a lost hold.
	t.Run("cancels_fns_ctx_when_Close_releases_the_hold", func(t *testing.T) {
		ctx := testCtx(t)
		c, err := locker.New(locallock.New(nil))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		started := make(chan struct{})
		ended := make(chan bool, 1) // whether fn's ctx ended
		go func() {
			_ = locker.Do(ctx, c.NewMutex("do/close"), func(fctx context.Context) error {
				close(started)
				select {
				case <-fctx.Done():
					ended <- true
				case <-time.After(2 * time.Second):
					ended <- false
				}
				return nil
			})
		}()
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("fn did not start")
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
		if !<-ended {
			t.Error("fn's ctx still live 2s after Close released the hold")
		}
	})
}

func TestDoWhenBusy(t *testing.T) {
	ctx := context.Background()
	store := locallock.NewStore()
	c1, _ := locker.New(locallock.New(store))
	c2, _ := locker.New(locallock.New(store))
	defer c1.Close()
	defer c2.Close()
	holder := c1.NewMutex("job")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	ran := false
	fn := func(context.Context) error { ran = true; return nil }

	t.Run("fail_fast_returns_ErrBusy_at_once", func(t *testing.T) {
		start := time.Now()
		err := locker.Do(ctx, c2.NewMutex("job"), fn, locker.OnBusy(locker.FailFast))
		if !errors.Is(err, locker.ErrBusy) || ran {
			t.Errorf("Do = %v (ran %v), want ErrBusy without running", err, ran)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("FailFast took %v", el)
		}
	})
	t.Run("skip_returns_nil_without_running", func(t *testing.T) {
		if err := locker.Do(ctx, c2.NewMutex("job"), fn, locker.OnBusy(locker.Skip)); err != nil || ran {
			t.Errorf("Do = %v (ran %v), want nil without running", err, ran)
		}
	})
	t.Run("wait_at_most_gives_up_with_ErrBusy", func(t *testing.T) {
		start := time.Now()
		err := locker.Do(ctx, c2.NewMutex("job"), fn, locker.WaitAtMost(50*time.Millisecond))
		if !errors.Is(err, locker.ErrBusy) || ran {
			t.Errorf("Do = %v (ran %v), want ErrBusy", err, ran)
		}
		if el := time.Since(start); el < 40*time.Millisecond {
			t.Errorf("WaitAtMost(50ms) gave up after %v", el)
		}
	})
	t.Run("wait_at_most_runs_fn_when_the_lock_frees_in_time", func(t *testing.T) {
		time.AfterFunc(20*time.Millisecond, func() { _ = holder.Unlock(ctx) })
		if err := locker.Do(ctx, c2.NewMutex("job"), fn, locker.WaitAtMost(5*time.Second)); err != nil || !ran {
			t.Errorf("Do = %v (ran %v), want nil after running", err, ran)
		}
	})
	t.Run("bad_options_are_errors", func(t *testing.T) {
		for _, o := range []locker.DoOption{locker.OnBusy(locker.Busy(9)), locker.WaitAtMost(0)} {
			if err := locker.Do(ctx, c2.NewMutex("job"), fn, o); !errors.Is(err, locker.ErrInvalidOption) {
				t.Errorf("Do = %v, want ErrInvalidOption", err)
			}
		}
	})
}
