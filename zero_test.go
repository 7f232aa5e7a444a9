package locker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golocker/locker"
)

// TestZeroMutex: a Mutex declared as a sync.Mutex would be (var m
// locker.Mutex), or a nil *Mutex, has no Client. Each method says so, or
// returns its zero value, instead of panicking.
func TestZeroMutex(t *testing.T) {
	ctx := testCtx(t)
	var zero locker.Mutex
	for _, tc := range []struct {
		name string
		m    *locker.Mutex
	}{{"the zero Mutex", &zero}, {"a nil *Mutex", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			errs := map[string]error{"Err": m.Err()}
			errs["Lock"] = m.Lock(ctx)
			ok, err := m.TryLock(ctx)
			errs["TryLock"] = err
			if ok {
				t.Error("TryLock = true")
			}
			ok, err = m.LockTimeout(ctx, time.Millisecond)
			errs["LockTimeout"] = err
			if ok {
				t.Error("LockTimeout = true")
			}
			errs["Unlock"] = m.Unlock(ctx)
			ran := false
			errs["Do"] = locker.Do(ctx, m, func(context.Context) error { ran = true; return nil })
			if ran {
				t.Error("Do ran its function")
			}
			for op, err := range errs {
				if !errors.Is(err, locker.ErrZeroMutex) || !strings.Contains(err.Error(), "Client.NewMutex") {
					t.Errorf("%s = %v, want ErrZeroMutex, saying to use Client.NewMutex", op, err)
				}
			}
			if tok := m.Token(); tok != 0 {
				t.Errorf("Token = %d, want 0", tok)
			}
			if n := m.HoldCount(); n != 0 {
				t.Errorf("HoldCount = %d, want 0", n)
			}
			if ch := m.Lost(); ch != nil {
				t.Errorf("Lost = %v, want nil", ch)
			}
			if name := m.Name(); name != "" {
				t.Errorf("Name = %q, want \"\"", name)
			}
		})
	}
	// The message a user sees, as in TestErrorMessages.
	if got, want := zero.Lock(ctx).Error(), `locker: lock "": zero Mutex: make it with Client.NewMutex`; got != want {
		t.Errorf("message:\n got %s\nwant %s", got, want)
	}
}
