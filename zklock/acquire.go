package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/golocker/locker/backend"
)

// Acquire implements backend.Driver.
//
// It creates a protected ephemeral sequential node under the name's node;
// the owner holds the lock when its node has the lowest sequence. Otherwise
// a waiting Acquire watches the next lower node only — each release wakes
// one waiter, the next in line — and checks again; a non-waiting one
// deletes its node and returns ErrHeld. Every failure and every
// cancellation deletes the node before returning.
func (d *Driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir := d.dir(r.Name)
	for ctx.Err() == nil {
		g, err := d.generation(ctx)
		if err != nil {
			return nil, err
		}
		l, err := d.acquireIn(ctx, g, dir, r)
		if errors.Is(err, errSessionEnded) {
			// The session ended, or the node vanished, while the
			// acquisition was in flight: queue again.
			continue
		}
		return l, err
	}
	return nil, ctx.Err()
}

// acquireIn runs one acquisition in generation g.
func (d *Driver) acquireIn(ctx context.Context, g *generation, dir string, r backend.Request) (backend.Lease, error) {
	if !r.Wait {
		// Create a node only when the lock looks free: a crowd of
		// TryLocks that each create a node and delete it when it is not
		// the lowest could otherwise all fail, for ever. Among those that
		// create one, the lowest wins.
		nodes, err := d.nodes(ctx, dir)
		if err != nil {
			return nil, ctxErr(ctx, err)
		}
		if len(nodes) > 0 {
			return nil, backend.ErrHeld
		}
	}
	path, err := d.createNode(ctx, g, dir, newGUID(), []byte(r.Owner))
	if err != nil {
		return nil, err
	}
	own := path[strings.LastIndexByte(path, '/')+1:]
	// The node's stat (its czxid is the fencing token) and a watch on it,
	// which reports at once if it goes while we wait. The read is sent
	// alongside the first listing of the children: the connection
	// pipelines the two, one round trip instead of two.
	ownc := make(chan ownRead, 1)
	go func() {
		_, st, w, err := d.conn.GetW(path)
		ownc <- ownRead{st, w, err}
	}()
	var st *zk.Stat
	var ownW <-chan zk.Event
	for {
		start := time.Now()
		var children []string
		err := d.call(ctx, func() (err error) { children, _, err = d.conn.Children(dir); return err })
		if ownc != nil {
			var o ownRead
			select {
			case o = <-ownc:
			case <-ctx.Done():
				d.remove(ctx, g, path)
				return nil, ctx.Err()
			}
			ownc = nil
			switch {
			case errors.Is(o.err, zk.ErrNoNode):
				return nil, errSessionEnded
			case o.err != nil:
				d.remove(ctx, g, path)
				return nil, ctxErr(ctx, o.err)
			case o.st.EphemeralOwner != g.id:
				// Created in a session that replaced g's.
				d.remove(ctx, g, path)
				return nil, errSessionEnded
			}
			st, ownW = o.st, o.w
		}
		if err != nil {
			d.remove(ctx, g, path)
			return nil, ctxErr(ctx, err)
		}
		nodes := lockNodes(children)
		i := 0
		for i < len(nodes) && nodes[i].name != own {
			i++
		}
		switch {
		case i == len(nodes):
			return nil, errSessionEnded // our node is gone
		case i == 0:
			return d.granted(ctx, g, path, uint64(st.Czxid), start, ownW)
		case !r.Wait:
			d.remove(ctx, g, path)
			return nil, backend.ErrHeld
		}
		if ownW, err = d.awaitPredecessor(ctx, g, path, dir+"/"+nodes[i-1].name, ownW); err != nil {
			d.remove(ctx, g, path)
			return nil, err
		}
	}
}

// ownRead is the outcome of reading an acquisition's own node.
type ownRead struct {
	st  *zk.Stat
	w   <-chan zk.Event
	err error
}

// awaitPredecessor waits until pred, the next lower node, changes (or is
// already gone), and returns the watch on the own node, set again if it
// fired for a change of data.
func (d *Driver) awaitPredecessor(ctx context.Context, g *generation, path, pred string, ownW <-chan zk.Event) (<-chan zk.Event, error) {
	var predW <-chan zk.Event
	err := d.call(ctx, func() (err error) { _, _, predW, err = d.conn.GetW(pred); return err })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return ownW, nil
	case err != nil:
		return nil, ctxErr(ctx, err)
	}
	d.watching.Add(1)
	defer d.watching.Add(-1)
	for {
		select {
		case <-predW:
			d.predEvents.Add(1)
			return ownW, nil
		case ev := <-ownW:
			if ev.Type == zk.EventNodeDeleted || ev.Type == zk.EventNotWatching {
				return nil, errSessionEnded
			}
			err := d.call(ctx, func() (err error) { _, _, ownW, err = d.conn.GetW(path); return err })
			if errors.Is(err, zk.ErrNoNode) {
				return nil, errSessionEnded
			}
			if err != nil {
				return nil, ctxErr(ctx, err)
			}
		case <-g.done:
			return nil, errSessionEnded
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-d.ctx.Done():
			return nil, backend.ErrClosed
		}
	}
}

// granted makes the hold of the node at path a lease, unless its
// generation ended or the Driver was closed meanwhile.
func (d *Driver) granted(ctx context.Context, g *generation, path string, token uint64, start time.Time, ownW <-chan zk.Event) (backend.Lease, error) {
	l := &lease{
		d:        d,
		g:        g,
		path:     path,
		token:    token,
		start:    start,
		lost:     make(chan struct{}),
		released: make(chan struct{}),
	}
	if g.lost() {
		d.remove(ctx, g, path)
		return nil, errSessionEnded
	}
	if !d.goBackground(func() { l.watch(ownW) }) {
		d.remove(ctx, g, path)
		return nil, backend.ErrClosed
	}
	return l, nil
}

// createNode creates the acquisition's node in dir, creating dir (and the
// prefix) when missing. When the connection drops with the create in
// flight, the request may or may not have been applied: the node is then
// looked for by its GUID once the client is connected again. When ctx ends
// with the create in flight, a background goroutine waits for its outcome
// and deletes whatever it created.
func (d *Driver) createNode(ctx context.Context, g *generation, dir, guid string, data []byte) (string, error) {
	base := dir + "/" + nodePrefix(guid)
	for attempt := 0; ; attempt++ {
		res := make(chan created, 1)
		go func() {
			p, err := d.conn.Create(base, data, zk.FlagEphemeral|zk.FlagSequence, d.acl)
			res <- created{p, err}
		}()
		var r created
		select {
		case r = <-res:
		case <-ctx.Done():
			d.giveUp(ctx, g, dir, guid, res)
			return "", ctx.Err()
		}
		switch {
		case r.err == nil:
			return r.path, nil
		case errors.Is(r.err, zk.ErrNoNode) && attempt < 5:
			if err := d.ensureDir(ctx, dir); err != nil {
				return "", ctxErr(ctx, err)
			}
		case errors.Is(r.err, zk.ErrSessionExpired):
			return "", errSessionEnded // a node it made went with the session
		case notApplied(r.err):
			return "", r.err
		default:
			p, err := d.findByGUID(ctx, g, dir, guid)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					d.goBackground(func() { d.deleteByGUID(g, dir, guid) })
				}
				return "", ctxErr(ctx, err)
			case p != "":
				d.recovered.Add(1)
				return p, nil
			case d.conn.SessionID() != g.id:
				return "", errSessionEnded
			}
			// Not created: try again.
		}
	}
}

// created is the outcome of a create request.
type created struct {
	path string
	err  error
}

// giveUp cleans up after a create that was in flight when ctx ended. It
// waits a grace period for the create's outcome, so that the node is
// deleted before Acquire returns; when the outcome does not come in time,
// or does not say whether the node was made, a background goroutine waits
// for it and deletes the node if there is one.
func (d *Driver) giveUp(ctx context.Context, g *generation, dir, guid string, res <-chan created) {
	t := time.NewTimer(cleanupTimeout)
	defer t.Stop()
	select {
	case r := <-res:
		switch {
		case r.err == nil:
			d.remove(ctx, g, r.path)
			return
		case notApplied(r.err):
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		p, err := d.findByGUID(cctx, g, dir, guid)
		cancel()
		if err == nil {
			if p != "" {
				d.remove(ctx, g, p)
			}
			return
		}
		d.goBackground(func() { d.deleteByGUID(g, dir, guid) })
	case <-t.C:
		d.goBackground(func() {
			select {
			case <-res:
			case <-d.ctx.Done():
				return
			}
			d.deleteByGUID(g, dir, guid)
		})
	}
}

// notApplied reports whether a create that failed with err certainly
// created nothing.
func notApplied(err error) bool {
	for _, e := range []error{
		zk.ErrNoNode, zk.ErrNoAuth, zk.ErrInvalidACL, zk.ErrBadArguments, zk.ErrNoChildrenForEphemerals,
		zk.ErrInvalidPath, zk.ErrInvalidFlags, zk.ErrNodeExists, zk.ErrNoServer, zk.ErrAPIError,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// findByGUID looks for the node of guid in dir, retrying while the
// connection is being re-established in the same session. It returns ""
// when there is none, or the session changed (the node, if any, went with
// it).
func (d *Driver) findByGUID(ctx context.Context, g *generation, dir, guid string) (string, error) {
	prefix := nodePrefix(guid)
	for {
		if d.conn.SessionID() != g.id {
			return "", nil
		}
		var children []string
		err := d.call(ctx, func() (err error) { children, _, err = d.conn.Children(dir); return err })
		switch {
		case err == nil:
			for _, c := range children {
				if strings.HasPrefix(c, prefix) {
					return dir + "/" + c, nil
				}
			}
			return "", nil
		case errors.Is(err, zk.ErrNoNode):
			return "", nil
		case !retryable(err) && !errors.Is(err, zk.ErrNoServer):
			return "", err
		}
		if !pause(ctx, 50*time.Millisecond) {
			return "", ctx.Err()
		}
	}
}

// deleteByGUID deletes the node of an acquisition abandoned with its
// create in flight, if it was created. It runs in the background, until it
// knows, the session changes or the Driver is closed.
func (d *Driver) deleteByGUID(g *generation, dir, guid string) {
	p, err := d.findByGUID(d.ctx, g, dir, guid)
	if err != nil || p == "" {
		return
	}
	d.remove(d.ctx, g, p)
}

// ensureDir creates the lock's node as a container — the server deletes
// it once it has been empty for a while (every minute, by default) — and
// the prefix's nodes, persistent, when they are missing.
func (d *Driver) ensureDir(ctx context.Context, dir string) error {
	createDir := func() error {
		_, err := d.conn.CreateContainer(dir, nil, zk.FlagContainer, d.acl)
		return err
	}
	err := d.call(ctx, createDir)
	if !errors.Is(err, zk.ErrNoNode) {
		if errors.Is(err, zk.ErrNodeExists) {
			err = nil
		}
		return err
	}
	p := ""
	for _, seg := range strings.Split(d.prefix[1:], "/") {
		p += "/" + seg
		err := d.call(ctx, func() error { _, err := d.conn.Create(p, nil, zk.FlagPersistent, d.acl); return err })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zklock: create %s: %w", p, err)
		}
	}
	if err := d.call(ctx, createDir); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	return nil
}
