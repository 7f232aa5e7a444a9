package mongolock

import "time"

// SetClockSkew makes d's local wall clock run skew ahead of the real one,
// as on a client whose clock is wrong. Call it before d's first use.
func SetClockSkew(d *Driver, skew time.Duration) {
	d.wallNow = func() time.Time { return time.Now().Add(skew) }
}
