package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/golocker/locker/internal/driverkit"
)

// Watch implements backend.Watcher. On PostgreSQL with LISTEN/NOTIFY, ch
// receives a value when a release of name makes it the turn of one of this
// Driver's waiters (or when the Driver cannot tell: a waiter without a
// ticket yet, a LISTEN connection re-established after a gap). Elsewhere
// ch is nil: waiters look when their turn should have come (fair.go).
func (d *Driver) Watch(name string) (ch <-chan struct{}, stop func()) {
	if d.notifier == nil {
		return nil, func() {}
	}
	return d.notifier.watch(name)
}

// notifier is a Driver's LISTEN connection on PostgreSQL: one connection,
// outside the pool, started by the first watch and kept until Close. Each
// release notifies "<serving> <name>": the ticket whose turn it now is, and
// the lock. The notifier wakes the watchers of name only when that ticket
// is one of its Driver's, so a release wakes one waiter, not every Driver
// that waits.
type notifier struct {
	d    *Driver
	pool *sql.DB // where the connection settings come from

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	listen atomic.Bool

	mu      sync.Mutex
	started bool
	watches map[string]map[chan struct{}]struct{}
}

func newNotifier(d *Driver, pool *sql.DB) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &notifier{d: d, pool: pool, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		watches: make(map[string]map[chan struct{}]struct{})}
}

// listening reports whether releases are being heard; false for nil.
func (n *notifier) listening() bool { return n != nil && n.listen.Load() }

func (n *notifier) watch(name string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() != nil {
		return nil, func() {}
	}
	if n.watches[name] == nil {
		n.watches[name] = make(map[chan struct{}]struct{})
	}
	n.watches[name][ch] = struct{}{}
	if !n.started {
		n.started = true
		go n.run()
	}
	return ch, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.watches[name], ch)
		if len(n.watches[name]) == 0 {
			delete(n.watches, name)
		}
	}
}

// wakeLocked signals the watchers of name (of every name when all is
// set). n.mu is held.
func (n *notifier) wakeLocked(name string, all bool) {
	for w, chs := range n.watches {
		if !all && w != name {
			continue
		}
		for ch := range chs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// run keeps a LISTEN connection until close, reconnecting with backoff.
func (n *notifier) run() {
	defer close(n.done)
	backoff := 50 * time.Millisecond
	for n.ctx.Err() == nil {
		if n.listenOnce() {
			backoff = 50 * time.Millisecond
		}
		n.listen.Store(false)
		driverkit.Sleep(n.ctx, backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listenOnce connects, listens and dispatches notifications until an
// error or close. It reports whether it got as far as listening.
func (n *notifier) listenOnce() bool {
	cfg, err := n.config()
	if err != nil {
		return false
	}
	conn, err := pgx.ConnectConfig(n.ctx, cfg)
	if err != nil {
		return false
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	}()
	if _, err := conn.Exec(n.ctx, "LISTEN "+pgx.Identifier{n.d.channel}.Sanitize()); err != nil {
		return false
	}
	n.listen.Store(true)
	n.mu.Lock()
	n.wakeLocked("", true) // a release may have happened while nobody listened
	n.mu.Unlock()
	for {
		msg, err := conn.WaitForNotification(n.ctx)
		if err != nil {
			return true
		}
		turn, name, ok := strings.Cut(msg.Payload, " ")
		serving, err := strconv.ParseInt(turn, 10, 64)
		if !ok || err != nil || !n.d.turns.Wants(name, serving) {
			continue
		}
		n.mu.Lock()
		n.wakeLocked(name, false)
		n.mu.Unlock()
	}
}

// config returns the settings of the pool's connections, taken from one
// of them: the listener connects where the pool does, with the same
// credentials, TLS and dial function.
func (n *notifier) config() (*pgx.ConnConfig, error) {
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	c, err := n.pool.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var cfg *pgx.ConnConfig
	err = c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return errors.New("mysqllock: not a pgx connection")
		}
		cfg = sc.Conn().Config()
		// The copy carries the pool connection's notification buffer;
		// the listener's connection must get its own.
		cfg.OnNotification = nil
		return nil
	})
	return cfg, err
}

// close stops the listener and waits for it.
func (n *notifier) close() {
	n.cancel()
	n.mu.Lock()
	started := n.started
	n.started = true // no start after close
	n.mu.Unlock()
	if started {
		<-n.done
	}
}
