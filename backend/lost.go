package backend

import "sync"

// LostNotifier is an optional interface of a Lease: AfterLost arranges for
// f to run, on a goroutine of its own, once the channel of Lost is closed
// (at once if it is already), unless stop is called first. stop reports
// whether it stopped f from running, as context.AfterFunc's does. Package
// locker uses it, when a lease implements it, instead of a goroutine per
// hold that waits on Lost. LostSignal implements both for a driver.
type LostNotifier interface {
	AfterLost(f func()) (stop func() bool)
}

// LostSignal is a one-time signal that a hold is lost: the channel of a
// Lease's Lost method, and the functions registered with its AfterLost.
// Create one with NewLostSignal.
type LostSignal struct {
	mu   sync.Mutex
	ch   chan struct{}
	fs   map[uint64]func()
	next uint64
}

// NewLostSignal returns a signal that has not fired.
func NewLostSignal() *LostSignal { return &LostSignal{ch: make(chan struct{})} }

// C returns the channel that Fire closes.
func (s *LostSignal) C() <-chan struct{} { return s.ch }

// Fired reports whether Fire has been called.
func (s *LostSignal) Fired() bool {
	select {
	case <-s.ch:
		return true
	default:
		return false
	}
}

// Fire closes the channel and starts each function registered with
// AfterLost on a goroutine of its own, the first time it is called; it
// reports whether this call did.
func (s *LostSignal) Fire() bool {
	s.mu.Lock()
	if s.Fired() {
		s.mu.Unlock()
		return false
	}
	close(s.ch)
	fs := s.fs
	s.fs = nil
	s.mu.Unlock()
	for _, f := range fs {
		go f()
	}
	return true
}

// AfterLost implements LostNotifier.
func (s *LostSignal) AfterLost(f func()) (stop func() bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Fired() {
		go f()
		return func() bool { return false }
	}
	if s.fs == nil {
		s.fs = map[uint64]func(){}
	}
	id := s.next
	s.next++
	s.fs[id] = f
	return func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.fs[id]; !ok {
			return false
		}
		delete(s.fs, id)
		return true
	}
}
