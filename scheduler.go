package locker

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// maxConcurrentRenewals bounds the renewals in flight at once, so a store
// that hangs cannot make the watchdog spawn without limit.
const maxConcurrentRenewals = 64

// scheduler is the watchdog of one Client: a timer heap of holds, one
// goroutine, and short-lived renewal calls bounded by a semaphore. A hold's
// next event is its renewal (every TTL/3 after the last success, or sooner
// after a failure) or its deadline, whichever comes first; at the deadline a
// hold that has not been renewed is declared lost.
type scheduler struct {
	ctx context.Context // ends renewals in flight when the Client closes
	wg  *sync.WaitGroup
	log *slog.Logger
	sem chan struct{}

	wake chan struct{}

	mu sync.Mutex
	q  holdHeap
	// wakeAt is when run's timer will fire; zero while run is busy (it
	// looks at the heap again before it sleeps). An event earlier than
	// wakeAt pokes run; a later one need not, which spares a goroutine
	// wake-up on every Lock.
	wakeAt time.Time
}

func newScheduler(ctx context.Context, wg *sync.WaitGroup, log *slog.Logger) *scheduler {
	return &scheduler{
		ctx:  ctx,
		wg:   wg,
		log:  log,
		sem:  make(chan struct{}, maxConcurrentRenewals),
		wake: make(chan struct{}, 1),
	}
}

// pokeFor wakes run if next is earlier than its planned wake-up. s.mu is
// held.
func (s *scheduler) pokeFor(next time.Time) {
	if s.wakeAt.IsZero() || !next.Before(s.wakeAt) {
		return
	}
	s.wakeAt = time.Time{}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// add schedules h, whose validUntil is already set.
func (s *scheduler) add(h *hold) {
	s.mu.Lock()
	h.next = h.deadline()
	if h.renew {
		if r := h.validUntil.Add(-h.ttl).Add(h.ttl / 3); r.Before(h.next) {
			h.next = r
		}
	}
	heap.Push(&s.q, h)
	s.pokeFor(h.next)
	s.mu.Unlock()
}

// remove unschedules h for good.
func (s *scheduler) remove(h *hold) {
	s.mu.Lock()
	h.done = true
	if h.idx >= 0 {
		heap.Remove(&s.q, h.idx)
	}
	s.mu.Unlock()
}

func (s *scheduler) run() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		now := time.Now()
		s.mu.Lock()
		s.wakeAt = time.Time{}
		var due []*hold
		for len(s.q) > 0 && !s.q[0].next.After(now) {
			due = append(due, heap.Pop(&s.q).(*hold))
		}
		s.mu.Unlock()
		for _, h := range due {
			s.fire(h, now)
		}
		s.mu.Lock()
		wait := time.Hour
		if len(s.q) > 0 {
			wait = time.Until(s.q[0].next)
		}
		s.wakeAt = time.Now().Add(wait)
		s.mu.Unlock()
		t.Reset(wait)
		select {
		case <-t.C:
		case <-s.wake:
		case <-s.ctx.Done():
			return
		}
	}
}

// fire handles a hold whose event is due; h is not in the heap.
func (s *scheduler) fire(h *hold, now time.Time) {
	s.mu.Lock()
	if h.done {
		s.mu.Unlock()
		return
	}
	if !now.Before(h.deadline()) {
		h.done = true
		s.mu.Unlock()
		if h.fixed {
			h.declareLost(errors.New("the fixed lease ran out"))
			if h.session {
				s.releaseExpired(h)
			}
			return
		}
		h.declareLost(fmt.Errorf("no renewal succeeded before the lease could run out (%d attempts failed)", h.fails))
		s.log.Warn("locker: hold lost", "name", h.m.name, "failures", h.fails)
		return
	}
	// A renewal is due, or one is in flight and this wake-up is early: in
	// both cases the next event at the latest is the deadline.
	start := h.renew && !h.renewing
	if start {
		select {
		case s.sem <- struct{}{}:
			h.renewing = true
		default:
			// Too many renewals in flight: try again shortly.
			h.next = minTime(now.Add(time.Millisecond), h.deadline())
			heap.Push(&s.q, h)
			s.mu.Unlock()
			return
		}
	}
	h.next = h.deadline()
	heap.Push(&s.q, h)
	s.mu.Unlock()
	if start {
		s.wg.Add(1)
		go s.renew(h)
	}
}

func (s *scheduler) renew(h *hold) {
	defer s.wg.Done()
	defer func() { <-s.sem }()
	start := time.Now()
	s.mu.Lock()
	deadline := h.deadline()
	s.mu.Unlock()
	ctx, cancel := context.WithDeadline(s.ctx, deadline)
	err := h.lease.Renew(ctx, h.ttl)
	cancel()

	s.mu.Lock()
	h.renewing = false
	if h.done {
		s.mu.Unlock()
		return
	}
	switch {
	case err == nil:
		h.fails = 0
		h.validUntil = start.Add(h.ttl)
		h.next = start.Add(h.ttl / 3)
	case errors.Is(err, ErrLost):
		h.done = true
		if h.idx >= 0 {
			heap.Remove(&s.q, h.idx)
		}
		s.mu.Unlock()
		h.declareLost(fmt.Errorf("renewal refused: %v", err))
		return
	default:
		h.fails++
		h.next = minTime(time.Now().Add(retryDelay(h.ttl, h.fails)), h.deadline())
		s.log.Warn("locker: renewal failed, retrying", "name", h.m.name, "attempt", h.fails, "err", err)
	}
	if h.idx >= 0 {
		heap.Fix(&s.q, h.idx)
	}
	s.pokeFor(h.next)
	s.mu.Unlock()
}

// releaseExpired releases a fixed lease on a driver whose holds live as long
// as a session, since the store will not end it by itself.
func (s *scheduler) releaseExpired(h *hold) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), h.releaseTimeout)
		defer cancel()
		_ = h.lease.Release(ctx)
	}()
}

// retryDelay backs off from TTL/60, doubling, up to TTL/10, and at least 1ms.
func retryDelay(ttl time.Duration, fails int) time.Duration {
	d := ttl / 60
	for i := 1; i < fails && d < ttl/10; i++ {
		d *= 2
	}
	d = min(d, ttl/10)
	return max(d, time.Millisecond)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// holdHeap orders holds by their next event.
type holdHeap []*hold

func (q holdHeap) Len() int           { return len(q) }
func (q holdHeap) Less(i, j int) bool { return q[i].next.Before(q[j].next) }
func (q holdHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx = i
	q[j].idx = j
}
func (q *holdHeap) Push(x any) {
	h := x.(*hold)
	h.idx = len(*q)
	*q = append(*q, h)
}
func (q *holdHeap) Pop() any {
	old := *q
	n := len(old)
	h := old[n-1]
	old[n-1] = nil
	h.idx = -1
	*q = old[:n-1]
	return h
}
