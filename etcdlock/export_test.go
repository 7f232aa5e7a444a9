package etcdlock

// Hooks for the tests of package etcdlock_test.

// Crash stops d as a process that died would: no revoke, no delete, no
// more keepalives; its keys stay until its session's lease expires.
func Crash(d *Driver) { d.crash() }

// Wakeups returns how many times d's waiters were woken by the deletion
// of the key before theirs.
func Wakeups(d *Driver) int64 { return d.wakeups.Load() }

// Waiting returns how many of d's waiters wait for the key before theirs
// to go.
func Waiting(d *Driver) int64 { return d.waiting.Load() }

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

// BeforePlainDelete makes d call f in each Release allowed a plain Delete,
// just before the Delete is sent; set it before d is used.
func BeforePlainDelete(d *Driver, f func()) { d.beforeDelete = f }

// HeldBack returns how many acquisitions of d's current session wait for
// a plain Delete of their key to have its answer.
func HeldBack(d *Driver) int {
	d.mu.Lock()
	s := d.sess
	d.mu.Unlock()
	if s == nil {
		return 0
	}
	s.uses.mu.Lock()
	defer s.uses.mu.Unlock()
	return s.uses.heldBack
}
