// Package faultgate is the state behind the conformance suite's fault
// controls (conformance.Faults): a pause that holds traffic back until
// resumed, a delay added to each reply, and a cut that fails it. The
// suite's FaultNet and FaultyDriver and the broken drivers of its own tests
// put their connections or calls through one Gate.
package faultgate

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

var (
	// ErrCut is what traffic through a cut Gate fails with: a transient
	// failure, as a network partition would give.
	ErrCut = errors.New("conformance: connection cut by the suite")
	// ErrDone is what Wait returns when its done channel closes during a
	// pause.
	ErrDone = errors.New("conformance: gave up waiting out a pause")
)

// Gate is the fault state. Its zero value lets everything through. It is
// safe for concurrent use.
type Gate struct {
	requests atomic.Int64

	mu     sync.Mutex
	paused chan struct{} // non-nil while paused; closed by Resume
	pauses int
	delay  time.Duration
	cut    bool
}

// Pause holds traffic back until Resume.
func (g *Gate) Pause() {
	g.mu.Lock()
	if g.paused == nil {
		g.paused = make(chan struct{})
		g.pauses++
	}
	g.mu.Unlock()
}

// Resume ends a Pause.
func (g *Gate) Resume() {
	g.mu.Lock()
	if g.paused != nil {
		close(g.paused)
		g.paused = nil
	}
	g.mu.Unlock()
}

// SetDelay makes Wait return d (0: none).
func (g *Gate) SetDelay(d time.Duration) {
	g.mu.Lock()
	g.delay = d
	g.mu.Unlock()
}

// Cut makes Wait fail with ErrCut until Restore.
func (g *Gate) Cut() { g.setCut(true) }

// Restore ends a Cut.
func (g *Gate) Restore() { g.setCut(false) }

func (g *Gate) setCut(cut bool) {
	g.mu.Lock()
	g.cut = cut
	g.mu.Unlock()
}

// IsCut reports whether the Gate is cut.
func (g *Gate) IsCut() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cut
}

// Sent counts one request sent through the Gate.
func (g *Gate) Sent() { g.requests.Add(1) }

// Requests is how many requests went through the Gate (Sent).
func (g *Gate) Requests() int64 { return g.requests.Load() }

// Pauses is how many times the Gate was paused.
func (g *Gate) Pauses() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pauses
}

// Delay is the delay SetDelay set.
func (g *Gate) Delay() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.delay
}

// Wait blocks while the Gate is paused, until done closes (ErrDone). It
// fails with ErrCut when the Gate is cut, and otherwise returns the delay
// to add to a reply.
func (g *Gate) Wait(done <-chan struct{}) (time.Duration, error) {
	for {
		g.mu.Lock()
		p, d, cut := g.paused, g.delay, g.cut
		g.mu.Unlock()
		if cut {
			return 0, ErrCut
		}
		if p == nil {
			return d, nil
		}
		select {
		case <-p:
		case <-done:
			return 0, ErrDone
		}
	}
}
