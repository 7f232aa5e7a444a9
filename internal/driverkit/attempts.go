package driverkit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Attempts runs the attempts of one acquisition, for a driver whose holds
// live in a session (etcdlock, zklock): each gets the live session from
// session, whose error ends the acquisition, and makes one attempt in it.
// The error of each attempt decides what comes next:
//
//   - one that wraps ended — the session ended while the attempt was in
//     flight, taking its key or node along — is tried again at once; at
//     most twice more, unless wait;
//   - when wait, one that is transient(err) — the store may recover, as
//     from a lost connection or an election — is tried again after a pause
//     that doubles from 20ms to 1s;
//   - any other is returned.
//
// When ctx ends between attempts, its error is returned, saying the last
// transient failure.
func Attempts[S, L any](ctx context.Context, wait bool, session func(context.Context) (S, error), attempt func(S) (L, error), ended error, transient func(error) bool) (L, error) {
	var none L
	var last error
	for n, backoff := 0, 20*time.Millisecond; ; n++ {
		if err := ctx.Err(); err != nil {
			if last != nil {
				err = fmt.Errorf("%w (last: %w)", err, last)
			}
			return none, err
		}
		s, err := session(ctx)
		if err != nil {
			return none, err
		}
		l, err := attempt(s)
		switch {
		case err == nil:
			return l, nil
		case errors.Is(err, ended) && (wait || n < 2):
			continue
		case !wait || !transient(err) || ctx.Err() != nil:
			return none, err
		}
		last = err
		Sleep(ctx, backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// Done reports, without waiting, whether ch is closed.
func Done(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Sleep waits for d, or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool { return Pause(ctx.Done(), d) }

// Pause waits for d, or until done is closed; it reports whether d passed.
func Pause(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
