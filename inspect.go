package locker

import (
	"context"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// Holds lists the current holds whose names start with prefix, for admin
// tools. It returns ErrNotSupported when the driver cannot inspect.
func (c *Client) Holds(ctx context.Context, prefix string) ([]backend.Hold, error) {
	in, ok := c.d.(backend.Inspector)
	if !ok {
		return nil, wrap("holds", ErrNotSupported)
	}
	if ctx == nil {
		return nil, wrap("holds", ErrNilContext)
	}
	hs, err := in.Holds(ctx, prefix)
	if err != nil {
		return nil, wrap("holds "+driverkit.QuoteName(prefix), err)
	}
	return hs, nil
}

// ForceRelease frees name whoever holds it, for admin tools: the holder
// sees its hold lost. It returns ErrNotHeld when nobody holds it and
// ErrNotSupported when the driver cannot inspect.
func (c *Client) ForceRelease(ctx context.Context, name string) error {
	in, ok := c.d.(backend.Inspector)
	if !ok {
		return opErr("forcerelease", name, ErrNotSupported)
	}
	if ctx == nil {
		return opErr("forcerelease", name, ErrNilContext)
	}
	if err := backend.CheckName(name); err != nil {
		return opErr("forcerelease", name, err)
	}
	return opErr("forcerelease", name, in.ForceRelease(ctx, name))
}
