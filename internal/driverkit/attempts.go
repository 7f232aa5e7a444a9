package driverkit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/golocker/locker/backend"
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

// Sleep waits for d, or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// StoreErr is the error of driver pkg for a call to its store at where
// (the endpoints, for the reader) that failed with err; it matches ctx's
// error when ctx ended.
func StoreErr(ctx context.Context, pkg, where string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return fmt.Errorf("%s: %s: %w", pkg, where, err)
}

// SessionCapabilities are the capabilities of a driver whose holds are the
// keys or nodes of a session on a consensus store (etcdlock, zklock):
// fenced, woken by a watch, first come first served, lost with the
// session, which expires when its process dies.
func SessionCapabilities() backend.Capabilities {
	return backend.Capabilities{
		Fencing:      true,
		Notify:       true,
		FIFO:         true,
		LostSignal:   true,
		Expiry:       true,
		SessionLease: true,
		CrossProcess: true,
	}
}

// Within runs f, a call that may not honour ctx (a client that connects,
// logs in or finds its master first), and returns its result, or ctx's
// error as soon as ctx ends. A result that f returns after that goes to
// late (nil: dropped), to close what it opened.
func Within[R any](ctx context.Context, f func() (R, error), late func(R)) (R, error) {
	type result struct {
		r   R
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := f()
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		return res.r, res.err
	case <-ctx.Done():
		if late != nil {
			go func() {
				if res := <-done; res.err == nil {
					late(res.r)
				}
			}()
		}
		var none R
		return none, ctx.Err()
	}
}

// WithinErr is Within for a call that returns only an error.
func WithinErr(ctx context.Context, f func() error) error {
	_, err := Within(ctx, func() (struct{}, error) { return struct{}{}, f() }, nil)
	return err
}
