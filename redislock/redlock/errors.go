package redlock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
)

// multiError joins the errors of several instances or nodes: errors.Is and
// errors.As see each one, and the message lists each distinct message
// once, on one line.
type multiError []error

func joinErrors(errs []error) error {
	var m multiError
	for _, err := range errs {
		if err != nil {
			m = append(m, err)
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func (m multiError) Error() string {
	seen := make(map[string]bool, len(m))
	var msgs []string
	for _, err := range m {
		if s := err.Error(); !seen[s] {
			seen[s] = true
			msgs = append(msgs, s)
		}
	}
	return strings.Join(msgs, "; ")
}

func (m multiError) Unwrap() []error { return m }

// closedErr marks errors of a closed client as backend.ErrClosed.
func closedErr(err error) error {
	if errors.Is(err, redis.ErrClosed) && !errors.Is(err, backend.ErrClosed) {
		return fmt.Errorf("%w: %w", backend.ErrClosed, err)
	}
	return err
}
