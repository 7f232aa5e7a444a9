package main

import (
	"context"
	"io"
	"net"
	"sync"
	"time"

	"github.com/golocker/locker/conformance"
)

// proxy is a loopback TCP proxy in front of one server address for one
// worker: every connection it accepts is forwarded through the worker's
// conformance.FaultNet, so that the coordinator can stall, delay or cut
// that worker's connections (the worker is another process, so it cannot
// be given the FaultNet's dial function itself).
type proxy struct {
	ln       net.Listener
	upstream string
	fn       *conformance.FaultNet
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
}

func startProxy(upstream string, fn *conformance.FaultNet) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, upstream: upstream, fn: fn, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(down) {
			down.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(down)
			p.pipe(down)
		}()
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// pipe forwards one client connection until either side ends; a cut of
// the FaultNet closes the upstream side, and with it this connection.
func (p *proxy) pipe(down net.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	up, err := p.fn.Dial(ctx, "tcp", p.upstream)
	cancel()
	if err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, down); done <- struct{}{} }()
	go func() { _, _ = io.Copy(down, up); done <- struct{}{} }()
	<-done
	up.Close()
	down.Close()
	<-done
}

// close stops accepting, closes every connection and waits for the
// forwarding goroutines.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	p.ln.Close()
	p.fn.Resume()
	p.fn.Cut()
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
}
