package locker

import (
	"errors"
	"fmt"
	"strings"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// Sentinel errors, matchable with errors.Is. They are the values of package
// backend, so drivers and users share them.
var (
	// ErrNotHeld is returned by Unlock on a handle that holds nothing.
	ErrNotHeld = backend.ErrNotHeld
	// ErrLost is returned when a hold ended before Unlock: its lease ran
	// out, the store dropped it, or renewal failed for good.
	ErrLost = backend.ErrLost
	// ErrInvalidName is returned for an empty, non-UTF-8 or too long name.
	ErrInvalidName = backend.ErrInvalidName
	// ErrInvalidTTL is returned for a lease that is not positive or shorter
	// than MinTTL.
	ErrInvalidTTL = backend.ErrInvalidTTL
	// ErrClosed is returned by every method of a closed Client and its
	// handles.
	ErrClosed = backend.ErrClosed
	// ErrNotSupported is returned when the driver lacks an optional ability.
	ErrNotSupported = backend.ErrNotSupported
	// ErrBadURL is returned by Open for a URL it cannot use.
	ErrBadURL = backend.ErrBadURL
	// ErrUnknownScheme is returned by Open for a scheme no driver registered.
	ErrUnknownScheme = backend.NewError("unknown scheme")
	// ErrNilContext is returned when a method is given a nil context.
	ErrNilContext = backend.NewError("nil context")
	// ErrInvalidOption is returned for an option with a bad value.
	ErrInvalidOption = backend.ErrInvalidOption
	// ErrZeroMutex is returned by the methods of a Mutex that
	// Client.NewMutex did not make: a zero Mutex or a nil *Mutex.
	ErrZeroMutex = newError("zero Mutex: make it with Client.NewMutex")
	// ErrZeroHandle is returned by the methods of an RWMutex, Semaphore,
	// MultiLock or Election that its Client did not make (a zero value or
	// nil).
	ErrZeroHandle = newError("zero handle: make it with its Client (NewRWMutex, NewSemaphore, NewMultiLock, NewElection)")
	// ErrUpgrade is returned at once by a write Lock of an RWMutex whose
	// caller's owner holds it for reading only: it would wait for its own
	// read hold. Release the read hold first, or take the write hold and
	// Downgrade it.
	ErrUpgrade = newError("a read hold cannot be upgraded to a write hold")
	// ErrLimitConflict is returned when a Semaphore's limit is not the one
	// the store keeps for its name, while other holders or waiters use it.
	ErrLimitConflict = backend.ErrLimitConflict
)

// newError returns a sentinel of package locker only.
func newError(msg string) error { return backend.NewError(msg) }

// OpError is the error returned by a handle's methods: the operation, the
// lock name and the cause. Backend errors are wrapped exactly once, here.
// Its message shows the first 64 bytes of a longer name, with its length.
type OpError struct {
	Op   string // "lock", "trylock", "locktimeout", "unlock", ...
	Name string // the lock name
	Err  error
}

func (e *OpError) Error() string {
	// A sentinel, bare or wrapped with detail: avoid "locker: ... : locker: ...".
	cause := strings.TrimPrefix(e.Err.Error(), "locker: ")
	return "locker: " + e.Op + " " + driverkit.QuoteName(e.Name) + ": " + cause
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// opErr wraps err once with op and name; nil stays nil and an *OpError is not
// wrapped again.
func opErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var oe *OpError
	if errors.As(err, &oe) {
		return err
	}
	return &OpError{Op: op, Name: name, Err: err}
}

// errorf returns an error that wraps sentinel, with a detail.
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}

// wrapped is an error of package locker about what: "locker: <what>: " and
// the cause's message, without the cause's own "locker: " (a sentinel,
// bare or wrapped with detail).
type wrapped struct {
	what string
	err  error
}

func (e *wrapped) Error() string {
	return "locker: " + e.what + ": " + strings.TrimPrefix(e.err.Error(), "locker: ")
}

func (e *wrapped) Unwrap() error { return e.err }

// wrap returns err as an error of package locker about what.
func wrap(what string, err error) error { return &wrapped{what: what, err: err} }
