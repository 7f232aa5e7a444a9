package locker

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/golocker/locker/backend"
)

// maxConcurrentRenewals bounds the renewal calls in flight at once, so a
// store that hangs cannot make the watchdog spawn without limit.
const maxConcurrentRenewals = 64

// Batched renewal (backend.BatchRenewer): when a renewal falls due, the
// watchdog also takes every other renewal due within batchWindowFor(TTL),
// up to maxBatch leases per call. Renewing that much early keeps every
// renewal within TTL/3 of the last one.
const (
	batchWindow = 100 * time.Millisecond
	maxBatch    = 2000
)

// batchWindowFor is how early a renewal with lease ttl may be sent to join a
// batch: batchWindow, or less for short leases (a tenth of TTL/3).
func batchWindowFor(ttl time.Duration) time.Duration {
	return min(batchWindow, ttl/30)
}

// slotWidth is the precision of the watchdog's timetable: an event is filed
// under the millisecond it falls in, and fires at that millisecond's start
// — never late, at most a millisecond early. (The shortest lease, MinTTL,
// has a margin of a millisecond before its end.)
const slotWidth = mono(time.Millisecond)

func slotOf(t mono) mono {
	s := t - t%slotWidth
	if t < 0 && t%slotWidth != 0 {
		s -= slotWidth
	}
	return s
}

// scheduler is the watchdog of one Client: a timetable of holds, one
// goroutine, and short-lived renewal calls bounded by a semaphore. A hold's
// next event is its renewal (every TTL/3 after the last success, or sooner
// after a failure) or its deadline, whichever comes first; at the deadline a
// hold that has not been renewed is declared lost.
//
// The timetable files each hold under the millisecond of its next event (a
// bucket), and keeps the milliseconds that have holds in a small heap: filing,
// moving and removing a hold are O(1), whatever the number of holds (a heap
// of a million holds cost the watchdog more than the renewals themselves).
type scheduler struct {
	c     *Client
	batch backend.BatchRenewer // nil: one call per lease
	sem   chan struct{}
	// timer wakes run: at the earliest event, or an hour from its last
	// look when there is none. Reset under mu, by run before it sleeps
	// and by pokeFor for an earlier event.
	timer *time.Timer

	mu      sync.Mutex
	buckets map[mono][]*hold // by slot: the holds whose next event falls in it
	slots   slotHeap         // the slots of the buckets (and some emptied since)
	// pending are holds whose renewal fell due while
	// maxConcurrentRenewals calls were in flight (marked renewing, filed
	// at their deadline): the next call to end takes them on, rather than
	// the timetable filing them again every millisecond, which at a
	// million holds kept the watchdog busy and let renewals fall behind.
	pending []*hold
	// wakeAt is when run's timer will fire; zero while run is busy (it
	// looks at the timetable again before it sleeps). An event earlier than
	// wakeAt moves the timer; a later one need not. Neither wakes run: a
	// Lock on an idle Client costs no goroutine switch.
	wakeAt mono
}

func newScheduler(c *Client) *scheduler {
	s := &scheduler{
		c:       c,
		sem:     make(chan struct{}, maxConcurrentRenewals),
		timer:   time.NewTimer(time.Hour),
		buckets: make(map[mono][]*hold),
	}
	s.batch, _ = c.d.(backend.BatchRenewer)
	return s
}

// file puts h, whose next is set, in its bucket. s.mu is held.
func (s *scheduler) file(h *hold) {
	slot := slotOf(h.next)
	b, ok := s.buckets[slot]
	if !ok {
		heap.Push(&s.slots, slot)
	}
	h.bidx = int32(len(b))
	s.buckets[slot] = append(b, h)
	s.pokeFor(slot)
}

// unfile takes h out of its bucket, if it is in one. s.mu is held.
func (s *scheduler) unfile(h *hold) {
	if h.bidx < 0 {
		return
	}
	slot := slotOf(h.next) // next does not change while h is filed
	b := s.buckets[slot]
	i, last := h.bidx, len(b)-1
	b[i] = b[last]
	b[i].bidx = i
	b[last] = nil
	if last == 0 {
		// The slot stays in the heap; run skips it.
		delete(s.buckets, slot)
	} else {
		s.buckets[slot] = b[:last]
	}
	h.bidx = -1
}

// pokeFor moves run's wake-up to slot if slot is earlier. s.mu is
// held.
func (s *scheduler) pokeFor(slot mono) {
	if s.wakeAt == 0 || slot >= s.wakeAt {
		return
	}
	s.wakeAt = slot
	s.timer.Reset(time.Duration(slot - monoNow()))
}

// add schedules h, whose validUntil is already set.
func (s *scheduler) add(h *hold) {
	s.mu.Lock()
	h.next = h.deadline()
	if h.renew {
		if r := h.validUntil.add(h.every - h.ttl); r < h.next {
			h.next = r
		}
	}
	s.file(h)
	s.mu.Unlock()
}

// remove unschedules h for good, and ends a renewal of it in flight.
func (s *scheduler) remove(h *hold) {
	s.mu.Lock()
	h.done = true
	s.unfile(h)
	cancel := h.cancelRenew
	h.cancelRenew = nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (s *scheduler) run() {
	t := s.timer
	defer t.Stop()
	ctx := s.c.ctx
	for {
		now := monoNow()
		s.mu.Lock()
		s.wakeAt = 0
		var due []*hold
		for len(s.slots) > 0 && s.slots[0] <= now {
			slot := heap.Pop(&s.slots).(mono)
			b := s.buckets[slot]
			delete(s.buckets, slot)
			for _, h := range b {
				h.bidx = -1
			}
			due = append(due, b...)
		}
		var renew []*hold
		var expired []expiry
		for _, h := range due {
			switch s.fireLocked(h, now) {
			case fireRenew:
				renew = append(renew, h)
			case fireExpired:
				expired = append(expired, expiry{h, h.fails, h.lastErr})
			}
		}
		if s.batch != nil && len(renew) > 0 {
			renew = s.joinBatchLocked(renew, now)
		}
		s.mu.Unlock()
		for _, e := range expired {
			s.expire(e)
		}
		s.startRenewals(renew)
		s.mu.Lock()
		wait := time.Hour
		for len(s.slots) > 0 {
			if _, ok := s.buckets[s.slots[0]]; ok {
				wait = time.Duration(s.slots[0] - monoNow())
				break
			}
			heap.Pop(&s.slots) // emptied since it was filed
		}
		s.wakeAt = monoNow().add(wait)
		t.Reset(wait)
		s.mu.Unlock()
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// What fireLocked found.
const (
	fireNothing = iota
	fireRenew   // a renewal is to start
	fireExpired // the deadline passed: the hold is lost
)

// expiry is a hold found past its deadline, and its renewals' failures.
type expiry struct {
	h     *hold
	fails int32
	last  error
}

// fireLocked handles a hold whose event is due; h is in no bucket. A hold
// past its deadline is marked done, for expire. s.mu is held.
func (s *scheduler) fireLocked(h *hold, now mono) int {
	if h.done {
		return fireNothing
	}
	if now >= h.deadline() {
		h.done = true
		return fireExpired
	}
	// A renewal is due, or one is in flight and this wake-up is early: in
	// both cases the next event at the latest is the deadline.
	start := h.renew && !h.renewing
	if start {
		h.renewing = true
	}
	h.next = h.deadline()
	s.file(h)
	if start {
		return fireRenew
	}
	return fireNothing
}

// expire declares lost a hold that fireLocked found past its deadline.
func (s *scheduler) expire(e expiry) {
	h := e.h
	if h.fixed {
		s.c.lose(h, LostLeaseEnded, errors.New("the fixed lease ran out"))
		if h.session {
			s.releaseExpired(h)
		}
		return
	}
	cause := fmt.Errorf("no renewal succeeded before the lease could run out (%d attempts failed)", e.fails)
	if e.last != nil {
		cause = fmt.Errorf("no renewal succeeded before the lease could run out (%d attempts failed, the last with: %w)", e.fails, e.last)
	}
	s.c.lose(h, LostRenewalFailed, cause)
}

// joinBatchLocked adds to renew the renewals due within the batch window
// (they are sent early, with the others). s.mu is held.
func (s *scheduler) joinBatchLocked(renew []*hold, now mono) []*hold {
	limit := maxBatch * maxConcurrentRenewals
	// The slots within the window, earliest first: a bucket per
	// millisecond at most, looked up without disturbing the heap.
	for slot := slotOf(now); slot <= now.add(batchWindow); slot += slotWidth {
		b, ok := s.buckets[slot]
		if !ok {
			continue
		}
		for _, h := range append([]*hold(nil), b...) {
			if len(renew) >= limit {
				return renew
			}
			if !h.renew || h.renewing || h.next > now.add(batchWindowFor(h.ttl)) || h.next >= h.deadline() {
				continue
			}
			s.unfile(h)
			h.renewing = true
			h.next = h.deadline()
			s.file(h)
			renew = append(renew, h)
		}
	}
	return renew
}

// startRenewals starts the renewals of holds (marked renewing): with a
// BatchRenewer one call per batch of up to maxBatch, else one per lease.
func (s *scheduler) startRenewals(holds []*hold) {
	if s.batch == nil {
		for _, h := range holds {
			s.startCall([]*hold{h})
		}
		return
	}
	for len(holds) > 0 {
		n := min(len(holds), maxBatch)
		s.startCall(holds[:n:n])
		holds = holds[n:]
	}
}

// startCall starts one renewal call for holds (marked renewing), when the
// semaphore allows; otherwise they wait in pending for a call to end.
func (s *scheduler) startCall(holds []*hold) {
	s.mu.Lock()
	select {
	case s.sem <- struct{}{}:
		s.mu.Unlock()
	default:
		s.pending = append(s.pending, holds...)
		s.mu.Unlock()
		return
	}
	s.c.wg.Add(1)
	go s.renew(holds)
}

// renew renews holds, then the pending ones, until none is left, in one
// renewal call slot.
func (s *scheduler) renew(holds []*hold) {
	defer s.c.wg.Done()
	for {
		s.renewOnce(holds)
		s.mu.Lock()
		holds = s.takePendingLocked()
		if len(holds) == 0 {
			<-s.sem // under s.mu: startCall sees the slot free, or this call's pending
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// takePendingLocked takes the pending holds of the next call: up to
// maxBatch with a BatchRenewer, else one. s.mu is held.
func (s *scheduler) takePendingLocked() []*hold {
	n := 1
	if s.batch != nil {
		n = maxBatch
	}
	var out []*hold
	for len(s.pending) > 0 && len(out) < n {
		h := s.pending[0]
		s.pending[0] = nil
		s.pending = s.pending[1:]
		if !h.done { // released or lost since
			out = append(out, h)
		}
	}
	if len(s.pending) == 0 {
		s.pending = nil
	}
	return out
}

// renewOnce renews holds: one Renew, or one RenewBatch.
func (s *scheduler) renewOnce(holds []*hold) {
	start := monoNow()
	// The call must end by the earliest deadline. A lone renewal is cut
	// short by its hold's removal (Unlock, loss), so that the release
	// does not wait for it; a batch is not, for the others' sake.
	s.mu.Lock()
	deadline := holds[0].deadline()
	for _, h := range holds[1:] {
		deadline = min(deadline, h.deadline())
	}
	ctx, cancel := context.WithDeadline(s.c.ctx, epoch.Add(time.Duration(deadline)))
	if h := holds[0]; len(holds) == 1 && s.batch == nil && !h.done {
		h.cancelRenew = cancel
	}
	s.mu.Unlock()
	errs := make([]error, len(holds))
	if s.batch == nil {
		errs[0] = holds[0].renewLease(ctx)
	} else {
		s.renewBatch(ctx, holds, errs)
	}
	cancel()
	s.renewed(holds, start, time.Duration(monoNow()-start), errs)
}

// renewBatch renews holds in one RenewBatch call, each owner-checked by the
// store.
func (s *scheduler) renewBatch(ctx context.Context, holds []*hold, errs []error) {
	items := make([]backend.RenewItem, 0, len(holds))
	idx := make([]int, 0, len(holds))
	for i, h := range holds {
		// The batch holds each lease's call lock, as Renew does: a
		// release waits for the batch.
		h.callMu.Lock()
		if h.spent {
			h.callMu.Unlock()
			errs[i] = backend.ErrLost
			continue
		}
		items = append(items, backend.RenewItem{Lease: h.lease, TTL: h.ttl})
		idx = append(idx, i)
	}
	if len(items) > 0 {
		s.batch.RenewBatch(ctx, items)
	}
	for j, i := range idx {
		errs[i] = items[j].Err
		holds[i].callMu.Unlock()
	}
}

// renewed records the outcomes of the renewals of holds sent at start.
func (s *scheduler) renewed(holds []*hold, start mono, latency time.Duration, errs []error) {
	if obs := s.c.cfg.observer; obs != nil {
		for i, h := range holds {
			obs.Renewed(Renewal{Name: h.hd.key.name, Token: h.token, Latency: latency, Err: errs[i]})
		}
	}
	var refused []*hold
	var failed []error
	s.mu.Lock()
	for i, h := range holds {
		err := errs[i]
		h.renewing = false
		h.cancelRenew = nil
		if h.done {
			continue
		}
		s.unfile(h)
		switch {
		case err == nil:
			h.fails, h.lastErr = 0, nil
			h.validUntil = start.add(h.ttl)
			h.next = start.add(h.every)
		case errors.Is(err, ErrLost):
			h.done = true
			refused = append(refused, h)
			failed = append(failed, err)
			continue
		default:
			h.fails++
			h.lastErr = err
			h.next = min(monoNow().add(retryDelay(h.ttl, int(h.fails))), h.deadline())
		}
		s.file(h)
	}
	s.mu.Unlock()
	for i, h := range refused {
		s.c.lose(h, LostRefused, storeSaysGone("a renewal", failed[i]))
	}
	for i, h := range holds {
		if err := errs[i]; err != nil && !errors.Is(err, ErrLost) {
			s.c.cfg.logger.Warn("locker: renewal failed, retrying", "name", h.hd.key.name, "err", err)
		}
	}
}

// releaseExpired releases a fixed lease on a driver whose holds live as long
// as a session, since the store will not end it by itself.
func (s *scheduler) releaseExpired(h *hold) {
	s.c.wg.Add(1)
	go func() {
		defer s.c.wg.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.c.ctx), h.hd.cfg.releaseTimeout)
		defer cancel()
		_ = h.releaseLease(ctx)
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

// storeSaysGone is the cause of a loss that a call (what) found: the store
// answered that the hold is no longer this owner's.
func storeSaysGone(what string, err error) error {
	if err.Error() == ErrLost.Error() {
		return fmt.Errorf("%s found the hold gone (it expired, or was freed by force)", what)
	}
	return fmt.Errorf("%s found the hold gone: %w", what, err)
}

// slotHeap is a min-heap of slots.
type slotHeap []mono

func (q slotHeap) Len() int           { return len(q) }
func (q slotHeap) Less(i, j int) bool { return q[i] < q[j] }
func (q slotHeap) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *slotHeap) Push(x any)        { *q = append(*q, x.(mono)) }
func (q *slotHeap) Pop() any {
	old := *q
	n := len(old)
	x := old[n-1]
	*q = old[:n-1]
	return x
}
