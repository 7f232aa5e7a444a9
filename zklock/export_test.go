package zklock

// Hooks for the tests of package zklock_test.

// Crash makes d delete nothing from now on, as a process that died would;
// the test cuts its connection.
func Crash(d *Driver) { d.crashed.Store(true) }

// PauseMonitor makes d's monitor neither check its session nor send
// heartbeats, as in a process that does not run; the rest of d goes on.
func PauseMonitor(d *Driver) { d.paused.Store(true) }

// Wakeups returns how many times d's waiters were woken by the deletion of
// their predecessor's node.
func Wakeups(d *Driver) int64 { return d.wakeups.Load() }

// Waiting returns how many of d's waiters wait for their predecessor's
// node to go.
func Waiting(d *Driver) int64 { return d.waiting.Load() }

// Recovered returns how many nodes d found again by their GUID after a
// connection loss.
func Recovered(d *Driver) int64 { return d.recovered.Load() }

// Dir returns the node of a lock name, whose children are its holder and
// waiters.
func Dir(d *Driver, name string) string { return d.dir(name) }

// SessionTimeout returns the session timeout d works with.
func SessionTimeout(d *Driver) int64 { return int64(d.sessionTimeout()) }

// CreatedTokens returns how many of d's acquisitions had their token from
// the response to their create, without reading their node.
func CreatedTokens(d *Driver) int64 { return d.createdTokens.Load() }

// SetAfterCreate makes d run f after creating each acquisition's node,
// before listing the lock's children. Set it before d is used.
func SetAfterCreate(d *Driver, f func()) { d.afterCreate = f }
