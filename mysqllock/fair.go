package mysqllock

import "time"

// Fairness: each lock's row keeps a bakery's counters (tickets, serving,
// serving_at) and the acquiring statement decides on the database's clock;
// package internal/ticket keeps this Driver's waiters' places and
// schedules their looks (its doc has the full story). On PostgreSQL a
// release's NOTIFY wakes the head instead of its polling.
const (
	// claimWindow is how long a free lock waits for the head to take it.
	claimWindow = 150 * time.Millisecond
)
