package driverkit

import "context"

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
