package mysqllock

import (
	"context"
	"database/sql"

	"github.com/golocker/locker/internal/driverkit"
)

// reservedConns is how many of a bounded pool's connections acquisitions
// leave to the rest — the watchdog's renewals, releases — so that a burst
// of acquisitions on a busy database cannot keep a renewal waiting for a
// connection until its lease runs out (D27). database/sql hands a freed
// connection to any one of the calls waiting for one: behind 256 waiting
// acquisitions, a renewal waited seconds, and holds were lost.
const reservedConns = 1

// acquisitionSlots returns the semaphore that bounds the acquisitions in
// flight to the connections they may use, n, less reservedConns, at least
// one; nil when n is 0 (an unbounded or unknown pool).
func acquisitionSlots(n int) chan struct{} {
	if n <= 0 {
		return nil
	}
	return make(chan struct{}, max(1, n-reservedConns))
}

// connBudget divides the pool of db (its size as set when the Driver is
// made) between native waits and the rest: acquisitions, renewals and
// releases (0: unbounded). See WithWaitConns.
func connBudget(db *sql.DB, o options) (wait, rest int, err error) {
	if db == nil {
		return 0, 0, nil
	}
	size := db.Stats().MaxOpenConnections
	switch {
	case o.poolConns > 0: // Open: the pool is max_conns + wait_conns
		return o.waitConns, o.poolConns, nil
	case size <= 0:
		return o.waitConns, 0, nil
	case !o.waitConnsSet:
		wait = size / 4
	default:
		wait = o.waitConns
	}
	if wait > 0 && size-wait < 2 {
		return 0, 0, driverkit.BadOption("mysqllock", "wait_conns %d of a pool of %d connections leaves acquisitions fewer than 2", wait, size)
	}
	return wait, size - wait, nil
}

// takeSlot waits for an acquisition slot, until ctx ends; the func it
// returns gives the slot back.
func (d *Driver) takeSlot(ctx context.Context) (func(), error) {
	if d.slots == nil {
		return func() {}, nil
	}
	select {
	case d.slots <- struct{}{}:
		return func() { <-d.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
