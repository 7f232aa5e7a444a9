package mongolock

import "time"

// Fairness, as in package mysqllock: each lock keeps a bakery's counters
// (tickets, serving, serving_at) in its document in ModeUpdate, in its
// history and ticket documents in ModeHistory, and the update decides on
// the server's clock; package internal/ticket keeps this Driver's waiters'
// places and schedules their looks (its doc has the full story).
const (
	// claimWindow is how long a free lock waits for the head to take it:
	// longer than SQL's, as a MongoDB request can take 10 ms on a loaded
	// FerretDB.
	claimWindow = 500 * time.Millisecond
)
