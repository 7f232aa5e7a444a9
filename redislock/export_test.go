package redislock

// RemoteQueued reports whether d knows that another Driver's waiter
// queued behind d's chain on name (pass.go).
func RemoteQueued(d *Driver, name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.chains[name]
	return c != nil && c.remote
}

// LocalWaiters counts d's waiters for name that wait in the process only.
func LocalWaiters(d *Driver, name string) int {
	n, _ := d.localWaiters(name)
	return n
}
