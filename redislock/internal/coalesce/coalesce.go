// Package coalesce runs one Lua script for many callers at once, sharing
// round trips under load: a redislock Driver's acquisitions.
//
// A Coalescer sends at most its direct calls at a time as calls of their
// own, with the caller's ctx; the calls that come while those are in
// flight wait in a queue that one goroutine sends as pipelines of up to
// pipelineMax calls. Redis then reads and answers many scripts per system
// call: on two cores, 35k scripts/s from 256 connections with one call in
// flight each, 105k/s with pipelines of 16 (redis-benchmark). A Client
// holding a million locks takes them at the second rate; a Client taking a
// few at a time never waits for a pipeline.
package coalesce

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// pipelineMax bounds the calls of one pipeline.
	pipelineMax = 512
	// pipelineTimeout bounds a pipeline whose callers have not all gone:
	// go-redis's own timeouts end it sooner on a dead connection.
	pipelineTimeout = 30 * time.Second
)

// Coalescer runs a script for its callers: directly, or queued for a
// pipeline. It is safe for concurrent use.
type Coalescer struct {
	client   redis.UniversalClient
	script   *redis.Script
	max      int           // calls in flight on their own at most
	patience time.Duration // how long a caller that gave up waits for a sent call
	// stop ends the pipelines in flight (Close); closing is its ctx.
	closing context.Context
	stop    context.CancelFunc

	mu       sync.Mutex
	direct   int          // calls in flight on their own
	queue    []*queuedRun // calls waiting for a pipeline
	flushing bool         // the pipeline goroutine runs
	flushes  sync.WaitGroup
}

// New returns a Coalescer of script on client that sends direct calls at
// a time on their own (0: every call goes through a pipeline). A caller
// whose ctx ends after its call was sent in a pipeline waits up to
// patience more for the reply (Run).
func New(client redis.UniversalClient, script *redis.Script, direct int, patience time.Duration) *Coalescer {
	ctx, stop := context.WithCancel(context.Background())
	return &Coalescer{client: client, script: script, max: direct, patience: patience, closing: ctx, stop: stop}
}

// queuedRun is one call waiting for a pipeline.
type queuedRun struct {
	keys []string
	args []any
	res  any
	err  error
	done chan struct{} // closed once the reply is in res and err
	// state is queued, sent, answered or one of the two abandoned states;
	// whoever moves it on decides who deals with the reply.
	state     atomic.Int32
	abandoned func(res any, err error) // run with the reply of a call abandoned once sent
}

// The states of a queuedRun.
const (
	runQueued       = iota
	runSent         // in a pipeline on its way
	runAnswered     // its caller reads the reply
	runNeverSent    // its caller's ctx ended in the queue: it is not sent
	runAbandonedOut // its caller gave up on a sent call: abandoned gets the reply
)

// goneError is the error of a call that Run did not let run to its end for
// its caller: it was never sent, or its reply is left to the abandoned
// function.
type goneError struct{ err error }

func (e goneError) Error() string { return e.err.Error() }
func (e goneError) Unwrap() error { return e.err }

// Gone reports whether err, an error of Run, leaves nothing for the caller
// to undo: the call was never sent, or its reply goes to the abandoned
// function.
func Gone(err error) bool {
	var g goneError
	return errors.As(err, &g)
}

// Run runs the script with keys and args and returns its reply, as a call
// of its own would: when the caller's ctx ends, a call still in the queue
// is taken out of it (Gone), and a call already sent is waited for, up to
// the Coalescer's patience, before Run returns ctx's error — so that the
// caller's clean-up comes after whatever the call did. A call still
// unanswered then is left to abandoned, which gets its reply (Gone).
func (c *Coalescer) Run(ctx context.Context, keys []string, args []any, abandoned func(res any, err error)) (any, error) {
	c.mu.Lock()
	if c.direct < c.max && len(c.queue) == 0 {
		c.direct++
		c.mu.Unlock()
		res, err := c.script.Run(ctx, c.client, keys, args...).Result()
		c.mu.Lock()
		c.direct--
		c.mu.Unlock()
		return res, err
	}
	q := &queuedRun{keys: keys, args: args, done: make(chan struct{}), abandoned: abandoned}
	c.queue = append(c.queue, q)
	if !c.flushing {
		c.flushing = true
		c.flushes.Add(1)
		go c.flush()
	}
	c.mu.Unlock()
	select {
	case <-q.done:
		return q.res, q.err
	case <-ctx.Done():
	}
	if q.state.CompareAndSwap(runQueued, runNeverSent) {
		return nil, goneError{ctx.Err()}
	}
	t := time.NewTimer(c.patience)
	defer t.Stop()
	select {
	case <-q.done:
		return nil, ctx.Err()
	case <-t.C:
		if q.state.CompareAndSwap(runSent, runAbandonedOut) {
			return nil, goneError{ctx.Err()}
		}
		<-q.done
		return nil, ctx.Err()
	}
}

// Load is what a Coalescer has on its hands: the calls in flight on their
// own, those waiting for a pipeline, and whether pipelines are being sent.
func (c *Coalescer) Load() (direct, queued int, flushing bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.direct, len(c.queue), c.flushing
}

// flush sends the queue as pipelines until it is empty.
func (c *Coalescer) flush() {
	defer c.flushes.Done()
	for {
		c.mu.Lock()
		n := min(len(c.queue), pipelineMax)
		if n == 0 {
			c.flushing = false
			c.mu.Unlock()
			return
		}
		var batch []*queuedRun
		for _, q := range c.queue[:n] {
			if q.state.CompareAndSwap(runQueued, runSent) {
				batch = append(batch, q)
			}
		}
		clear(c.queue[:n])
		c.queue = c.queue[n:]
		if len(c.queue) == 0 {
			c.queue = nil // let the backing array go
		}
		c.mu.Unlock()
		if len(batch) > 0 {
			c.send(batch)
		}
	}
}

// send runs batch in one pipeline and hands each call its reply.
func (c *Coalescer) send(batch []*queuedRun) {
	ctx, cancel := context.WithTimeout(c.closing, pipelineTimeout)
	defer cancel()
	pipe := c.client.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, q := range batch {
		cmds[i] = c.script.EvalSha(ctx, pipe, q.keys, q.args...)
	}
	_, _ = pipe.Exec(ctx)
	for i, q := range batch {
		q.res, q.err = cmds[i].Result()
		if q.err != nil && strings.HasPrefix(q.err.Error(), "NOSCRIPT") {
			// The server does not know the script yet: EVAL loads it.
			q.res, q.err = c.script.Run(ctx, c.client, q.keys, q.args...).Result()
		}
		answered := q.state.CompareAndSwap(runSent, runAnswered)
		close(q.done)
		if !answered && q.abandoned != nil {
			q.abandoned(q.res, q.err)
		}
	}
}

// Close ends the pipelines in flight (their calls fail, and the callers
// still waiting clean up as after any failed call) and waits for them.
func (c *Coalescer) Close() {
	c.stop()
	c.flushes.Wait()
}
