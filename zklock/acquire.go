package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// Acquire implements backend.Driver. It creates a node only when the lock
// looks free (a synced listing of its node's children shows none), so that
// an attempt never gets in the way of another: a crowd of attempts that
// each create a node and delete it when it is not the lowest could all
// fail, for ever. Among those that create one, the lowest wins; the others
// delete theirs.
func (d *Driver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	return d.acquire(ctx, r, false)
}

// AcquireWait implements backend.Waiter: it creates a protected ephemeral
// sequential node under the name's node, and the owner holds the lock when
// its node has the lowest sequence. Otherwise it watches the next lower
// node only — each release wakes one waiter, the next in line — and lists
// the children again, which shows whether its own node still exists (it
// goes with an expired session) and is now the lowest.
func (d *Driver) AcquireWait(ctx context.Context, r backend.Request) (backend.Lease, error) {
	return d.acquire(ctx, r, true)
}

// acquire runs attempts in a fresh generation of the session: again when
// the session ended while one was in flight (the node went with it) and,
// for a wait, after a failure the ensemble may recover from (a lost
// connection), until ctx ends. Every failure and every cancellation
// deletes the node before returning.
func (d *Driver) acquire(ctx context.Context, r backend.Request, wait bool) (backend.Lease, error) {
	dir := d.dir(r.Name)
	return driverkit.Attempts(ctx, wait, d.liveGeneration, func(g *generation) (backend.Lease, error) {
		return d.attempt(ctx, g, dir, r, wait)
	}, errSessionEnded, retryable)
}

// liveGeneration is generation with the store's error.
func (d *Driver) liveGeneration(ctx context.Context) (*generation, error) {
	g, err := d.generation(ctx)
	return g, d.storeErr(ctx, err)
}

// attempt runs one acquisition in generation g.
func (d *Driver) attempt(ctx context.Context, g *generation, dir string, r backend.Request, wait bool) (backend.Lease, error) {
	if !wait {
		nodes, err := d.nodes(ctx, dir)
		if err != nil {
			return nil, d.storeErr(ctx, err)
		}
		if len(nodes) > 0 {
			return nil, backend.ErrHeld
		}
	}
	c, err := d.createNode(ctx, g, dir, []byte(r.Owner))
	if err != nil {
		return nil, err
	}
	if d.afterCreate != nil {
		d.afterCreate()
	}
	own := c.path[strings.LastIndexByte(c.path, '/')+1:]
	for {
		start := time.Now()
		var children []string
		err := d.call(ctx, func() (err error) { children, _, err = d.conn.Children(dir); return err })
		if err != nil {
			d.remove(ctx, g, c.path)
			return nil, d.storeErr(ctx, err)
		}
		nodes := lockNodes(children)
		i := 0
		for i < len(nodes) && nodes[i].name != own {
			i++
		}
		switch {
		case i == len(nodes):
			// Gone with its session, or deleted: the place in the queue
			// is lost, never to be taken for a hold.
			return nil, errSessionEnded
		case i == 0:
			return d.granted(ctx, g, c, start)
		case !wait:
			d.remove(ctx, g, c.path)
			return nil, backend.ErrHeld
		}
		if err := d.awaitDeletion(ctx, g, dir+"/"+nodes[i-1].name); err != nil {
			d.remove(ctx, g, c.path)
			return nil, err
		}
	}
}

// awaitDeletion waits until the node at pred is gone (or its watch ends),
// g ends, ctx ends or the Driver is closed.
func (d *Driver) awaitDeletion(ctx context.Context, g *generation, pred string) error {
	var w <-chan zk.Event
	err := d.call(ctx, func() (err error) { _, _, w, err = d.conn.GetW(pred); return err })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil
	case err != nil:
		return d.storeErr(ctx, err)
	}
	d.waiting.Add(1)
	defer d.waiting.Add(-1)
	select {
	case <-w:
		d.wakeups.Add(1)
		return nil
	case <-g.ctx.Done():
		return errSessionEnded
	case <-ctx.Done():
		return ctx.Err()
	case <-d.ctx.Done():
		return backend.ErrClosed
	}
}

// granted makes the hold of node c a lease, unless its generation ended or
// the Driver was closed meanwhile. A node whose czxid did not come with its
// create is read for it, and checked to be of g's session.
func (d *Driver) granted(ctx context.Context, g *generation, c created, start time.Time) (backend.Lease, error) {
	if c.czxid == 0 {
		var st *zk.Stat
		err := d.call(ctx, func() (err error) { _, st, err = d.conn.Get(c.path); return err })
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return nil, errSessionEnded
		case err != nil:
			d.remove(ctx, g, c.path)
			return nil, d.storeErr(ctx, err)
		case st.EphemeralOwner != g.id:
			d.remove(ctx, g, c.path)
			return nil, errSessionEnded
		}
		c.czxid = st.Czxid
	} else {
		d.createdTokens.Add(1)
	}
	l, err := d.newLease(g, c.path, c.czxid, uint64(c.czxid), c.dirVersion, start)
	if err != nil {
		d.remove(ctx, g, c.path)
		return nil, err
	}
	return l, nil
}

// newLease makes the hold of the node at path, created at czxid, a lease
// with token: it watches the node, and ends the hold with g, unless g
// ended or the Driver was closed meanwhile.
func (d *Driver) newLease(g *generation, path string, czxid int64, token uint64, dirVersion int32, start time.Time) (*lease, error) {
	l := &lease{d: d, g: g, path: path, czxid: czxid, token: token, dirVersion: dirVersion, start: start,
		lost: backend.NewLostSignal(), released: make(chan struct{})}
	if g.lost() || d.conn.SessionID() != g.id {
		return nil, errSessionEnded
	}
	if !d.goBackground(l.watch) {
		return nil, backend.ErrClosed
	}
	// The session may be alive still when the generation ends (the
	// ensemble was out of reach): the node must not outlive the hold.
	l.stop = context.AfterFunc(g.ctx, func() {
		if l.markLost() {
			d.retryDelete(g.id, path)
		}
	})
	return l, nil
}

// created is the outcome of a create request: the node's path, and its
// czxid and the version of its lock's node after the create when known (0
// and noVersion otherwise).
type created struct {
	path       string
	czxid      int64
	dirVersion int32
	err        error
}

// noVersion is the dirVersion of a node created without the write that
// dates it, or found again by its GUID: its hold is never passed.
const noVersion = -1

// createNode creates the acquisition's node in dir, creating dir (and the
// prefix) when missing. When the connection drops with the create in
// flight, the request may or may not have been applied: the node is then
// looked for by its GUID once the client is connected again. When ctx ends
// with the create in flight, giveUp deletes whatever it created.
func (d *Driver) createNode(ctx context.Context, g *generation, dir string, data []byte) (created, error) {
	guid := newGUID()
	base := dir + "/" + nodePrefix(guid)
	for attempt := 0; attempt < 5; attempt++ {
		res := make(chan created, 1)
		go func() { res <- d.create(base, dir, data) }()
		var c created
		select {
		case c = <-res:
		case <-ctx.Done():
			d.giveUp(ctx, g, dir, guid, res)
			return created{}, ctx.Err()
		}
		switch {
		case c.err == nil && d.conn.SessionID() != g.id:
			d.remove(ctx, g, c.path) // made in a session that replaced g's
			return created{}, errSessionEnded
		case c.err == nil:
			return c, nil
		case errors.Is(c.err, zk.ErrNoNode):
			if err := d.ensureDir(ctx, dir); err != nil {
				return created{}, d.storeErr(ctx, err)
			}
			continue
		case errors.Is(c.err, zk.ErrSessionExpired):
			return created{}, errSessionEnded // a node it made went with the session
		case notApplied(c.err):
			return created{}, d.storeErr(ctx, c.err)
		}
		p, err := d.findByGUID(ctx, g, dir, guid)
		switch {
		case err != nil:
			d.undoOrLater(ctx, g, dir, guid, c)
			return created{}, d.storeErr(ctx, err)
		case p != "":
			d.recovered.Add(1)
			return created{path: p, dirVersion: noVersion}, nil
		case d.conn.SessionID() != g.id:
			return created{}, errSessionEnded
		}
		// Not created: try again.
	}
	return created{}, fmt.Errorf("zklock: %s: could not create a node in %s", d.servers, dir)
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
			return created{path: mr[0].String, czxid: mr[1].Stat.Mzxid, dirVersion: mr[1].Stat.Version}
		case err == nil:
			return created{err: fmt.Errorf("create %s: unexpected response to a multi", base)}
		case !errors.Is(err, zk.ErrNoAuth) || len(mr) != 2 || mr[0].Error != nil:
			return created{err: err}
		}
		d.plainCreate.Store(true)
	}
	p, err := d.conn.Create(base, data, flags, d.acl)
	return created{path: p, dirVersion: noVersion, err: err}
}

// giveUp cleans up after a create that was in flight when ctx ended: it
// waits a grace period for the create's outcome, so that the node it made,
// if any, is deleted before Acquire returns, and else leaves that to the
// background.
func (d *Driver) giveUp(ctx context.Context, g *generation, dir, guid string, res <-chan created) {
	select {
	case c := <-res:
		d.undoOrLater(ctx, g, dir, guid, c)
	case <-time.After(cleanupTimeout):
		d.goBackground(func() {
			select {
			case c := <-res:
				d.undo(d.ctx, g, dir, guid, c)
			case <-d.ctx.Done():
			}
		})
	}
}

// undoOrLater runs undo with a context of its own, and again in the
// background when it could not tell whether the node is gone.
func (d *Driver) undoOrLater(ctx context.Context, g *generation, dir, guid string, c created) {
	gctx, cancel := driverkit.Grace(ctx, cleanupTimeout)
	defer cancel()
	if !d.undo(gctx, g, dir, guid, c) {
		d.goBackground(func() { d.undo(d.ctx, g, dir, guid, c) })
	}
}

// undo deletes the node that a create with outcome c made, if it made
// one, looking for it by its GUID when c does not say; it reports whether
// it knows the node is gone.
func (d *Driver) undo(ctx context.Context, g *generation, dir, guid string, c created) bool {
	p, err := c.path, c.err
	if err != nil && !notApplied(err) {
		p, err = d.findByGUID(ctx, g, dir, guid)
	}
	if err == nil && p != "" {
		d.remove(ctx, g, p)
	}
	return err == nil || notApplied(err)
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
	for d.conn.SessionID() == g.id {
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
		case !retryable(err):
			return "", err
		}
		if !driverkit.Sleep(ctx, 50*time.Millisecond) {
			return "", ctx.Err()
		}
	}
	return "", nil
}

// ensureDir creates the lock's node as a container — the server deletes
// it once it has been empty for a while (every minute, by default) — and
// the prefix's nodes, persistent, when they are missing.
func (d *Driver) ensureDir(ctx context.Context, dir string) error {
	return d.ensure(ctx, dir, zk.FlagContainer)
}

func (d *Driver) ensure(ctx context.Context, path string, flags int32) error {
	create := func() error {
		if flags == zk.FlagContainer {
			_, err := d.conn.CreateContainer(path, nil, flags, d.acl)
			return err
		}
		_, err := d.conn.Create(path, nil, flags, d.acl)
		return err
	}
	err := d.call(ctx, create)
	if i := strings.LastIndexByte(path, '/'); errors.Is(err, zk.ErrNoNode) && i > 0 {
		if err = d.ensure(ctx, path[:i], zk.FlagPersistent); err == nil {
			err = d.call(ctx, create)
		}
	}
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}
