package conformance

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

var inputChecks = []check{
	{
		name:   "input/bad_names_are_clear_errors",
		proves: []string{CapInput},
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			c := s.client(t)
			for _, name := range []string{"", "bad\xffutf8", "nul\x00byte", strings.Repeat("n", backend.MaxNameLen+1)} {
				m := c.NewMutex(name)
				if err := m.Lock(ctx); !errors.Is(err, locker.ErrInvalidName) {
					t.Errorf("Lock(%.20q) = %v, want ErrInvalidName", name, err)
				}
				if _, err := m.TryLock(ctx); !errors.Is(err, locker.ErrInvalidName) {
					t.Errorf("TryLock(%.20q) = %v, want ErrInvalidName", name, err)
				}
				if _, err := m.LockTimeout(ctx, time.Millisecond); !errors.Is(err, locker.ErrInvalidName) {
					t.Errorf("LockTimeout(%.20q) = %v, want ErrInvalidName", name, err)
				}
				if err := m.Unlock(ctx); !errors.Is(err, locker.ErrInvalidName) {
					t.Errorf("Unlock(%.20q) = %v, want ErrInvalidName", name, err)
				}
			}
		},
	},
	{
		name:   "input/bad_ttls_are_clear_errors",
		proves: []string{CapInput},
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			c := s.client(t)
			for _, ttl := range []time.Duration{0, -time.Second, time.Millisecond} {
				m := c.NewMutex(s.name(t, "ttl"), locker.WithTTL(ttl))
				if err := m.Lock(ctx); !errors.Is(err, locker.ErrInvalidTTL) {
					t.Errorf("Lock with TTL %v = %v, want ErrInvalidTTL", ttl, err)
				}
			}
			d := s.driver(t)
			defer d.Close() // New failed: the driver is still ours to close
			if _, err := locker.New(d, locker.WithTTL(0)); !errors.Is(err, locker.ErrInvalidTTL) {
				t.Errorf("New with TTL 0 = %v, want ErrInvalidTTL", err)
			}
		},
	},
	{
		name:   "input/nil_context_is_a_clear_error",
		proves: []string{CapInput},
		run: func(t *testing.T, s *suite) {
			var nilCtx context.Context
			m := s.client(t).NewMutex(s.name(t, "m"))
			if err := m.Lock(nilCtx); !errors.Is(err, locker.ErrNilContext) {
				t.Errorf("Lock(nil) = %v, want ErrNilContext", err)
			}
			if _, err := m.TryLock(nilCtx); !errors.Is(err, locker.ErrNilContext) {
				t.Errorf("TryLock(nil) = %v, want ErrNilContext", err)
			}
			if _, err := m.LockTimeout(nilCtx, time.Second); !errors.Is(err, locker.ErrNilContext) {
				t.Errorf("LockTimeout(nil) = %v, want ErrNilContext", err)
			}
			if err := m.Unlock(nilCtx); !errors.Is(err, locker.ErrNilContext) {
				t.Errorf("Unlock(nil) = %v, want ErrNilContext", err)
			}
		},
	},
	{
		name:   "input/unusual_names_are_distinct_locks",
		proves: []string{CapInput, CapExclusion},
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			a, b := s.client(t), s.client(t)
			base := s.name(t, "")
			names := []string{
				base + `quote'`, base + `quote"`, base + `back\slash`, base + "slash/es/",
				base + "space d", base + "ünïcødé-日本", base + "percent%25", base + "star*?[]{}",
				base + "semi;--", base + "emoji-🔒", base + strings.Repeat("x", 200),
			}
			for _, n := range names {
				m := a.NewMutex(n)
				ok, err := m.TryLock(ctx)
				if errors.Is(err, locker.ErrInvalidName) {
					t.Logf("the driver refuses %.40q: %v", n, err)
					continue
				}
				if err != nil || !ok {
					t.Fatalf("TryLock(%.40q) = %v, %v; want true", n, ok, err)
				}
				defer m.Unlock(ctx)
				if s.free(t, ctx, b, n) {
					t.Errorf("%.40q: another client took a held lock", n)
				}
			}
			// Every lock above is still held; a name that differs by one
			// character is another lock.
			if !s.free(t, ctx, b, base+"quote`") {
				t.Error("a name differing from held names only by its last character is not free")
			}
		},
	},
	{
		name:   "input/parent_child_and_prefix_names_are_distinct_locks",
		proves: []string{CapInput, CapExclusion},
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			a, b, probe := s.client(t), s.client(t), s.client(t)
			base := s.name(t, "")
			// The child first, then its parent, then the rest: in a store
			// of paths (ZooKeeper) or key ranges (etcd) a parent must not
			// block, nor be blocked by, its children.
			names := []string{base + "x/y", base + "x", base + "x/y/z", base + "x/", base + "xy", base + "x-", base + "x/y2"}
			clients := []*locker.Client{a, b}
			for i, n := range names {
				m := clients[i%2].NewMutex(n)
				ok, err := m.TryLock(ctx)
				if err != nil || !ok {
					t.Fatalf("TryLock(%q) while %q are held = %v, %v; want true", n, names[:i], ok, err)
				}
				defer m.Unlock(ctx)
			}
			for _, n := range names {
				if s.free(t, ctx, probe, n) {
					t.Errorf("%q: another client took a held lock", n)
				}
			}
			if s.ifs.Inspector {
				in := s.probeDriver(t).(backend.Inspector)
				hs, err := in.Holds(ctx, base+"x/")
				if err != nil {
					t.Fatalf("Holds: %v", err)
				}
				var got []string
				for _, h := range hs {
					got = append(got, h.Name)
				}
				slices.Sort(got)
				want := []string{base + "x/", base + "x/y", base + "x/y/z", base + "x/y2"}
				if !slices.Equal(got, want) {
					t.Errorf("Holds(%q) = %q, want %q", base+"x/", got, want)
				}
			}
		},
	},
}
