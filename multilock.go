package locker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// MultiLock is a handle on several named locks (Mutexes) taken as one: all
// or nothing. It takes them in one order — its names sorted — whatever
// order they were given in, so two Clients that lock overlapping sets never
// wait for each other in a cycle. One deadline covers the whole set (the
// ctx's, or LockTimeout's wait). An acquisition that fails, times out or is
// cancelled releases what it took before it returns: nothing stays held or
// renewed. Lost closes when any of the holds is lost.
//
// Ownership and reentrancy follow the ctx, as for Mutex: the names are
// Mutexes of the Client, and a Lock of one of them with a ctx whose owner
// holds the set re-enters it. Make one with Client.NewMultiLock or
// Client.LockAll; the zero MultiLock returns ErrZeroHandle.
type MultiLock struct {
	c     *Client
	ms    []*Mutex // sorted by name, without repeats
	names []string
	err   error

	mu  sync.Mutex
	cur *holdSet // the set taken last
}

// NewMultiLock returns a handle on the locks names, as one. Options apply
// to each of its Mutexes. An empty list, a bad name or option does not
// panic: every method returns the error.
func (c *Client) NewMultiLock(names []string, opts ...Option) *MultiLock {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	ml := &MultiLock{c: c, names: sorted}
	if len(sorted) == 0 {
		ml.err = errorf(ErrInvalidOption, "a MultiLock needs at least one name")
	}
	for _, n := range sorted {
		m := c.NewMutex(n, opts...)
		if ml.err == nil && m.hd.err != nil {
			ml.err = opErr("multilock", n, m.hd.err)
		}
		ml.ms = append(ml.ms, m)
	}
	return ml
}

// LockAll takes the locks names as one (NewMultiLock, then Lock): it waits
// until all are held or ctx ends. A nil error means all are held; release
// them with the MultiLock's Unlock.
func (c *Client) LockAll(ctx context.Context, names ...string) (*MultiLock, error) {
	ml := c.NewMultiLock(names)
	if err := ml.Lock(ctx); err != nil {
		return nil, err
	}
	return ml, nil
}

func (ml *MultiLock) zero() bool { return ml == nil || ml.c == nil }

// Names returns the names of the locks, sorted, in the order they are
// taken.
func (ml *MultiLock) Names() []string {
	if ml.zero() {
		return nil
	}
	return slices.Clone(ml.names)
}

func (ml *MultiLock) lockName() string {
	if ml.zero() || len(ml.names) == 0 {
		return ""
	}
	return ml.names[0]
}

// Lock waits until every lock is held or ctx ends.
func (ml *MultiLock) Lock(ctx context.Context) error {
	_, err := ml.lockOp(ctx, true, 0)
	return err
}

// TryLock takes every lock if none is held by another owner, without
// waiting: (false, nil) when one is, and then it holds none.
func (ml *MultiLock) TryLock(ctx context.Context) (bool, error) {
	s, err := ml.lockOp(ctx, false, 0)
	return s != nil, err
}

// LockTimeout waits at most wait, for the whole set: (false, nil) when the
// wait ran out, and then it holds none.
func (ml *MultiLock) LockTimeout(ctx context.Context, wait time.Duration) (bool, error) {
	s, err := ml.lockOp(ctx, wait > 0, wait)
	return s != nil, err
}

// doLock implements doable.
func (ml *MultiLock) doLock(ctx context.Context, wait bool, timeout time.Duration) (held, error) {
	s, err := ml.lockOp(ctx, wait, timeout)
	if s == nil {
		return nil, err
	}
	return s, err
}

// lockOp takes every lock in order, under one deadline; on any failure it
// releases what it took. It returns the set, or nil when a lock stayed busy.
func (ml *MultiLock) lockOp(ctx context.Context, wait bool, timeout time.Duration) (*holdSet, error) {
	op := mutexOps.of(wait, timeout)
	switch {
	case ml.zero():
		return nil, opErr(op, "", ErrZeroHandle)
	case ml.err != nil:
		return nil, opErr(op, ml.lockName(), ml.err)
	case ctx == nil:
		return nil, opErr(op, ml.lockName(), ErrNilContext)
	}
	actx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	s := &holdSet{}
	for _, m := range ml.ms {
		// Each lock waits as long as the whole set may: the timeout is
		// actx's, not one per lock.
		_, h, err := m.hd.lockOp(actx, op, wait, 0, nil)
		if err != nil || h == nil {
			ml.giveBack(ctx, s)
			if err != nil && timeout > 0 && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return nil, nil // the wait ran out
			}
			return nil, err
		}
		s.holds = append(s.holds, h)
		s.ms = append(s.ms, m)
	}
	ml.mu.Lock()
	ml.cur = s
	ml.mu.Unlock()
	return s, nil
}

// giveBack releases the holds that an acquisition of the set took before
// it failed, for the same owner, even when ctx is done.
func (ml *MultiLock) giveBack(ctx context.Context, s *holdSet) {
	uctx := context.WithoutCancel(ctx)
	for i := len(s.ms) - 1; i >= 0; i-- {
		_ = s.ms[i].Unlock(uctx)
	}
}

// Unlock releases one level of every lock of the set held by ctx's owner
// (as Mutex.Unlock does), in the reverse order. The error joins those of
// the locks that failed.
func (ml *MultiLock) Unlock(ctx context.Context) error {
	switch {
	case ml.zero():
		return opErr("unlock", "", ErrZeroHandle)
	case ml.err != nil:
		return opErr("unlock", ml.lockName(), ml.err)
	}
	var errs []error
	for i := len(ml.ms) - 1; i >= 0; i-- {
		if err := ml.ms[i].Unlock(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Tokens returns the fencing token of each lock of the set taken last, by
// name (nil before the first).
func (ml *MultiLock) Tokens() map[string]uint64 {
	if ml.zero() {
		return nil
	}
	ml.mu.Lock()
	s := ml.cur
	ml.mu.Unlock()
	if s == nil {
		return nil
	}
	t := make(map[string]uint64, len(s.holds))
	for _, h := range s.holds {
		t[h.hd.key.name] = h.token
	}
	return t
}

// Lost returns a channel that is closed when any hold of the set taken
// last is lost; nil before the first.
func (ml *MultiLock) Lost() <-chan struct{} {
	if ml.zero() {
		return nil
	}
	ml.mu.Lock()
	s := ml.cur
	ml.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.lostChan()
}

// Err returns nil while every hold of the set taken last lasts, and the
// error of the first one lost.
func (ml *MultiLock) Err() error {
	if ml.zero() {
		return ErrZeroHandle
	}
	ml.mu.Lock()
	s := ml.cur
	ml.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.lostErr()
}

var _ Locker = (*MultiLock)(nil)

// holdSet is the holds of a MultiLock's acquisition, lost as one.
type holdSet struct {
	holds []*hold
	ms    []*Mutex

	once sync.Once
	ch   chan struct{}
}

// afterLost runs f once, when the first hold of the set is lost.
func (s *holdSet) afterLost(f func()) (stop func()) {
	var once sync.Once
	stops := make([]func(), len(s.holds))
	for i, h := range s.holds {
		stops[i] = h.afterLost(func() { once.Do(f) })
	}
	return func() {
		for _, st := range stops {
			st()
		}
	}
}

func (s *holdSet) lostErr() error {
	for _, h := range s.holds {
		if err := h.lostErr(); err != nil {
			return err
		}
	}
	return nil
}

func (s *holdSet) lostChan() <-chan struct{} {
	s.once.Do(func() {
		s.ch = make(chan struct{})
		s.afterLost(func() { close(s.ch) })
	})
	return s.ch
}

// carry returns ctx carrying every hold of the set, the last one innermost.
func (s *holdSet) carry(ctx context.Context, o *owner) context.Context {
	for _, h := range s.holds {
		ctx = h.carry(ctx, o)
	}
	return ctx
}
