package locker

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/golocker/locker/backend"
)

// Election is a handle on a named leader election: at most one candidate,
// of every Client that campaigns for the name, leads at a time. Each won
// term is a hold — leased, renewed by the watchdog, fenced — whose token
// is greater than every earlier term's, and whose context ends when the
// term is lost or resigned, before another candidate can win (by the
// watchdog's margin). The leader's value is stored with the term, so
// anyone can read it (Leader) or follow it (Observe).
//
// An Election and a Mutex (or another kind) of the same name are different
// locks. Make one with Client.NewElection; the zero Election returns
// ErrZeroHandle.
type Election struct {
	base handle // the name and the options; each campaign carries its value
}

// Errors of elections.
var (
	// ErrNoLeader is returned by Election.Leader when nobody leads.
	ErrNoLeader = newError("no leader")
	// ErrResigned is the cause of a term's context after Resign.
	ErrResigned = newError("term resigned")
)

// NewElection returns a handle on the election name. Options override the
// Client's defaults: a term's lease is the TTL. A bad name or option, or a
// driver without weighted holds, does not panic: every method returns the
// error.
func (c *Client) NewElection(name string, opts ...Option) *Election {
	return &Election{base: c.newHandle(lockKey{backend.Election, name}, 1, 1, opts)}
}

func (e *Election) zero() bool { return e == nil || e.base.c == nil }

// Name returns the election's name.
func (e *Election) Name() string {
	if e.zero() {
		return ""
	}
	return e.base.key.name
}

var electionOps = ops{"campaign", "trycampaign", "campaigntimeout"}

// campaignOp campaigns with value as a candidate of its own.
func (e *Election) campaignOp(ctx context.Context, value string, wait bool, timeout time.Duration) (*Term, error) {
	op := electionOps.of(wait, timeout)
	if e.zero() {
		return nil, opErr(op, "", ErrZeroHandle)
	}
	hd := &handle{}
	*hd = e.base
	hd.cur, hd.last = nil, nil
	if hd.err == nil && len(value) > backend.MaxValueLen {
		hd.err = errorf(ErrInvalidOption, "a value of %d bytes (at most %d)", len(value), backend.MaxValueLen)
	}
	hd.value = value
	_, h, err := hd.lockOp(ctx, op, wait, timeout, &owner{})
	if h == nil {
		return nil, err
	}
	t := &Term{h: h, value: value}
	t.ctx, t.cancel = context.WithCancelCause(h.carry(context.WithoutCancel(ctx), ownerOf(ctx)))
	t.stop = h.afterLost(func() { t.cancel(opErr("term", hd.key.name, h.lostErr())) })
	return t, err
}

// Campaign waits until this candidate leads, with value as the leader's
// value, or ctx ends. Each Campaign is a candidate of its own: two
// campaigns with the same value are two candidates, and at most one wins.
// Candidates win in the order they began to wait.
func (e *Election) Campaign(ctx context.Context, value string) (*Term, error) {
	return e.campaignOp(ctx, value, true, 0)
}

// TryCampaign leads if nobody leads or waits to, without waiting: a nil
// Term and a nil error when another candidate leads.
func (e *Election) TryCampaign(ctx context.Context, value string) (*Term, error) {
	return e.campaignOp(ctx, value, false, 0)
}

// CampaignTimeout waits at most wait to lead: a nil Term and a nil error
// when the wait ran out.
func (e *Election) CampaignTimeout(ctx context.Context, value string, wait time.Duration) (*Term, error) {
	return e.campaignOp(ctx, value, wait > 0, wait)
}

// Leader is who leads an election, as Leader and Observe see it. The zero
// Leader is "no leader".
type Leader struct {
	Value string // the leader's value
	Token uint64 // the term's fencing token: greater for every later term
	Owner string // the term's owner in the store (host/pid/…)
}

// Leading reports whether somebody leads.
func (l Leader) Leading() bool { return l.Owner != "" }

// Leader returns who leads now, or ErrNoLeader. It needs a driver that can
// list holds (backend.Inspector).
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	const op = "leader"
	switch {
	case e.zero():
		return Leader{}, opErr(op, "", ErrZeroHandle)
	case e.base.err != nil:
		return Leader{}, opErr(op, e.Name(), e.base.err)
	case ctx == nil:
		return Leader{}, opErr(op, e.Name(), ErrNilContext)
	}
	l, err := e.leader(ctx)
	if err == nil && !l.Leading() {
		err = ErrNoLeader
	}
	return l, opErr(op, e.Name(), err)
}

// leader reads the leader from the store: the zero Leader when nobody
// leads.
func (e *Election) leader(ctx context.Context) (Leader, error) {
	in, ok := e.base.c.d.(backend.Inspector)
	if !ok {
		return Leader{}, errorf(ErrNotSupported, "reading an election's leader needs a driver that lists holds (backend.Inspector)")
	}
	hs, err := in.Holds(ctx, e.base.key.name)
	if err != nil {
		return Leader{}, err
	}
	var l Leader
	for _, h := range hs {
		if h.Name == e.base.key.name && h.Kind == backend.Election && h.Token >= l.Token {
			l = Leader{Value: h.Value, Token: h.Token, Owner: h.Owner}
		}
	}
	return l, nil
}

// Observe returns a channel that receives who leads, at once and then at
// every change — a new term, a value proclaimed, no leader (the zero
// Leader) — until ctx ends or the Client closes; then it is closed. Terms
// never go backwards: a view older than one sent is skipped. A slow
// reader misses intermediate changes, never the latest. Changes come from
// the store where it tells of them (backend.Watcher), else from looking
// every TTL/3 (at most a second).
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	const op = "observe"
	switch {
	case e.zero():
		return nil, opErr(op, "", ErrZeroHandle)
	case e.base.err != nil:
		return nil, opErr(op, e.Name(), e.base.err)
	case ctx == nil:
		return nil, opErr(op, e.Name(), ErrNilContext)
	}
	if _, ok := e.base.c.d.(backend.Inspector); !ok {
		return nil, opErr(op, e.Name(), errorf(ErrNotSupported, "observing an election needs a driver that lists holds (backend.Inspector)"))
	}
	c := e.base.c
	out := make(chan Leader, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, opErr(op, e.Name(), ErrClosed)
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer close(out)
		e.observe(ctx, out)
	}()
	return out, nil
}

// observe sends the leader to out at every change until ctx ends or the
// Client closes.
func (e *Election) observe(ctx context.Context, out chan Leader) {
	c := e.base.c
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopClose := context.AfterFunc(c.ctx, cancel)
	defer stopClose()
	var wake <-chan struct{}
	if c.watcher != nil {
		ch, stop := c.watcher.Watch(backend.Election, e.base.key.name)
		defer stop()
		wake = ch
	}
	every := min(e.base.cfg.ttl/3, time.Second)
	t := time.NewTimer(0)
	defer t.Stop()
	var last Leader
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		l, err := e.leader(ctx)
		t.Reset(every)
		if err != nil {
			continue // the store failed: look again later
		}
		if l.Leading() && l.Token < last.Token {
			continue // an older view (a lagging replica): terms never go backwards
		}
		if !first && l == last {
			continue
		}
		first = false
		if l.Leading() {
			last = l
		} else {
			last.Owner, last.Value = "", "" // keep the token: later terms are newer
		}
		// Replace a view the reader has not taken yet.
		select {
		case <-out:
		default:
		}
		out <- l
	}
}

// Run leads with value and runs fn while it does: it campaigns, runs fn
// with a ctx that ends when the term is lost or ctx ends, resigns once fn
// has returned, and campaigns again if the term was lost, for as long as
// ctx lasts. A new term's fn never starts before the last one's returned.
// Run returns fn's result when fn returns while it still leads, and ctx's
// error when ctx ends. Errors of the store between terms are retried with
// back-off; bad input ends Run at once.
func (e *Election) Run(ctx context.Context, value string, fn func(ctx context.Context) error) error {
	if fn == nil {
		return opErr("run", e.Name(), errorf(ErrInvalidOption, "nil function"))
	}
	backoff := minBackoff
	for {
		t, err := e.Campaign(ctx, value)
		if err != nil {
			if ctx == nil || ctx.Err() != nil || permanent(err) || errors.Is(err, ErrZeroHandle) {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff/2 + rand.N(backoff/2+1)):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = minBackoff
		fctx, cancel := context.WithCancelCause(t.Context())
		stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
		ferr := fn(fctx)
		stop()
		cancel(nil)
		lost := t.Err() != nil
		_ = t.Resign(context.WithoutCancel(ctx))
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case !lost:
			return ferr
		}
	}
}

// Term is a won term of an Election: one hold, with its lease, fencing
// token and loss. A nil *Term holds nothing.
type Term struct {
	h      *hold
	value  string
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   func()
}

// Token returns the term's fencing token, greater than every earlier
// term's of the election (0 when the driver has no fencing). Send it with
// the leader's writes, so that a resource refuses a deposed leader's.
func (t *Term) Token() uint64 {
	if t == nil {
		return 0
	}
	return t.h.token
}

// Value returns the leader's value as last proclaimed.
func (t *Term) Value() string {
	if t == nil {
		return ""
	}
	t.h.hd.c.mu.Lock()
	defer t.h.hd.c.mu.Unlock()
	return t.value
}

// Context returns a context that ends when the term ends: lost (its cause
// wraps ErrLost) or resigned (ErrResigned). It carries the values of the
// Campaign's ctx and the term's hold (HoldFromContext: its token). Bind
// the leader's work to it.
func (t *Term) Context() context.Context {
	if t == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrNotHeld)
		return ctx
	}
	return t.ctx
}

// Lost returns a channel that is closed if the term is lost before
// Resign: its lease ran out before a renewal succeeded, the store dropped
// it, or the Client was closed.
func (t *Term) Lost() <-chan struct{} {
	if t == nil {
		return nil
	}
	return t.h.lostChan()
}

// Err returns nil while the term lasts, and an error wrapping ErrLost (or
// ErrClosed) once it is lost.
func (t *Term) Err() error {
	if t == nil {
		return ErrNotHeld
	}
	return t.h.lostErr()
}

// Proclaim changes the leader's value, owner-checked on the store: it
// returns ErrLost when the term is no longer this candidate's, and
// ErrNotHeld after Resign.
func (t *Term) Proclaim(ctx context.Context, value string) error {
	const op = "proclaim"
	switch {
	case t == nil:
		return opErr(op, "", ErrNotHeld)
	case ctx == nil:
		return opErr(op, t.h.hd.key.name, ErrNilContext)
	case len(value) > backend.MaxValueLen:
		return opErr(op, t.h.hd.key.name, errorf(ErrInvalidOption, "a value of %d bytes (at most %d)", len(value), backend.MaxValueLen))
	}
	h := t.h
	c := h.hd.c
	c.mu.Lock()
	ending := h.ending
	c.mu.Unlock()
	if ending {
		return opErr(op, h.hd.key.name, ErrNotHeld)
	}
	if err := h.lostErr(); err != nil {
		return opErr(op, h.hd.key.name, err)
	}
	err := h.proclaimLease(ctx, value)
	if errors.Is(err, ErrLost) {
		c.lose(h, LostRefused, storeSaysGone("the proclamation", err))
		return opErr(op, h.hd.key.name, h.lostErr())
	}
	if err == nil {
		c.mu.Lock()
		t.value = value
		c.mu.Unlock()
	}
	return opErr(op, h.hd.key.name, err)
}

// Resign ends the term: its context ends (ErrResigned), then the store
// frees the election, owner-checked, so a Resign never ends a newer term.
// Resign is idempotent: after the first it returns nil. It returns ErrLost
// when the term had been lost.
func (t *Term) Resign(ctx context.Context) error {
	const op = "resign"
	switch {
	case t == nil:
		return nil
	case ctx == nil:
		return opErr(op, t.h.hd.key.name, ErrNilContext)
	}
	h := t.h
	c := h.hd.c
	c.mu.Lock()
	if h.ending {
		c.mu.Unlock()
		return nil
	}
	h.levels = 0
	h.ending = true
	c.mu.Unlock()
	t.stop()
	t.cancel(ErrResigned)
	return opErr(op, h.hd.key.name, c.end(ctx, h))
}
