package backend

import "sync"

// LostSignal is a one-time signal that a hold is lost, returned by a
// Lease's Lost method: the driver calls Fire when the store reports the
// hold gone, and package locker learns of it through AfterLost, without a
// goroutine per hold. Create one with NewLostSignal; it is safe for
// concurrent use.
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

// AfterLost arranges for f to run, on a goroutine of its own, once Fire is
// called (at once if it was already), unless stop is called first. stop
// reports whether it stopped f from running, as context.AfterFunc's does.
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
