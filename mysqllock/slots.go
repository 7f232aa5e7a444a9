package mysqllock

import (
	"context"
	"database/sql"
)

// reservedConns is how many of a bounded pool's connections acquisitions
// leave to the rest — the watchdog's renewals, releases — so that a burst
// of acquisitions on a busy database cannot keep a renewal waiting for a
// connection until its lease runs out (D27). database/sql hands a freed
// connection to any one of the calls waiting for one: behind 256 waiting
// acquisitions, a renewal waited seconds, and holds were lost.
const reservedConns = 1

// acquisitionSlots returns the semaphore that bounds the acquisitions in
// flight to the pool's size (as set when the Driver is made) less
// reservedConns, at least one; nil when the pool is unbounded or unknown.
func acquisitionSlots(db *sql.DB) chan struct{} {
	if db == nil {
		return nil
	}
	n := db.Stats().MaxOpenConnections
	if n <= 0 {
		return nil
	}
	return make(chan struct{}, max(1, n-reservedConns))
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
