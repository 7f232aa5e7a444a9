package driverkit

import (
	"context"
	"sync"
	"time"

	"github.com/golocker/locker/backend"
)

// Life is a driver's being open: Close closes Done once, waits for the
// goroutines started with Go (clean-ups), then runs the driver's own
// closing. Make one with NewLife. It is safe for concurrent use.
type Life struct {
	done chan struct{}
	mu   sync.Mutex // orders Go's Add before Close's Wait
	bg   sync.WaitGroup
	once sync.Once
	err  error
}

// NewLife returns the Life of an open driver.
func NewLife() *Life { return &Life{done: make(chan struct{})} }

// Done is closed when Close begins.
func (l *Life) Done() <-chan struct{} { return l.done }

// Err is backend.ErrClosed once Close has begun, and nil before.
func (l *Life) Err() error {
	if Done(l.done) {
		return backend.ErrClosed
	}
	return nil
}

// Go runs f in a goroutine that Close waits for, unless Close has begun:
// it then reports false and runs nothing.
func (l *Life) Go(f func()) bool {
	l.mu.Lock()
	if l.Err() != nil {
		l.mu.Unlock()
		return false
	}
	l.bg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.bg.Done()
		f()
	}()
	return true
}

// Close, the first time, closes Done, waits for the goroutines of Go, and
// runs then (nil: nothing more). It returns then's error, every time.
func (l *Life) Close(then func() error) error {
	l.once.Do(func() {
		l.mu.Lock()
		close(l.done)
		l.mu.Unlock()
		l.bg.Wait()
		if then != nil {
			l.err = then()
		}
	})
	return l.err
}

// Setup is a driver's set-up on first use (a table to create, a
// deployment to learn). Its zero value is ready.
type Setup struct {
	once sync.Once
	sem  chan struct{} // one Run at a time
	done bool          // guarded by sem
}

// Run runs set-up f unless an earlier Run's f succeeded: one caller at a
// time, so a failure is left to the next caller to try again. It fails
// with ctx's error, or backend.ErrClosed, if either ends the wait for
// another caller's f.
func (s *Setup) Run(ctx context.Context, life *Life, f func(context.Context) error) error {
	s.once.Do(func() { s.sem = make(chan struct{}, 1) })
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-life.Done():
		return backend.ErrClosed
	}
	defer func() { <-s.sem }()
	if s.done {
		return nil
	}
	if err := f(ctx); err != nil {
		return err
	}
	s.done = true
	return nil
}

// CleanupAgain are the delays after which Cleanup releases again, in the
// background, for a grant whose request reached the store only after the
// first release (a request abandoned on a cancelled ctx still runs there).
var CleanupAgain = []time.Duration{100 * time.Millisecond, time.Second}

// Cleanup releases by owner a grant that may have happened although an
// attempt failed, for a store that only answers requests (mysqllock,
// mongolock): release runs at once, with ctx's values but not its end
// (ctx may be the cancelled one), and again after each of CleanupAgain,
// in a goroutine of life, until life closes. release bounds its own time.
// The owner is unique to the failed attempt, so a late release frees
// nothing else.
func Cleanup(ctx context.Context, life *Life, release func(context.Context)) {
	release(context.WithoutCancel(ctx))
	life.Go(func() {
		for _, after := range CleanupAgain {
			if !Pause(life.Done(), after) {
				return
			}
			release(context.Background())
		}
	})
}
