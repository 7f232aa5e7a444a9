package locallock

import (
	"cmp"
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
		hs = append(hs, backend.Hold{Name: name, Owner: e.holder.owner, Token: e.holder.token, Expires: e.holder.expires, Kind: backend.Mutex, Limit: 1, Weight: 1})
	}
	for k, e := range s.weighted {
		if !strings.HasPrefix(k.name, prefix) {
			continue
		}
		for l := range e.holds {
			hs = append(hs, backend.Hold{Name: k.name, Owner: l.owner, Token: l.token, Expires: l.expires, Kind: k.kind, Limit: e.limit, Weight: l.weight, Value: l.value})
		}
	}
	slices.SortFunc(hs, func(a, b backend.Hold) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Token, b.Token))
	})
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
	n := 0
	if e := s.names[name]; e != nil {
		n = e.waiters.Len()
	}
	for _, k := range []backend.Kind{backend.Semaphore, backend.RWMutex} {
		if e := s.weighted[wkey{k, name}]; e != nil {
			n += e.queue.Len()
		}
	}
	return n, nil
}
