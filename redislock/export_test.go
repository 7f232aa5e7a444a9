package redislock

// RemoteQueued reports whether d knows that another Driver's waiter
// queued behind d's chain on name (chain.go).
func RemoteQueued(d *Driver, name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.chains[name]
	return c != nil && c.remote
}

// PassTokens counts the tokens d's chain on name has left to pass.
func PassTokens(d *Driver, name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.chains[name]
	if c == nil || c.next > c.last {
		return 0
	}
	return int(c.last - c.next + 1)
}

// Queued delivers to d the message that another Driver's waiter queued
// behind d's hold of name.
func Queued(d *Driver, name string) { d.onQueued(d.Key(name)) }

// WithEveryAcquirePipelined makes the Driver send every acquire script
// through the pipelines of coalesce.go, which otherwise carry only the
// calls beyond the few in flight on their own.
func WithEveryAcquirePipelined() Option {
	return func(o *options) error { o.directCalls = 0; return nil }
}

// Pipelines counts the pipelines d has sent and the calls they carried.
func Pipelines(d *Driver) (pipelines, calls int64) {
	return d.acquires.pipelines.Load(), d.acquires.carried.Load()
}
