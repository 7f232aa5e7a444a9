package conformance

import (
	"testing"
	"time"

	"github.com/golocker/locker/backend"
)

// The declaration checks fail a driver whose declared capabilities contradict
// what it implements. The behaviour checks in the other files then prove
// each declared capability.
var declarationChecks = []check{
	{
		name:   "declaration/capabilities_do_not_change",
		proves: []string{CapDeclaration},
		run: func(t *testing.T, s *suite) {
			d := s.driver(t)
			defer d.Close()
			if got := d.Capabilities(); got != s.caps {
				t.Errorf("Capabilities() = %+v on a second driver, %+v on the first", got, s.caps)
			}
		},
	},
	{
		name:   "declaration/inspect_matches_the_inspector_interface",
		proves: []string{CapDeclaration, CapInspect},
		run: func(t *testing.T, s *suite) {
			d := s.driver(t)
			defer d.Close()
			_, ok := d.(backend.Inspector)
			if ok != s.caps.Inspect {
				t.Errorf("declares Inspect=%v, implements backend.Inspector=%v", s.caps.Inspect, ok)
			}
		},
	},
	{
		name:   "declaration/fifo_drivers_can_count_waiters",
		proves: []string{CapDeclaration, CapFIFO},
		skip:   needFIFO,
		run: func(t *testing.T, s *suite) {
			d := s.driver(t)
			defer d.Close()
			if _, ok := d.(backend.QueueInspector); !ok {
				t.Error("declares FIFO but does not implement backend.QueueInspector, which the suite needs to prove the order")
			}
		},
	},
	{
		name:   "declaration/session_lease_needs_lost_signal",
		proves: []string{CapDeclaration, CapSessionLease},
		run: func(t *testing.T, s *suite) {
			if s.caps.SessionLease && !s.caps.LostSignal {
				t.Error("declares SessionLease without LostSignal: nothing would ever tell an owner that its session ended")
			}
		},
	},
	{
		name:   "declaration/lost_channel_and_token_match_the_declaration",
		proves: []string{CapDeclaration, CapLostSignal, CapFencing},
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			d := s.driver(t)
			defer d.Close()
			name := s.name(t, "l")
			for i := range 3 {
				l, err := d.Acquire(ctx, backend.Request{Name: name, Owner: s.id + "-decl-" + string(rune('a'+i)), TTL: 10 * time.Second})
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				if got := l.Lost() != nil; got != s.caps.LostSignal {
					t.Errorf("declares LostSignal=%v, Lease.Lost() non-nil=%v", s.caps.LostSignal, got)
				}
				if !s.caps.Fencing && l.Token() != 0 {
					t.Errorf("does not declare Fencing but Token() = %d, want 0", l.Token())
				}
				if s.caps.Fencing && l.Token() == 0 {
					t.Error("declares Fencing but Token() = 0")
				}
				if err := l.Release(ctx); err != nil {
					t.Fatalf("Release: %v", err)
				}
			}
		},
	},
}
