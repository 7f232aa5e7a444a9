package zklock

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/golocker/locker/backend"
)

// Holds implements backend.Inspector: for each lock whose name starts with
// prefix, its lowest node, which holds it. Expires is zero: a hold lives as
// long as its owner's session.
func (d *Driver) Holds(ctx context.Context, prefix string) ([]backend.Hold, error) {
	var dirs []string
	err := d.call(ctx, func() (err error) {
		if _, err := d.conn.Sync(d.prefix); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		dirs, _, err = d.conn.Children(d.prefix)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var hs []backend.Hold
	for _, esc := range dirs {
		name, ok := unescape(esc)
		if !ok || !strings.HasPrefix(name, prefix) {
			continue
		}
		h, ok, err := d.holder(ctx, d.prefix+"/"+esc)
		if err != nil {
			return nil, err
		}
		if ok {
			h.Name = name
			hs = append(hs, h)
		}
	}
	slices.SortFunc(hs, func(a, b backend.Hold) int { return strings.Compare(a.Name, b.Name) })
	return hs, nil
}

// holder reads the lowest node of the lock dir.
func (d *Driver) holder(ctx context.Context, dir string) (backend.Hold, bool, error) {
	for {
		nodes, err := d.nodes(ctx, dir)
		if err != nil || len(nodes) == 0 {
			return backend.Hold{}, false, err
		}
		var data []byte
		var st *zk.Stat
		err = d.call(ctx, func() (err error) { data, st, err = d.conn.Get(dir + "/" + nodes[0].name); return err })
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue // released meanwhile
		case err != nil:
			return backend.Hold{}, false, err
		}
		return backend.Hold{Owner: string(data), Token: uint64(st.Czxid)}, true, nil
	}
}

// nodes lists the lock nodes of dir in order; none when dir is missing.
// A server may lag behind the ensemble's leader, so the list is read after
// a sync: it shows every change made before nodes was called, by any
// client (a TryLock right after another owner's Unlock finds the lock
// free).
func (d *Driver) nodes(ctx context.Context, dir string) ([]lockNode, error) {
	var children []string
	err := d.call(ctx, func() (err error) {
		if _, err := d.conn.Sync(dir); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		children, _, err = d.conn.Children(dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return lockNodes(children), nil
}

// ForceRelease implements backend.Inspector: it deletes the lowest node of
// name, so that its owner's Lost closes and the next waiter gets the lock.
func (d *Driver) ForceRelease(ctx context.Context, name string) error {
	dir := d.dir(name)
	for {
		nodes, err := d.nodes(ctx, dir)
		if err != nil {
			return err
		}
		if len(nodes) == 0 {
			return backend.ErrNotHeld
		}
		err = d.call(ctx, func() error { return d.conn.Delete(dir+"/"+nodes[0].name, -1) })
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		// Released meanwhile: look again.
	}
}

// Waiters implements backend.QueueInspector: the nodes of name but the
// holder's.
func (d *Driver) Waiters(ctx context.Context, name string) (int, error) {
	nodes, err := d.nodes(ctx, d.dir(name))
	if err != nil {
		return 0, err
	}
	return max(len(nodes)-1, 0), nil
}
