package driverkit

import (
	"context"
	"errors"
	"fmt"

	"github.com/golocker/locker/backend"
)

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

// StoreErr is the error of driver pkg for a call to its store at where
// (the endpoints, for the reader) that failed with err; it matches ctx's
// error when ctx ended.
func StoreErr(ctx context.Context, pkg, where string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return fmt.Errorf("%s: %s: %w", pkg, where, err)
}
