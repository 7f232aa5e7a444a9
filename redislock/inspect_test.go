package redislock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/drivertest"
)

// TestInspect lists holds by prefix on every topology, names with the
// characters the keys escape included, and force-releases one.
func TestInspect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		url  func(*testing.T) string
	}{
		{"standalone", standaloneURL},
		{"cluster", clusterURL},
		{"redlock", redlockURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := drivertest.Context(t, time.Minute)
			url := tc.url(t)
			c := openClient(t, url, locker.WithTTL(time.Minute))
			prefix := "inspect/" + tc.name + "/*[x]}%/"
			names := []string{prefix + "a", prefix + "b}", prefix + "c%7D", prefix + "}{"}
			var handles []*locker.Mutex
			for _, n := range names {
				m := c.NewMutex(n)
				if err := m.Lock(ctx); err != nil {
					t.Fatalf("Lock(%q): %v", n, err)
				}
				handles = append(handles, m)
			}
			other := locked(t, ctx, c, "inspect/"+tc.name+"/other")
			defer other.Unlock(ctx)

			holds, err := c.Holds(ctx, prefix)
			if err != nil {
				t.Fatalf("Holds: %v", err)
			}
			var got []string
			for _, h := range holds {
				got = append(got, h.Name)
				if h.Owner == "" || time.Until(h.Expires) <= 0 || time.Until(h.Expires) > time.Minute {
					t.Errorf("hold %+v: want an owner and an expiry within the TTL", h)
				}
				wantToken := c.Capabilities().Fencing
				if (h.Token != 0) != wantToken {
					t.Errorf("hold %q token %d, fencing %v", h.Name, h.Token, wantToken)
				}
			}
			want := slices.Sorted(slices.Values(names))
			if !slices.Equal(got, want) {
				t.Errorf("Holds(%q) = %q, want %q", prefix, got, want)
			}

			if err := c.ForceRelease(ctx, names[1]); err != nil {
				t.Fatalf("ForceRelease: %v", err)
			}
			if err := c.ForceRelease(ctx, names[1]); !errors.Is(err, locker.ErrNotHeld) {
				t.Errorf("second ForceRelease = %v, want ErrNotHeld", err)
			}
			if ok, err := openClient(t, url).NewMutex(names[1]).TryLock(ctx); !ok || err != nil {
				t.Errorf("TryLock after ForceRelease = %v, %v", ok, err)
			}
			for i, m := range handles {
				err := m.Unlock(context.WithoutCancel(ctx))
				if i == 1 && !errors.Is(err, locker.ErrLost) {
					t.Errorf("Unlock of the force-released hold = %v, want ErrLost", err)
				}
				if i != 1 && err != nil {
					t.Errorf("Unlock(%q): %v", names[i], err)
				}
			}
		})
	}
}
