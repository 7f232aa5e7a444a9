package backend

// Error is the type of the sentinel errors shared by drivers and package
// locker. Its message carries the "locker: " prefix, so the same values are
// exported by package locker and match with errors.Is on either side.
type Error struct{ msg string }

// NewError returns a sentinel error whose message is "locker: " + msg.
func NewError(msg string) *Error { return &Error{msg: msg} }

func (e *Error) Error() string { return "locker: " + e.msg }

// Text returns the message without the "locker: " prefix, for callers that
// wrap the error with a prefix of their own.
func (e *Error) Text() string { return e.msg }

// Sentinel errors. Drivers return them (wrapped or not); package locker
// re-exports them.
var (
	// ErrHeld: another owner holds the lock (the answer of one attempt).
	ErrHeld = NewError("held by another owner")
	// ErrLost: this owner's hold is gone (expired, forced off, session lost).
	ErrLost = NewError("hold lost")
	// ErrNotHeld: nothing is held (Unlock of a handle that holds nothing, or
	// ForceRelease of a free lock).
	ErrNotHeld = NewError("not held")
	// ErrInvalidName: the name is empty, not UTF-8, or too long for the store.
	ErrInvalidName = NewError("invalid lock name")
	// ErrInvalidTTL: the lease is not positive or too short to be renewed.
	ErrInvalidTTL = NewError("invalid TTL")
	// ErrClosed: the client or driver has been closed.
	ErrClosed = NewError("closed")
	// ErrNotSupported: the driver lacks an optional ability.
	ErrNotSupported = NewError("not supported by this driver")
	// ErrBadURL: a URL could not be used to open a driver.
	ErrBadURL = NewError("bad URL")
	// ErrInvalidOption: an option has a bad value.
	ErrInvalidOption = NewError("invalid option")
	// ErrLimitConflict: a request's Limit is not the one the store keeps
	// for the name (a Semaphore opened with another number of permits).
	ErrLimitConflict = NewError("limit conflict")
)
