package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
)

// What the checks of the weighted primitives (semaphores, read-write
// locks) share.

// needWeighted: the driver declares Weighted.
var needWeighted = declared("Weighted", func(c backend.Capabilities) bool { return c.Weighted })

// units is a resource that holders of a weighted lock enter with their
// weight. It detects more weight inside than the limit, and a write (the
// whole limit) beside anything else.
type units struct {
	limit int64

	mu      sync.Mutex
	inside  int64
	most    int64 // the most weight seen inside at once
	holders int   // holders inside now
	sharing int   // the most holders seen inside at once
	tokens  map[uint64]string
	entries int
	errs    []string
}

func newUnits(limit int64) *units { return &units{limit: limit, tokens: make(map[uint64]string)} }

func (u *units) enter(who string, weight int64, token uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.inside += weight
	u.holders++
	u.entries++
	u.most = max(u.most, u.inside)
	u.sharing = max(u.sharing, u.holders)
	if u.inside > u.limit {
		u.errs = append(u.errs, fmt.Sprintf("%s entered with %d, making %d inside a limit of %d", who, weight, u.inside, u.limit))
	}
	if token != 0 {
		if other, ok := u.tokens[token]; ok {
			u.errs = append(u.errs, fmt.Sprintf("%s entered with token %d, which %s was granted before", who, token, other))
		}
		u.tokens[token] = who
	}
}

func (u *units) exit(weight int64) {
	u.mu.Lock()
	u.inside -= weight
	u.holders--
	u.mu.Unlock()
}

func (u *units) check(t *testing.T, wantEntries int) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	for i, e := range u.errs {
		if i == 10 {
			t.Errorf("... and %d more", len(u.errs)-10)
			break
		}
		t.Error(e)
	}
	if u.entries != wantEntries {
		t.Errorf("%d entries, want %d", u.entries, wantEntries)
	}
}

// acquireWaitingWeighted waits for r at the SPI level, as package locker
// would: the native wait, else attempts that keep a place.
func acquireWaitingWeighted(ctx context.Context, d backend.Driver, r backend.Request) (backend.Lease, error) {
	r.Queue = true
	if w, ok := d.(backend.Waiter); ok {
		l, err := w.AcquireWait(ctx, r)
		if !errors.Is(err, backend.ErrHeld) {
			return l, err
		}
	}
	for {
		l, err := d.Acquire(ctx, r)
		if !errors.Is(err, backend.ErrHeld) {
			return l, err
		}
		select {
		case <-ctx.Done():
			if dq, ok := d.(backend.Dequeuer); ok {
				_ = dq.Dequeue(context.WithoutCancel(ctx), r)
			}
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// footprint returns what the harness's Footprint hook counts.
func (s *suite) footprint(t *testing.T, ctx context.Context) int {
	t.Helper()
	n, err := s.h.Footprint(ctx)
	if err != nil {
		t.Fatalf("Footprint: %v", err)
	}
	return n
}

func needFootprint(s *suite) string {
	if s.h.Footprint == nil {
		return "the harness has no Footprint hook"
	}
	return ""
}
