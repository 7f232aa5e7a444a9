package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// listenReadyWait bounds how long a new waiter waits for the LISTEN
// connection before it falls back to polling.
const listenReadyWait = 2 * time.Second

// notifier is a Driver's LISTEN connection on PostgreSQL: one connection,
// outside the pool, started by the first waiter and kept until Close,
// whose notifications (payload: the lock name) wake the waiters of that
// name in this Driver. While it is not listening — before it connects,
// or while it reconnects after an error — waiters poll; when it
// (re)connects every waiter is woken to try again, so that no release
// during the gap is missed.
type notifier struct {
	pool    *sql.DB // where the connection settings come from
	channel string

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	listening atomic.Bool

	mu      sync.Mutex
	started bool
	ready   chan struct{} // closed at each (re)connection, then replaced
	subs    map[string]map[*subscription]struct{}
}

func newNotifier(pool *sql.DB, channel string) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &notifier{
		pool:    pool,
		channel: channel,
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
		ready:   make(chan struct{}),
		subs:    make(map[string]map[*subscription]struct{}),
	}
}

// subscription is one waiter's interest in releases of a name.
type subscription struct {
	n    *notifier
	name string
	ch   chan struct{} // 1-buffered: a wake-up is never blocked, never lost
}

// subscribe registers a waiter for name. It starts the listener on first
// use and waits, at most listenReadyWait or until ctx ends, until it
// listens, so that the attempt that follows is already covered.
func (n *notifier) subscribe(ctx context.Context, name string) *subscription {
	s := &subscription{n: n, name: name, ch: make(chan struct{}, 1)}
	n.mu.Lock()
	if n.subs[name] == nil {
		n.subs[name] = make(map[*subscription]struct{})
	}
	n.subs[name][s] = struct{}{}
	if !n.started {
		n.started = true
		go n.run()
	}
	ready := n.ready
	n.mu.Unlock()
	if !n.listening.Load() {
		t := time.NewTimer(listenReadyWait)
		defer t.Stop()
		select {
		case <-ready:
		case <-t.C:
		case <-ctx.Done():
		case <-n.ctx.Done():
		}
	}
	return s
}

// active reports whether a release will wake the subscriber; nil is
// never active.
func (s *subscription) active() bool { return s != nil && s.n.listening.Load() }

func (s *subscription) cancel() {
	n := s.n
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.subs[s.name], s)
	if len(n.subs[s.name]) == 0 {
		delete(n.subs, s.name)
	}
}

func wake(s *subscription) {
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// run keeps a LISTEN connection until close, reconnecting with backoff.
func (n *notifier) run() {
	defer close(n.done)
	b := backoff{next: 50 * time.Millisecond}
	for n.ctx.Err() == nil {
		if n.listen() {
			b = backoff{next: 50 * time.Millisecond}
		}
		n.listening.Store(false)
		pause(n.ctx, min(b.step(), 5*time.Second))
	}
}

// listen connects, listens and dispatches notifications until an error or
// close. It reports whether it got as far as listening.
func (n *notifier) listen() bool {
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
	if _, err := conn.Exec(n.ctx, "LISTEN "+pgx.Identifier{n.channel}.Sanitize()); err != nil {
		return false
	}
	n.listening.Store(true)
	n.mu.Lock()
	close(n.ready)
	n.ready = make(chan struct{})
	for _, subs := range n.subs {
		for s := range subs {
			wake(s) // a release may have happened while nobody listened
		}
	}
	n.mu.Unlock()
	for {
		msg, err := conn.WaitForNotification(n.ctx)
		if err != nil {
			return true
		}
		n.mu.Lock()
		for s := range n.subs[msg.Payload] {
			wake(s)
		}
		n.mu.Unlock()
	}
}

// config returns the settings of the pool's connections, taken from one
// of them: the listener connects where the pool does, with the same
// credentials and TLS.
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
