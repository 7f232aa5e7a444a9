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

// CalledWaiters counts d's waiters for name whose call that placed them
// in Redis has returned.
func CalledWaiters(d *Driver, name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, w := range d.queues[name] {
		if w.called {
			n++
		}
	}
	return n
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

// AddCall counts one more call on its way for d's waiter owner.
func AddCall(d *Driver, owner string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w := d.waiters[owner]; w != nil {
		w.calling++
	}
}
