package locallock

import (
	"context"
	"time"

	"github.com/golocker/locker/backend"
)

// lease is one hold on a Store.
type lease struct {
	s     *Store
	e     *entry
	owner string
	token uint64
	start time.Time

	// Guarded by s.mu.
	expires time.Time
	timer   *time.Timer

	lost *backend.LostSignal
}

func (l *lease) Token() uint64 { return l.token }

func (l *lease) Start() time.Time { return l.start }

func (l *lease) Lost() *backend.LostSignal { return l.lost }

func (l *lease) current() bool { return l.e.holder == l }

func (l *lease) Renew(_ context.Context, ttl time.Duration) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if !l.current() {
		return backend.ErrLost
	}
	l.expires = time.Now().Add(ttl)
	l.timer.Reset(ttl)
	return nil
}

func (l *lease) Release(context.Context) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if !l.current() {
		return backend.ErrLost
	}
	l.s.vacate(l.e)
	return nil
}

// expire runs when the lease's timer fires.
func (l *lease) expire() {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if !l.current() || time.Now().Before(l.expires) {
		return // released, or renewed after the timer fired
	}
	l.drop()
}

// drop ends the hold against the owner's will. s.mu is held.
func (l *lease) drop() {
	l.lost.Fire()
	l.s.vacate(l.e)
}
