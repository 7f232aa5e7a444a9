package conformance

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance/internal/faultgate"
)

// Faults controls the connection between one driver and its store, for the
// fault checks. NewFaultNet and FaultyDriver return implementations.
type Faults interface {
	// Pause stalls the connection: nothing goes out, nothing comes in, as
	// when the client's process is frozen or the network stalls. Calls in
	// flight wait; the driver's own timers still run.
	Pause()
	// Resume ends a Pause: what was held back goes through.
	Resume()
	// SetDelay makes every reply arrive d late (0: none).
	SetDelay(d time.Duration)
	// Cut closes the connections and refuses new ones, until Restore.
	Cut()
	// Restore ends a Cut: the driver may connect again.
	Restore()
}

// Counter is implemented by the Faults of FaultNet and FaultyDriver: it
// counts the requests the driver sent to the store (FaultNet: the writes
// of its connections; FaultyDriver: the calls of the driver it wraps), so
// that a check can tell an attempt that asked the store from one answered
// from memory. A harness's own Faults may implement it too.
type Counter interface {
	Requests() int64
}

// errCut is what a cut connection returns: a transient failure, as a
// network partition would give.
var errCut = faultgate.ErrCut

// wait is g.Wait for a connection: a pause that outlasts the connection
// (done closes) ends in net.ErrClosed.
func wait(g *faultgate.Gate, done <-chan struct{}) (time.Duration, error) {
	d, err := g.Wait(done)
	if errors.Is(err, faultgate.ErrDone) {
		err = net.ErrClosed
	}
	return d, err
}

// FaultNet is a Faults for drivers that take a dial function: give its Dial
// to the driver, and every connection the driver opens goes through it.
// Pause stalls reads and writes, SetDelay holds each reply back, Cut closes
// every connection and refuses new ones.
type FaultNet struct {
	g     faultgate.Gate
	mu    sync.Mutex              // held across a change of the cut and of conns
	conns map[*faultConn]struct{} // guarded by mu
}

// NewFaultNet returns a FaultNet with no fault.
func NewFaultNet() *FaultNet { return &FaultNet{conns: make(map[*faultConn]struct{})} }

// Pause implements Faults.
func (f *FaultNet) Pause() { f.g.Pause() }

// Resume implements Faults.
func (f *FaultNet) Resume() { f.g.Resume() }

// SetDelay implements Faults.
func (f *FaultNet) SetDelay(d time.Duration) { f.g.SetDelay(d) }

// Dial connects to address through the FaultNet.
func (f *FaultNet) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	if f.g.IsCut() {
		return nil, errCut
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	fc := &faultConn{Conn: c, f: f, done: make(chan struct{})}
	f.mu.Lock()
	if f.g.IsCut() {
		f.mu.Unlock()
		c.Close()
		return nil, errCut
	}
	f.conns[fc] = struct{}{}
	f.mu.Unlock()
	return fc, nil
}

// Cut implements Faults.
func (f *FaultNet) Cut() {
	f.mu.Lock()
	f.g.Cut()
	conns := f.conns
	f.conns = make(map[*faultConn]struct{})
	f.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// Restore implements Faults.
func (f *FaultNet) Restore() { f.g.Restore() }

// Requests is how many writes the driver's connections made: a request to
// the store is at least one. It implements Counter.
func (f *FaultNet) Requests() int64 { return f.g.Requests() }

type faultConn struct {
	net.Conn
	f         *FaultNet
	done      chan struct{}
	closeOnce sync.Once
}

func (c *faultConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	d, gerr := wait(&c.f.g, c.done)
	if gerr != nil {
		return 0, gerr
	}
	if d > 0 && n > 0 {
		select {
		case <-time.After(d):
		case <-c.done:
			return 0, net.ErrClosed
		}
	}
	return n, err
}

func (c *faultConn) Write(p []byte) (int, error) {
	if _, err := wait(&c.f.g, c.done); err != nil {
		return 0, err
	}
	c.f.g.Sent()
	return c.Conn.Write(p)
}

func (c *faultConn) Close() error {
	c.closeOnce.Do(func() { close(c.done) })
	c.f.mu.Lock()
	delete(c.f.conns, c)
	c.f.mu.Unlock()
	return c.Conn.Close()
}

// FaultyDriver wraps a driver that cannot take a dial function, so that the
// fault checks can still run: its calls, not its connections, are paused,
// delayed and cut. A grant whose reply is delayed past its ctx is released
// (as a correct driver releases a grant whose reply came too late). The
// driver's own background traffic (a session's keepalive) is not stalled,
// so a SessionLease driver needs a real FaultNet.
func FaultyDriver(d backend.Driver) (backend.Driver, Faults) {
	fd := &faultyDriver{d: d}
	if w, ok := d.(backend.Waiter); ok {
		return &faultyWaiter{faultyDriver: fd, w: w}, fd
	}
	return fd, fd
}

type faultyDriver struct {
	faultgate.Gate
	d backend.Driver
}

// call runs op through the gate: after any pause, fails if cut, and holds
// the reply back by the delay.
func (f *faultyDriver) call(ctx context.Context, op func(context.Context) error) error {
	if _, err := f.Wait(ctx.Done()); err != nil {
		return f.ctxOr(ctx, err)
	}
	f.Sent()
	err := op(ctx)
	d, gerr := f.Wait(ctx.Done())
	if gerr != nil {
		return f.ctxOr(ctx, gerr)
	}
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

func (f *faultyDriver) ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (f *faultyDriver) acquire(ctx context.Context, r backend.Request, op func(context.Context, backend.Request) (backend.Lease, error)) (backend.Lease, error) {
	var l backend.Lease
	err := f.call(ctx, func(ctx context.Context) error {
		var err error
		l, err = op(ctx, r)
		return err
	})
	if err != nil && l != nil {
		// The reply came too late: give the grant back.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), quick)
		_ = l.Release(rctx)
		cancel()
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	return &faultyLease{Lease: l, f: f}, nil
}

func (f *faultyDriver) Acquire(ctx context.Context, r backend.Request) (backend.Lease, error) {
	return f.acquire(ctx, r, f.d.Acquire)
}

func (f *faultyDriver) Capabilities() backend.Capabilities { return f.d.Capabilities() }

func (f *faultyDriver) Close() error {
	f.Resume()
	return f.d.Close()
}

type faultyWaiter struct {
	*faultyDriver
	w backend.Waiter
}

func (f *faultyWaiter) AcquireWait(ctx context.Context, r backend.Request) (backend.Lease, error) {
	return f.acquire(ctx, r, f.w.AcquireWait)
}

type faultyLease struct {
	backend.Lease
	f *faultyDriver
}

func (l *faultyLease) Renew(ctx context.Context, ttl time.Duration) error {
	return l.f.call(ctx, func(ctx context.Context) error { return l.Lease.Renew(ctx, ttl) })
}

func (l *faultyLease) Release(ctx context.Context) error {
	return l.f.call(ctx, l.Lease.Release)
}
