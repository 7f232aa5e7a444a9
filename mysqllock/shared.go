package mysqllock

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"sync"
	"time"

	"github.com/golocker/locker/backend"
)

// Shared leases (WithSharedLease, D28). A Driver keeps one lease per lease
// length in the table of shared leases: a row (id, expires_at, revoked).
// A hold is granted with a lease of its own (expires_at), as without
// shared leases; its first renewal renews its row and names the Driver's
// shared lease in it (lease_id). A hold lasts while either lease has not
// run out, so the watchdog keeps all of a Driver's holds of one length
// with one statement on the shared lease's row. A hold that is never
// renewed (a fixed lease) ends with its own lease.
//
// A shared lease keeps every row that names it, including the row of a
// hold that the Driver no longer keeps: one whose release failed, or one
// that package locker declared lost after its renewals failed. So a
// shared lease is never renewed after its lease could have run out as the
// Driver counts it (from the last renewal it saw succeed), and a failed
// release retires the hold's shared lease: it is not renewed again, the
// Driver's other holds move to a new one at their next renewal, and the
// row left behind ends with the old one.
//
// A shared lease that ran out is not free to take from: its row must be
// deleted first (lease_kill), and only a lease that has run out is
// deleted. A renewal (lease_renew) and the deletion both lock the lease's
// row, so one of them sees the other: a renewal that came first moves
// expires_at and nothing is deleted; one that comes after finds no row,
// and every hold that only the shared lease kept is lost. Ids are random,
// so a deleted lease never comes back.
//
// A forced release of a hold on a shared lease counts in the lease's
// revoked column. A Driver whose renewal sees the count change checks its
// holds' rows, at each renewal of the lease, for twice the lease's
// length: by then every hold has been renewed, and so checked, at least
// once.
type sharedLeases struct {
	mu    sync.Mutex
	byLen map[int64]*sharedLease // by length in µs
	make  sync.Mutex             // held while a lease is renewed or made by currentLease
}

func newSharedLeases() *sharedLeases {
	return &sharedLeases{byLen: make(map[int64]*sharedLease)}
}

// sharedLease is one of a Driver's shared leases.
type sharedLease struct {
	id   int64
	us   int64 // its length, µs
	ttl  time.Duration
	refs [2]leaseRef // what a hold points to: the row may name sl, or does

	mu         sync.Mutex
	until      time.Time // local time at which it runs out, from the request that last renewed it
	dead       bool      // a renewal found it run out or deleted, or it was retired
	seen       int64     // the forced releases counted when last renewed
	checkUntil time.Time // until then, renewals check their holds' rows
}

// leaseRef is what a hold knows of the shared lease its row names: sure,
// or only maybe (a renewal that would have moved it there failed with an
// unknown outcome). Each sharedLease has both, so that pointing a hold at
// one allocates nothing: a hold costs one pointer.
type leaseRef struct {
	sl   *sharedLease
	sure bool
}

// ref is the lease's id as a statement's parameter: NULL for nil.
func (sl *sharedLease) ref() any {
	if sl == nil {
		return nil
	}
	return sl.id
}

// usable reports whether new holds may name the lease: it is not dead,
// and it has at least half its length left.
func (sl *sharedLease) usable(now time.Time) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return !sl.dead && now.Add(sl.ttl/2).Before(sl.until)
}

// sharedResult is what a renewal of a shared lease found.
type sharedResult struct {
	ok    bool // renewed
	check bool // the holds' rows must be checked
	err   error
}

// renewed records a renewal sent at sent that found revoked releases.
func (sl *sharedLease) renewed(sent time.Time, revoked int64) (check bool) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if u := sent.Add(sl.ttl); u.After(sl.until) {
		sl.until = u
	}
	if revoked != sl.seen {
		sl.seen = revoked
		sl.checkUntil = time.Now().Add(2 * sl.ttl)
	}
	return time.Now().Before(sl.checkUntil)
}

// renewable reports whether sl may be renewed at now: it is not dead and
// has not run out as the Driver counts it. One that has is dead from then
// on: a hold the Driver no longer keeps may name it.
func (sl *sharedLease) renewable(now time.Time) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if !now.Before(sl.until) {
		sl.dead = true
	}
	return !sl.dead
}

// die marks sl dead: found gone, or retired.
func (sl *sharedLease) die() {
	sl.mu.Lock()
	sl.dead = true
	sl.mu.Unlock()
}

// currentLease returns the shared lease of length ttl that new holds
// name: the last one, renewed if it has less than half its length left,
// or a new one.
func (d *Driver) currentLease(ctx context.Context, ttl time.Duration) (*sharedLease, error) {
	s := d.shared
	us := leaseMicros(ttl)
	s.mu.Lock()
	sl := s.byLen[us]
	s.mu.Unlock()
	if sl != nil && sl.usable(time.Now()) {
		return sl, nil
	}
	s.make.Lock()
	defer s.make.Unlock()
	s.mu.Lock()
	sl = s.byLen[us]
	s.mu.Unlock()
	if sl != nil && sl.usable(time.Now()) {
		return sl, nil
	}
	if sl != nil && !sl.isDead() {
		if res := d.renewShared(ctx, sl); res.err != nil {
			return nil, res.err
		} else if res.ok && sl.usable(time.Now()) {
			return sl, nil
		}
	}
	sl, err := d.makeLease(ctx, us)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.byLen[us] = sl
	s.mu.Unlock()
	// Delete the shared leases that ran out (this Driver's last one, those
	// of Drivers that stopped): their holds are free anyway, and the table
	// keeps only the live ones. Best effort: the next new lease tries again.
	_ = d.retryIdempotent(ctx, func() error {
		_, _, err := d.exec(ctx, d.db, d.st.leaseGC, args{})
		return err
	})
	return sl, nil
}

func (sl *sharedLease) isDead() bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.dead
}

// makeLease inserts a new shared lease of us.
func (d *Driver) makeLease(ctx context.Context, us int64) (*sharedLease, error) {
	var b [8]byte
	var id int64
	sent := time.Now()
	err := d.retry(ctx, func() error {
		_, _ = rand.Read(b[:])
		id = int64(binary.BigEndian.Uint64(b[:])>>1) | 1 // positive, never 0
		sent = time.Now()
		_, _, err := d.exec(ctx, d.db, d.st.leaseCreate, args{"lease_id": id, "lease_us": us})
		return err
	})
	if err != nil {
		return nil, err
	}
	ttl := time.Duration(us) * time.Microsecond
	sl := &sharedLease{id: id, us: us, ttl: ttl, until: sent.Add(ttl)}
	sl.refs = [2]leaseRef{{sl: sl}, {sl: sl, sure: true}}
	return sl, nil
}

// renewShared renews the shared lease sl in one statement (two on MySQL),
// unless it is dead or could have run out by now: then it never is.
func (d *Driver) renewShared(ctx context.Context, sl *sharedLease) sharedResult {
	if !sl.renewable(time.Now()) {
		return sharedResult{}
	}
	a := args{"lease_id": sl.id, "lease_us": sl.us}
	var ok bool
	var revoked int64
	var sent time.Time
	err := d.retryIdempotent(ctx, func() error {
		ok, sent = false, time.Now()
		if d.dialect != DialectMySQL {
			return d.query(ctx, d.db, d.st.leaseRenew, a, func(rows *sql.Rows) error {
				ok = true
				return rows.Scan(&revoked)
			})
		}
		// lease_renew always changes the row (renewals + 1): 0 rows is
		// a lease that ran out.
		_, n, err := d.exec(ctx, d.db, d.st.leaseRenew, a)
		if err != nil || n == 0 {
			return err
		}
		return d.query(ctx, d.db, d.st.leaseRevoked, a, func(rows *sql.Rows) error {
			ok = true
			return rows.Scan(&revoked)
		})
	})
	switch {
	case err != nil:
		return sharedResult{err: err}
	case !ok:
		sl.die()
		return sharedResult{}
	}
	return sharedResult{ok: true, check: sl.renewed(sent, revoked)}
}

// renewOnShared sets the Err of items[idx...], whose leases are leases and
// are kept by sl, after sl's renewal found res. When sl ran out, each
// hold's own lease is renewed instead (renewRows), which moves it to the
// Driver's current shared lease: a hold taken shortly before still has
// its own lease. After a forced release of one of sl's holds, the rows are
// checked.
func (d *Driver) renewOnShared(ctx context.Context, items []backend.RenewItem, idx []int, leases []*lease, sl *sharedLease, res sharedResult) {
	switch {
	case res.err != nil:
		for _, i := range idx {
			items[i].Err = res.err
		}
		return
	case !res.ok:
		d.renewRows(ctx, items, idx, leases, sl.us)
		return
	case !res.check:
		for _, i := range idx {
			items[i].Err = nil
		}
		return
	}
	type key struct {
		name  string
		fence int64
	}
	names := make([]any, len(idx))
	pairs := make([]any, len(idx))
	for j, l := range leases {
		names[j], pairs[j] = l.Name, []any{l.Name, int64(l.Fence)}
	}
	a := args{"names": names, "pairs": pairs, "lease_id": sl.id}
	held := make(map[key]bool, len(idx))
	err := d.retryIdempotent(ctx, func() error {
		clear(held)
		return d.query(ctx, d.db, d.st.leaseCheck, a, func(rows *sql.Rows) error {
			var k key
			if err := rows.Scan(&k.name, &k.fence); err != nil {
				return err
			}
			held[k] = true
			return nil
		})
	})
	for j, i := range idx {
		l := leases[j]
		switch {
		case err != nil:
			items[i].Err = err
		case held[key{l.Name, int64(l.Fence)}]:
			items[i].Err = nil
		default:
			items[i].Err = backend.ErrLost
		}
	}
}
