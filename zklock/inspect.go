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
	dirs, err := d.children(ctx, d.prefix)
	if err != nil {
		return nil, d.storeErr(ctx, err)
	}
	var hs []backend.Hold
	for _, esc := range dirs {
		name, ok := unescape(esc)
		if !ok || !strings.HasPrefix(name, prefix) {
			continue
		}
		for {
			nodes, err := d.nodes(ctx, d.prefix+"/"+esc)
			if err != nil {
				return nil, d.storeErr(ctx, err)
			}
			if len(nodes) == 0 {
				break
			}
			var data []byte
			var st *zk.Stat
			err = d.call(ctx, func() (err error) { data, st, err = d.conn.Get(d.prefix + "/" + esc + "/" + nodes[0].name); return err })
			if err == nil {
				hs = append(hs, backend.Hold{Name: name, Owner: string(data), Token: uint64(st.Mzxid)})
				break
			} else if !errors.Is(err, zk.ErrNoNode) { // else released meanwhile: look again
				return nil, d.storeErr(ctx, err)
			}
		}
	}
	slices.SortFunc(hs, func(a, b backend.Hold) int { return strings.Compare(a.Name, b.Name) })
	return hs, nil
}

// children lists the children of path, none when it is missing. A server
// may lag behind the ensemble's leader, so the list is read after a sync:
// it shows every change made before children was called, by any client (a
// TryLock right after another owner's Unlock finds the lock free).
func (d *Driver) children(ctx context.Context, path string) ([]string, error) {
	var children []string
	err := d.call(ctx, func() (err error) {
		if _, err = d.conn.Sync(path); err == nil {
			children, _, err = d.conn.Children(path)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			err = nil
		}
		return nil, err // children may still be written by the call
	}
	return children, nil
}

// nodes lists the lock nodes of dir in order (see children).
func (d *Driver) nodes(ctx context.Context, dir string) ([]lockNode, error) {
	children, err := d.children(ctx, dir)
	return lockNodes(children), err
}

// ForceRelease implements backend.Inspector: it deletes the lowest node of
// name, so that its owner's Lost closes and the next waiter gets the lock.
func (d *Driver) ForceRelease(ctx context.Context, name string) error {
	dir := d.dir(name)
	for {
		nodes, err := d.nodes(ctx, dir)
		if err != nil {
			return d.storeErr(ctx, err)
		}
		if len(nodes) == 0 {
			return backend.ErrNotHeld
		}
		err = d.call(ctx, func() error { return d.conn.Delete(dir+"/"+nodes[0].name, -1) })
		if err == nil || !errors.Is(err, zk.ErrNoNode) { // else released meanwhile: look again
			return d.storeErr(ctx, err)
		}
	}
}

// Waiters implements backend.QueueInspector: the nodes of name but the
// holder's.
func (d *Driver) Waiters(ctx context.Context, name string) (int, error) {
	nodes, err := d.nodes(ctx, d.dir(name))
	if err != nil {
		return 0, d.storeErr(ctx, err)
	}
	return max(len(nodes)-1, 0), nil
}
