package locallock

import (
	"context"
	"slices"
	"strings"

	"github.com/golocker/locker/backend"
)

// Holds implements backend.Inspector.
func (d *Driver) Holds(_ context.Context, prefix string) ([]backend.Hold, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var hs []backend.Hold
	for name, e := range s.names {
		if e.holder == nil || !strings.HasPrefix(name, prefix) {
			continue
		}
		hs = append(hs, backend.Hold{Name: name, Owner: e.holder.owner, Token: e.holder.token, Expires: e.holder.expires})
	}
	slices.SortFunc(hs, func(a, b backend.Hold) int { return strings.Compare(a.Name, b.Name) })
	return hs, nil
}

// ForceRelease implements backend.Inspector: the holder's Lost closes and
// the first waiter gets the lock.
func (d *Driver) ForceRelease(_ context.Context, name string) error {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.names[name]
	if e == nil || e.holder == nil {
		return backend.ErrNotHeld
	}
	e.holder.drop()
	return nil
}

// Waiters implements backend.QueueInspector.
func (d *Driver) Waiters(_ context.Context, name string) (int, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.names[name]; e != nil {
		return e.waiters.Len(), nil
	}
	return 0, nil
}
