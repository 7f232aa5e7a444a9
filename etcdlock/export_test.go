package etcdlock

// Hooks for the tests of package etcdlock_test.

// Crash stops d as a process that died would: no revoke, no delete, no
// more keepalives; its keys stay until its session's lease expires.
func Crash(d *Driver) { d.crash() }

// PredecessorEvents returns how many watch events d's waiters received on
// their predecessors' keys.
func PredecessorEvents(d *Driver) int64 { return d.predEvents.Load() }

// Watching returns how many of d's waiters are blocked on a watch.
func Watching(d *Driver) int64 { return d.watching.Load() }

// NamePrefix returns the key range of a lock name: its keys begin with it.
func NamePrefix(d *Driver, name string) string { return d.namePrefix(name) }

// SessionLease returns the lease ID of d's current session, 0 when none.
func SessionLease(d *Driver) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sess == nil {
		return 0
	}
	return int64(d.sess.id)
}

// Escape and Unescape expose the name escaping for tests.
var (
	Escape   = escape
	Unescape = unescape
)
