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
		name:   "declaration/notify_and_fifo_come_with_the_interfaces_they_need",
		proves: []string{CapDeclaration, CapNotify, CapFIFO},
		run: func(t *testing.T, s *suite) {
			if s.caps.Notify && !s.ifs.Waiter && !s.ifs.Watcher {
				t.Error("declares Notify but implements neither backend.Waiter nor backend.Watcher: nothing could wake a waiter")
			}
			if s.caps.FIFO && !s.ifs.Waiter {
				t.Error("declares FIFO but does not implement backend.Waiter: only a queue in the store keeps the order")
			}
			if s.caps.FIFO && !s.ifs.QueueInspector {
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
