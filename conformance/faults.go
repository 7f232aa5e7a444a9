package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

// faulty returns a new driver whose connection the suite controls: the
// harness's NewFaultyDriver, or a driver wrapped with FaultyDriver.
func (s *suite) faulty(t *testing.T) (backend.Driver, Faults) {
	t.Helper()
	if s.h.NewFaultyDriver != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.h.Timeout)
		defer cancel()
		d, f, err := s.h.NewFaultyDriver(ctx)
		if err != nil {
			t.Fatalf("NewFaultyDriver: %v", err)
		}
		t.Cleanup(func() { f.Resume(); f.Restore() })
		return d, f
	}
	d, f := FaultyDriver(s.driver(t))
	t.Cleanup(func() { f.Resume(); f.Restore() })
	return d, f
}

// faultyClient returns a Client on a faulty driver and its controls. The
// faults end before the Client is closed.
func (s *suite) faultyClient(t *testing.T, opts ...locker.Option) (*locker.Client, Faults) {
	t.Helper()
	d, f := s.faulty(t)
	c := s.clientOn(t, d, opts...)
	t.Cleanup(func() { f.Resume(); f.Restore() })
	return c, f
}

// faultyHolder returns a Mutex on name, locked through a Client on a
// faulty driver, and the controls of that driver's connection.
func (s *suite) faultyHolder(t *testing.T, ctx context.Context, name string) (*locker.Mutex, Faults) {
	t.Helper()
	c, f := s.faultyClient(t)
	return locked(t, ctx, c, name), f
}

// cutOff locks name through a faulty driver, cuts that driver off the
// store, and has another owner take the lock over (takeOver, waiting up to
// wait). It returns the cut-off holder and its connection's controls.
func (s *suite) cutOff(t *testing.T, ctx context.Context, name string, wait time.Duration) (*locker.Mutex, Faults) {
	t.Helper()
	a, f := s.faultyHolder(t, ctx, name)
	f.Cut()
	s.takeOver(t, ctx, a, wait, "the holder is cut off")
	return a, f
}

// crashable returns a Client and a function that crashes it: through the
// harness's Crash hook when there is one, else by cutting it off.
func (s *suite) crashable(t *testing.T, opts ...locker.Option) (*locker.Client, func()) {
	t.Helper()
	if s.h.Crash != nil {
		d := s.driver(t)
		c := s.clientOn(t, d, opts...)
		return c, func() {
			if err := s.h.Crash(d); err != nil {
				t.Fatalf("Crash: %v", err)
			}
		}
	}
	c, f := s.faultyClient(t, opts...)
	return c, f.Cut
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
		t.Fatal("the driver does not implement backend.Inspector")
	}
	if err := in.ForceRelease(ctx, name); err != nil {
		t.Fatalf("ForceRelease(%s): %v", name, err)
	}
}

// takeOver locks a's name through a Client of its own, waiting up to wait
// for a's hold to run out while (how) a cannot reach the store, and fails
// t unless it gets the lock and a was told first that its hold was lost.
// It returns the new owner's Mutex, unlocked when the check ends.
func (s *suite) takeOver(t *testing.T, ctx context.Context, a *locker.Mutex, wait time.Duration, how string) *locker.Mutex {
	t.Helper()
	b := s.client(t).NewMutex(a.Name())
	if ok, err := b.LockTimeout(ctx, wait); !ok || err != nil {
		t.Fatalf("LockTimeout while %s = %v, %v; want true once its hold ran out", how, ok, err)
	}
	t.Cleanup(func() { mustUnlock(t, ctx, b) })
	select {
	case <-a.Lost():
	default:
		t.Fatalf("another owner got the lock while %s, before it was told its hold was lost", how)
	}
	return b
}

// pauseFor is how long a paused client stays paused in the fault checks:
// long enough for its holds (leases or session) to run out on the store
// several times over.
func (s *suite) pauseFor() time.Duration {
	return 3 * max(s.ttl, s.h.SessionTTL)
}

// settle is how long, after a lease or session could have run out, the
// store may take to free the lock.
func (s *suite) settle() time.Duration {
	return 2*max(s.ttl, s.h.SessionTTL) + quick
}

var faultChecks = []check{
	{
		name:   "faults/a_paused_holder_is_told_before_another_owner_gets_the_lock",
		proves: []string{CapFaults, CapExpiry, CapFencing},
		skip:   needCut,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a, f := s.faultyHolder(t, ctx, name)
			tokA := a.Token()
			f.Pause()
			b := s.takeOver(t, ctx, a, s.pauseFor()+s.settle(), "the holder is paused")
			if s.caps.Fencing && b.Token() <= tokA {
				t.Errorf("the next owner's token %d is not above the paused holder's %d", b.Token(), tokA)
			}
			f.Resume()
			s.staleUnlock(t, ctx, a, "the resumed holder")
		},
	},
	{
		name:   "faults/a_cut_off_holder_is_told_before_another_owner_gets_the_lock",
		proves: []string{CapFaults, CapExpiry},
		skip:   needCut,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a, f := s.cutOff(t, ctx, name, s.pauseFor()+s.settle())
			f.Restore()
			if err := a.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
				t.Errorf("the reconnected holder's Unlock = %v, want ErrLost", err)
			}
		},
	},
	{
		name:   "faults/an_acquisition_whose_ctx_ends_while_its_request_is_in_flight_leaves_the_lock_free",
		proves: []string{CapFaults, CapCancellation},
		skip:   needFaults,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			// A long lease: a grant left behind would block the probe
			// for far longer than the check waits.
			c, f := s.faultyClient(t, locker.WithTTL(60*time.Second))
			probe := s.client(t)
			const delay, deadline = 400 * time.Millisecond, 150 * time.Millisecond
			f.SetDelay(delay)
			for _, op := range []string{"TryLock", "Lock", "LockTimeout"} {
				m := c.NewMutex(name)
				dctx, cancel := context.WithTimeout(ctx, deadline)
				var err error
				var ok bool
				within(t, delay+quick, op+" with slow replies", func() {
					switch op {
					case "TryLock":
						ok, err = m.TryLock(dctx)
					case "Lock":
						err = m.Lock(dctx)
						ok = err == nil
					default:
						ok, err = m.LockTimeout(dctx, time.Minute)
					}
				})
				cancel()
				if ok {
					t.Errorf("%s returned the lock although its ctx ended before the reply came", op)
					_ = m.Unlock(ctx)
					continue
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s = %v, want an error matching context.DeadlineExceeded", op, err)
				}
				// The request reached the store; its grant must not be
				// left behind, held by nobody until its lease ends.
				eventually(t, delay+quick, op+": the lock free for another owner", func() bool {
					return s.free(t, ctx, probe, name)
				})
			}
		},
	},
	{
		name:   "faults/a_waiter_paused_past_its_lease_or_session_returns_a_real_hold_with_a_fresh_token_or_an_error",
		proves: []string{CapFaults, CapFencing, CapExclusion},
		skip:   needFaults,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a := locked(t, ctx, s.client(t), name)
			bc, f := s.faultyClient(t)
			b := bc.NewMutex(name)
			got := make(chan error, 1)
			go func() { got <- b.Lock(ctx) }()
			s.awaitWaiters(t, ctx, name, 1)
			f.Pause()
			// The store may hand the lock to the paused waiter now; its
			// grant must lapse, and the others go on.
			mustUnlock(t, ctx, a)
			probe := s.client(t)
			var highest uint64
			end := time.Now().Add(s.pauseFor())
			for time.Now().Before(end) {
				m := probe.NewMutex(name)
				ok, err := m.LockTimeout(ctx, time.Until(end))
				if err != nil {
					t.Fatalf("another owner's LockTimeout while the waiter is paused: %v", err)
				}
				if !ok {
					break
				}
				highest = max(highest, m.Token())
				mustUnlock(t, ctx, m)
			}
			f.Resume()
			var err error
			within(t, s.settle()+s.pauseFor(), "the resumed waiter's Lock", func() { err = <-got })
			if err != nil {
				t.Logf("the resumed waiter's Lock failed: %v", err)
				if !s.free(t, ctx, probe, name) {
					t.Error("the resumed waiter's Lock failed but left the lock held")
				}
				return
			}
			if s.caps.Fencing && b.Token() <= highest {
				t.Errorf("the resumed waiter holds with token %d, not above %d, granted while it was paused: a stale grant", b.Token(), highest)
			}
			if s.free(t, ctx, probe, name) {
				t.Error("the resumed waiter's Lock returned nil, but another owner could take the lock: it holds nothing")
			}
			if err := b.Unlock(ctx); err != nil {
				t.Errorf("the resumed waiter's Unlock: %v", err)
			}
		},
	},
	{
		name:   "faults/a_killed_server_never_gives_two_owners_the_lock",
		proves: []string{CapFaults, CapExclusion, CapFencing},
		skip: func(s *suite) string {
			if s.h.KillServer == nil {
				return "the harness has no KillServer hook"
			}
			return ""
		},
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a := locked(t, ctx, s.client(t), name)
			tokA := a.Token()
			// Opened before the kill: a driver may check the store when
			// it opens.
			b := s.client(t).NewMutex(name)
			restart, err := s.h.KillServer(ctx)
			if err != nil {
				t.Fatalf("KillServer: %v", err)
			}
			restarted := false
			defer func() {
				if !restarted {
					rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					if err := restart(rctx); err != nil {
						t.Errorf("restart: %v", err)
					}
				}
			}()
			gotB := false
			for end := time.Now().Add(s.settle()); time.Now().Before(end) && !gotB; {
				tctx, cancel := context.WithTimeout(ctx, quick)
				ok, err := b.TryLock(tctx)
				cancel()
				if err != nil {
					t.Logf("TryLock while the server is down: %v", err)
				}
				if ok {
					gotB = true
					select {
					case <-a.Lost():
					default:
						t.Fatal("another owner got the lock while the first was not told its hold was lost")
					}
					break
				}
				time.Sleep(s.ttl / 5)
			}
			rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			err = restart(rctx)
			cancel()
			restarted = true
			if err != nil {
				t.Fatalf("restart: %v", err)
			}
			select {
			case <-a.Lost():
				if err := a.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
					t.Errorf("Unlock of the lost hold = %v, want ErrLost", err)
				}
			default:
				if gotB {
					t.Fatal("two owners hold the lock")
				}
				if err := a.Unlock(ctx); err != nil && !errors.Is(err, locker.ErrLost) {
					t.Errorf("Unlock of the hold that lived through the kill: %v", err)
				}
			}
			if !gotB {
				lctx, cancel := context.WithTimeout(ctx, s.settle()+time.Minute)
				defer cancel()
				mustLock(t, lctx, b)
			}
			if s.caps.Fencing && b.Token() <= tokA {
				t.Errorf("the next owner's token %d is not above %d, the token before the kill", b.Token(), tokA)
			}
			mustUnlock(t, ctx, b)
		},
	},
}
