package locker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/locallock"
)

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
