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
	c, err := d.createNode(ctx, g, dir, newGUID(), []byte(r.Owner))
	if err != nil {
		return nil, err
	}
	path := c.path
	if d.afterCreate != nil {
		d.afterCreate()
	}
	// token is the node's czxid, the fencing token, once known; ownW is a
	// watch on the node, which reports at once if it goes while we wait.
	token := c.czxid
	if token != 0 {
		d.createdTokens.Add(1)
		if d.conn.SessionID() != g.id {
			// Created in a session that replaced g's.
			d.remove(ctx, g, path)
			return nil, errSessionEnded
		}
	}
	own := path[strings.LastIndexByte(path, '/')+1:]
	var ownW <-chan zk.Event
	for {
		start := time.Now()
		var children []string
		err := d.call(ctx, func() (err error) { children, _, err = d.conn.Children(dir); return err })
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
		case i == 0 && token == 0:
			st, w, err := d.checkOwn(ctx, g, path, d.readOwn(ctx, path))
			if err != nil {
				return nil, err
			}
			return d.granted(ctx, g, path, uint64(st.Czxid), start, w)
		case i == 0:
			// ownW is nil when the lock was free: the lease sets it.
			return d.granted(ctx, g, path, uint64(token), start, ownW)
		case !r.Wait:
			d.remove(ctx, g, path)
			return nil, backend.ErrHeld
		}
		// Wait. The first time, the own node is read, and watched,
		// alongside the predecessor: the connection pipelines the two
		// requests.
		var ownc chan ownRead
		if ownW == nil {
			ownc = make(chan ownRead, 1)
			go func() {
				_, st, w, err := d.conn.GetW(path)
				ownc <- ownRead{st, w, err}
			}()
		}
		predW, gone, err := d.watchPredecessor(ctx, dir+"/"+nodes[i-1].name)
		if ownc != nil {
			var o ownRead
			select {
			case o = <-ownc:
			case <-ctx.Done():
				d.remove(ctx, g, path)
				return nil, ctx.Err()
			}
			st, w, oerr := d.checkOwn(ctx, g, path, o)
			if oerr != nil {
				return nil, oerr
			}
			ownW, token = w, st.Czxid
		}
		if err != nil {
			d.remove(ctx, g, path)
			return nil, err
		}
		if gone {
			continue
		}
		if ownW, err = d.awaitPredecessor(ctx, g, path, predW, ownW); err != nil {
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

// readOwn reads the own node at path and sets a watch on it.
func (d *Driver) readOwn(ctx context.Context, path string) ownRead {
	// st and w are read only once the request returned: when ctx ends
	// first, its goroutine may still write them.
	var st *zk.Stat
	var w <-chan zk.Event
	if err := d.call(ctx, func() (err error) { _, st, w, err = d.conn.GetW(path); return err }); err != nil {
		return ownRead{err: err}
	}
	return ownRead{st: st, w: w}
}

// checkOwn returns the own node's stat and watch from o, or the error
// that ends the acquisition, after removing the node if need be.
func (d *Driver) checkOwn(ctx context.Context, g *generation, path string, o ownRead) (*zk.Stat, <-chan zk.Event, error) {
	switch {
	case errors.Is(o.err, zk.ErrNoNode):
		return nil, nil, errSessionEnded
	case o.err != nil:
		d.remove(ctx, g, path)
		return nil, nil, ctxErr(ctx, o.err)
	case o.st.EphemeralOwner != g.id:
		// Created in a session that replaced g's.
		d.remove(ctx, g, path)
		return nil, nil, errSessionEnded
	}
	return o.st, o.w, nil
}

// watchPredecessor sets a watch on pred, the next lower node; gone
// reports that it is gone already.
func (d *Driver) watchPredecessor(ctx context.Context, pred string) (<-chan zk.Event, bool, error) {
	// w is read only once the request returned (see readOwn).
	var w <-chan zk.Event
	err := d.call(ctx, func() (err error) { _, _, w, err = d.conn.GetW(pred); return err })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, true, nil
	case err != nil:
		return nil, false, ctxErr(ctx, err)
	}
	return w, false, nil
}

// awaitPredecessor waits until the predecessor's watch predW fires, and
// returns the watch on the own node, set again if it fired for a change
// of data.
func (d *Driver) awaitPredecessor(ctx context.Context, g *generation, path string, predW, ownW <-chan zk.Event) (<-chan zk.Event, error) {
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
		lost:     backend.NewLostSignal(),
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
func (d *Driver) createNode(ctx context.Context, g *generation, dir, guid string, data []byte) (created, error) {
	base := dir + "/" + nodePrefix(guid)
	for attempt := 0; ; attempt++ {
		res := make(chan created, 1)
		go func() { res <- d.create(base, dir, data) }()
		var r created
		select {
		case r = <-res:
		case <-ctx.Done():
			d.giveUp(ctx, g, dir, guid, res)
			return created{}, ctx.Err()
		}
		switch {
		case r.err == nil:
			return r, nil
		case errors.Is(r.err, zk.ErrNoNode) && attempt < 5:
			if err := d.ensureDir(ctx, dir); err != nil {
				return created{}, ctxErr(ctx, err)
			}
		case errors.Is(r.err, zk.ErrSessionExpired):
			return created{}, errSessionEnded // a node it made went with the session
		case notApplied(r.err):
			return created{}, r.err
		default:
			p, err := d.findByGUID(ctx, g, dir, guid)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					d.goBackground(func() { d.deleteByGUID(g, dir, guid) })
				}
				return created{}, ctxErr(ctx, err)
			case p != "":
				d.recovered.Add(1)
				return created{path: p}, nil
			case d.conn.SessionID() != g.id:
				return created{}, errSessionEnded
			}
			// Not created: try again.
		}
	}
}

// created is the outcome of a create request: the node's path, and its
// czxid when known (0 otherwise).
type created struct {
	path  string
	czxid int64
	err   error
}

// create creates the node at base (its sequence appended), in one
// transaction with a write of dir's data: that write's stat, returned with
// the path, dates the transaction, and so gives the node's czxid — the
// fencing token — without reading the node (go-zookeeper's Create returns
// no stat). The write changes nothing else: dir's data stays empty, and
// nobody watches it. Where the ACL of dir, made by someone else, forbids
// the write, the Driver creates the node alone from then on, and reads
// its czxid.
func (d *Driver) create(base, dir string, data []byte) created {
	const flags = zk.FlagEphemeral | zk.FlagSequence
	if !d.plainCreate.Load() {
		mr, err := d.conn.Multi(
			&zk.CreateRequest{Path: base, Data: data, Acl: d.acl, Flags: flags},
			&zk.SetDataRequest{Path: dir, Version: -1},
		)
		switch {
		case err == nil && len(mr) == 2 && mr[1].Stat != nil:
			return created{path: mr[0].String, czxid: mr[1].Stat.Mzxid}
		case err == nil:
			return created{err: fmt.Errorf("zklock: create %s: unexpected response to a multi", base)}
		case !errors.Is(err, zk.ErrNoAuth) || len(mr) != 2 || mr[0].Error != nil:
			return created{err: err}
		}
		d.plainCreate.Store(true)
	}
	p, err := d.conn.Create(base, data, flags, d.acl)
	return created{path: p, err: err}
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
