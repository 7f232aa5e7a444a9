package redislock

// RemoteQueued reports whether d knows that another Driver's waiter
// queued behind d's chain on name (package chain).
func RemoteQueued(d *Driver, name string) bool {
	st, ok := d.chains.State(name)
	return ok && st.Remote
}

// PassTokens counts the tokens d's chain on name has left to pass.
func PassTokens(d *Driver, name string) int {
	st, _ := d.chains.State(name)
	return st.Left
}

// Queued delivers to d the message that another Driver's waiter queued
// behind d's hold of name.
func Queued(d *Driver, name string) { d.onQueued(d.Key(name)) }

// AcquireLoad is what d's acquire calls are: in flight on their own,
// waiting for a pipeline, and whether pipelines are being sent.
func AcquireLoad(d *Driver) (direct, queued int, flushing bool) { return d.acquires.Load() }

// DirectAcquires is how many acquire calls a Driver sends at a time on
// their own.
const DirectAcquires = directCalls

// CleanupTimeout bounds a clean-up call, and how long an acquisition whose
// ctx ended waits for its call's reply.
const CleanupTimeout = cleanupTimeout
