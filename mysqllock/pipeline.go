package mysqllock

import (
	"context"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/golocker/locker/backend"
)

// pipe is the PostgreSQL pipeline of a gate's wait and the acquiring
// statement (gate.go), sent together on a pgx connection: the acquiring
// statement runs the moment the wait returns, with a snapshot of its own
// (each statement of a batch gets one under READ COMMITTED), and the
// waiter gets both answers in one round trip.
type pipe struct {
	wait    string   // gate_wait with a positional parameter: the gate's key
	acquire string   // the acquire statement with positional parameters
	names   []string // the names of its parameters, in order
}

// param is a named parameter of the embedded SQL.
var param = regexp.MustCompile(`@[A-Za-z_][A-Za-z0-9_]*`)

// positional rewrites q's named parameters (@name, which GORM binds) as
// PostgreSQL's positional ones ($1, …), one per name, and returns the
// names in the order of their numbers. The embedded SQL has no '@'
// elsewhere (its comments are dropped when it is parsed).
func positional(q string) (string, []string) {
	var names []string
	index := map[string]int{}
	out := param.ReplaceAllStringFunc(q, func(m string) string {
		n := m[1:]
		i, ok := index[n]
		if !ok {
			names = append(names, n)
			i = len(names)
			index[n] = i
		}
		return "$" + strconv.Itoa(i)
	})
	return out, names
}

func newPipe(st statements) *pipe {
	wait, _ := positional(st.gateWait)
	q, names := positional(st.acquire)
	return &pipe{wait: wait, acquire: q, names: names}
}

// pipeline sends the gate's wait and the acquiring statement of r
// together, when g's connection is pgx's (ok false otherwise): whether
// the wait got the gate, and the grant (nil when the row was held). An
// error after the gate was got leaves the grant's outcome unknown: r is
// then released by owner.
func (g *gate) pipeline(wctx context.Context, r backend.Request) (got bool, l *lease, err error, ok bool) {
	d := g.gs.d
	a := d.acquireArgs(r)
	vals := make([]any, len(d.pipe.names))
	for i, n := range d.pipe.names {
		vals[i] = a[n]
	}
	err = g.conn.Raw(func(dc any) error {
		sc, isPgx := dc.(*stdlib.Conn)
		if !isPgx {
			return nil
		}
		ok = true
		b := &pgx.Batch{}
		b.Queue(d.pipe.wait, g.key)
		b.Queue(d.pipe.acquire, vals...)
		sent := time.Now()
		br := sc.Conn().SendBatch(wctx, b)
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return err
		}
		got = true
		var s state
		var granted int64
		rows, err := br.Query()
		if err == nil {
			for rows.Next() {
				var owner *string
				var fence, leftUs, leaseID, leaseUs *int64
				if err = rows.Scan(&granted, &owner, &fence, &leftUs, &leaseID, &leaseUs); err != nil {
					break
				}
				s.exists, s.fence = true, deref(fence)
			}
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			if !nothingDone(err) {
				d.cleanup(wctx, r)
			}
			return err
		}
		if granted == 1 {
			l = d.newLease(r, s.fence, sent)
		}
		return nil
	})
	return got, l, err, ok
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// acquireArgs are the parameters of the acquire statement for r.
func (d *Driver) acquireArgs(r backend.Request) args {
	return args{"name": r.Name, "owner": r.Owner, "lease_us": leaseMicros(r.TTL), "lease_id": nil}
}

// freshen renews a grant that a pipeline returned long after its
// statements were sent: its lease counts from then (the last local time
// known to come before the database's grant), so a wait of most of a
// lease would leave package locker a grant about to be given back. The
// renewal's own send time is the lease's start after it. An error
// releases r by owner.
func (d *Driver) freshen(ctx context.Context, l *lease, r backend.Request) error {
	if time.Since(l.Sent) <= r.TTL/4 {
		return nil
	}
	start := time.Now()
	if err := l.Renew(ctx, r.TTL); err != nil {
		d.cleanup(ctx, r)
		return err
	}
	l.Sent = start
	return nil
}
