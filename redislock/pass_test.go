package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/redislock"
)

// Passing: package locker keeps a Client's waiters for a name in the
// Client, and asks the driver to pass a hold to the next of them
// (backend.Passer); redislock passes it within the hold in Redis, with the
// next reserved token, unless another process's waiter may be first
// (chain.go, whose state machine chain_test.go tests without Redis). These
// tests run it against Redis.

// holdOf returns the token Redis has for name's hold, 0 when not held.
func holdOf(t *testing.T, ctx context.Context, c *locker.Client, name string) uint64 {
	t.Helper()
	holds, err := c.Holds(ctx, name)
	if err != nil {
		t.Fatalf("Holds: %v", err)
	}
	for _, h := range holds {
		if h.Name == name {
			return h.Token
		}
	}
	return 0
}

// TestALocalWaiterIsPassedTheLock: 4 waiters of one Client, behind
// another process's holder. The first waits in Redis and gets the lock by
// hand-off; the others wait in the Client, and each release passes the
// lock to the next without freeing it, which shows in the tokens: one more
// each time (the hand-off reserved them), where a release and a new grant
// would skip the reserved ones. Holds reports each passed hold, and only
// one waiter of the Client is ever in Redis. The last release frees the
// lock, and the next grant's token is above every passed one.
func TestALocalWaiterIsPassedTheLock(t *testing.T) {
	t.Parallel()
	ctx, name, c, other := passSetup(t, time.Minute)
	holder := locked(t, ctx, other, name)
	const n = 4
	granted := make(chan *locker.Mutex, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range n {
		m := c.NewMutex(name)
		wg.Go(func() {
			if err := m.Lock(ctx); err != nil {
				t.Errorf("waiter: %v", err)
				close(granted)
				return
			}
			granted <- m
		})
		awaitLocalWaiters(t, c, name, i+1)
	}
	awaitWaiters(t, ctx, c, name, 1)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var tokens []uint64
	for i := range n {
		var m *locker.Mutex
		select {
		case m = <-granted:
		case <-ctx.Done():
			t.Fatalf("grant %d: %v", i, ctx.Err())
		}
		if m == nil {
			t.FailNow()
		}
		tok := m.Token()
		tokens = append(tokens, tok)
		if i > 0 && tok != tokens[i-1]+1 {
			t.Errorf("grant %d: token %d after %d: not passed", i, tok, tokens[i-1])
		}
		if k := c.LocalWaiters(name); k != n-1-i {
			t.Errorf("after grant %d: LocalWaiters = %d, want %d", i, k, n-1-i)
		}
		awaitWaiters(t, ctx, c, name, 0)
		if got := holdOf(t, ctx, c, name); got != tok {
			t.Errorf("grant %d: Holds has token %d, the holder %d", i, got, tok)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Errorf("grant %d: Unlock: %v", i, err)
		}
	}
	if got := holdOf(t, ctx, c, name); got != 0 {
		t.Errorf("held with token %d after the last release", got)
	}
	next := takeFree(t, ctx, other, name, 0)
	if tok := next.Token(); tok <= tokens[n-1] {
		t.Errorf("the next grant's token %d is not above the passed ones %v", tok, tokens)
	}
	unlock(t, ctx, next)
}

// TestAPassDoesNotOvertakeAnotherProcess: once the holder's Driver is told
// that another process's waiter queued, the Client's own later waiter is
// not passed the lock ahead of it.
func TestAPassDoesNotOvertakeAnotherProcess(t *testing.T) {
	t.Parallel()
	ctx, name, c, remote := passSetup(t, time.Minute)
	holder, held := handedOff(t, ctx, c, remote, name)

	r, rGot := remoteWaiter(t, ctx, c, remote, name)
	local, localGot := localWaiter(t, ctx, c, name, 1)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, rGot, "the other process's waiter")
	stillWaits(t, localGot, "the local waiter, while the other process's waiter ahead of it holds the lock")
	tokenAfter(t, r.Token(), held)
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	getsItNext(t, ctx, local, localGot, r.Token(), "the local waiter")
}

// TestAPassOfALostLockIsLost: without keyspace events, the holder's key is
// deleted behind its back while a waiter of its Client waits. The release,
// which does not call Redis, passes the lock; the passed hold's token is
// below that of the next owner, who finds the lock free, and its Unlock
// reports ErrLost without touching the next owner's lock. (With keyspace
// events the holder is told at once, and its Unlock releases instead of
// passing: TestAPassedHoldIsToldWhenItsKeyGoes.)
func TestAPassOfALostLockIsLost(t *testing.T) {
	t.Parallel()
	url := standaloneURL(t) + "?keyspace_events=false"
	ctx, name := drivertest.Context(t, time.Minute), "pass/"+t.Name()
	c, other := openClient(t, url, locker.WithTTL(time.Minute)), openClient(t, url, locker.WithTTL(time.Minute))
	holder, held := handedOff(t, ctx, c, other, name)
	waiter, waiterGot := localWaiter(t, ctx, c, name, 1)

	dropHold(t, ctx, c, name)
	if err := holder.Unlock(ctx); err != nil {
		t.Errorf("the holder's Unlock, passing the lock = %v", err)
	}
	mustLock(t, waiterGot, "waiter")
	if waiter.Token() != held+1 {
		t.Errorf("the waiter's token %d after %d: not passed", waiter.Token(), held)
	}
	next := takeFree(t, ctx, other, name, 0)
	if next.Token() <= waiter.Token() {
		t.Errorf("the new owner's token %d is not above the passed one %d", next.Token(), waiter.Token())
	}
	if err := waiter.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Errorf("the passed hold's Unlock = %v, want ErrLost", err)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Errorf("the new owner's Unlock = %v", err)
	}
}

// TestALostHoldKeepsItsClientsWaitersUntilUnlocked: the holder's key is
// deleted behind its back; its next renewal finds it gone and tells the
// holder. Like a sync.Mutex, the handle stays locked until its owner
// unlocks (another process could take the lock meanwhile, not another
// owner of the Client); the Unlock reports ErrLost, and the Client's
// waiter then gets the lock from Redis with a higher token.
func TestALostHoldKeepsItsClientsWaitersUntilUnlocked(t *testing.T) {
	t.Parallel()
	const ttl = 900 * time.Millisecond
	ctx, name, c, other := passSetup(t, ttl)
	holder, held := handedOff(t, ctx, c, other, name)
	waiter, waiterGot := localWaiter(t, ctx, c, name, 1)
	dropHold(t, ctx, c, name)
	select {
	case <-holder.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the holder was not told it lost its hold")
	}
	stillWaits(t, waiterGot, "the Client's waiter, before the lost hold's owner unlocked")
	if err := holder.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Errorf("the old holder's Unlock = %v, want ErrLost", err)
	}
	mustLock(t, waiterGot, "waiter")
	if waiter.Token() <= held {
		t.Errorf("the waiter's token %d is not above the lost hold's %d", waiter.Token(), held)
	}
	unlock(t, ctx, waiter)
}

// handedOff returns a handle of c that holds name by a hand-off from a
// holder of other (so that its Driver has tokens to pass), and its token.
func handedOff(t *testing.T, ctx context.Context, c, other *locker.Client, name string) (*locker.Mutex, uint64) {
	t.Helper()
	first := locked(t, ctx, other, name)
	m := c.NewMutex(name)
	got := queued(t, ctx, m, c, 1)
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, got, "hand-off")
	return m, m.Token()
}

// passSetup starts a pass test on the standalone server: its ctx, a lock
// name of its own, and two Clients with leases of ttl.
func passSetup(t *testing.T, ttl time.Duration) (ctx context.Context, name string, c, other *locker.Client) {
	t.Helper()
	url := standaloneURL(t)
	return drivertest.Context(t, time.Minute), "pass/" + t.Name(),
		openClient(t, url, locker.WithTTL(ttl)), openClient(t, url, locker.WithTTL(ttl))
}

// stillWaits fails the test if the Lock started by lockAsync has returned.
func stillWaits(t *testing.T, got <-chan error, who string) {
	t.Helper()
	select {
	case err := <-got:
		t.Fatalf("%s got the lock (%v)", who, err)
	default:
	}
}

// takeFree takes name with a handle of c by TryLock, which must succeed
// at once, or within the given time when it is not zero, and returns it.
func takeFree(t *testing.T, ctx context.Context, c *locker.Client, name string, within time.Duration) *locker.Mutex {
	t.Helper()
	m := c.NewMutex(name)
	try := func() bool {
		ok, err := m.TryLock(ctx)
		return ok && err == nil
	}
	if within == 0 {
		if !try() {
			t.Fatalf("%s is not free", name)
		}
		return m
	}
	drivertest.Eventually(t, within, name+" is free", try)
	return m
}

// unlock unlocks m, which must hold the lock.
func unlock(t *testing.T, ctx context.Context, m *locker.Mutex) {
	t.Helper()
	if err := m.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}

// localWaiter starts a Lock of a new handle of c on name, and returns the
// handle and the Lock's outcome once c has n waiters of name in the Client.
func localWaiter(t *testing.T, ctx context.Context, c *locker.Client, name string, n int, opts ...locker.Option) (*locker.Mutex, <-chan error) {
	t.Helper()
	m := c.NewMutex(name, opts...)
	got := lockAsync(ctx, m)
	awaitLocalWaiters(t, c, name, n)
	return m, got
}

// remoteWaiter starts a Lock of a handle of remote on name, which c holds,
// and returns the handle and the Lock's outcome once c's Driver is told
// that this waiter of another process queued.
func remoteWaiter(t *testing.T, ctx context.Context, c, remote *locker.Client, name string) (*locker.Mutex, <-chan error) {
	t.Helper()
	r := remote.NewMutex(name)
	got := queued(t, ctx, r, c, 1)
	d := c.Driver().(*redislock.Driver)
	drivertest.Eventually(t, 10*time.Second, "the holder's Driver is told of the other process's waiter", func() bool {
		return redislock.RemoteQueued(d, name)
	})
	return r, got
}

// awaitLocalWaiters waits until c has n acquisitions of name waiting.
func awaitLocalWaiters(t *testing.T, c *locker.Client, name string, n int) {
	t.Helper()
	drivertest.Eventually(t, 10*time.Second, fmt.Sprintf("%d waiter(s) in the Client", n), func() bool {
		return c.LocalWaiters(name) == n
	})
}

// TestPassesRaceCancelledWaiters: 8 handles of one Client take turns, some
// Locks with deadlines that end while the lock may be passed to them. No
// two hold at once, and at the end the lock is free at once, not after a
// lease: a waiter that gave up as it was passed the lock passed it on.
func TestPassesRaceCancelledWaiters(t *testing.T) {
	t.Parallel()
	ctx, name, c, other := passSetup(t, time.Minute)
	// Start with a hand-off, so that there are tokens to pass.
	first := locked(t, ctx, other, name)
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		inside    int
		overlaps  int
		acquired  int
		cancelled int
		last      uint64
		backwards int
	)
	deadline := time.Now().Add(3 * time.Second)
	for i := range 8 {
		m := c.NewMutex(name)
		rng := rand.New(rand.NewPCG(uint64(i), 1))
		wg.Go(func() {
			for time.Now().Before(deadline) {
				lctx, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(4000))*time.Microsecond)
				err := m.Lock(lctx)
				cancel()
				if err != nil {
					mu.Lock()
					cancelled++
					mu.Unlock()
					continue
				}
				mu.Lock()
				inside++
				if inside > 1 {
					overlaps++
				}
				if tok := m.Token(); tok <= last {
					backwards++
				} else {
					last = tok
				}
				acquired++
				mu.Unlock()
				time.Sleep(200 * time.Microsecond)
				mu.Lock()
				inside--
				mu.Unlock()
				if err := m.Unlock(ctx); err != nil {
					t.Errorf("Unlock: %v", err)
				}
			}
		})
	}
	awaitLocalWaiters(t, c, name, 8) // all wait before the hand-off
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("%d acquisitions, %d Locks ended by their deadline", acquired, cancelled)
	if overlaps > 0 || backwards > 0 {
		t.Errorf("%d overlapping holds, %d tokens not above the previous one", overlaps, backwards)
	}
	if acquired == 0 || cancelled == 0 {
		t.Errorf("%d acquisitions and %d cancelled Locks: the race was not run", acquired, cancelled)
	}
	unlock(t, ctx, takeFree(t, ctx, other, name, 5*time.Second))
}

// TestAGrantBehindAnotherProcessIsNotPassedOn: a waiter of another process
// queued before the lock was handed to this Client's waiter (the grant
// reserved no tokens); the Client's later waiter is not passed the lock
// ahead of it.
func TestAGrantBehindAnotherProcessIsNotPassedOn(t *testing.T) {
	t.Parallel()
	ctx, name, c, remote := passSetup(t, time.Minute)
	other := openClient(t, standaloneURL(t), locker.WithTTL(time.Minute))
	holder := locked(t, ctx, other, name)
	a := c.NewMutex(name)
	aGot := queued(t, ctx, a, c, 1)
	r := remote.NewMutex(name)
	rGot := queued(t, ctx, r, c, 2)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, aGot, "the Client's first waiter")
	local, localGot := localWaiter(t, ctx, c, name, 1)
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, rGot, "the other process's waiter")
	stillWaits(t, localGot, "the Client's later waiter, while the other process's waiter ahead of it holds the lock")
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, localGot, "the Client's later waiter")
	unlock(t, ctx, local)
}

// TestNoPassBetweenDifferentTTLs: the holder's lease in Redis is for its
// own TTL, so a waiter that asked for another one gets the lock from Redis,
// with a lease of its own, not passed.
func TestNoPassBetweenDifferentTTLs(t *testing.T) {
	t.Parallel()
	ctx, name, c, other := passSetup(t, time.Minute)
	holder, held := handedOff(t, ctx, c, other, name)
	waiter, got := localWaiter(t, ctx, c, name, 1, locker.WithTTL(2*time.Minute))
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, got, "waiter")
	if tok := waiter.Token(); tok <= held+1 {
		t.Errorf("token %d after %d: passed, not granted by Redis", tok, held)
	}
	unlock(t, ctx, waiter)
}

// TestCloseEndsLocalWaiters: closing the Client ends a Lock that waits in
// the Client with ErrClosed and releases the hold, so another process
// takes the lock at once.
func TestCloseEndsLocalWaiters(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, time.Minute)
	url := standaloneURL(t)
	name := "pass/" + t.Name()
	c, err := locker.Open(ctx, url, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	other := openClient(t, url, locker.WithTTL(time.Minute))
	handedOff(t, ctx, c, other, name)
	_, got := localWaiter(t, ctx, c, name, 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := awaitLock(t, got, "waiter"); !errors.Is(err, locker.ErrClosed) {
		t.Errorf("the local waiter's Lock after Close = %v, want ErrClosed", err)
	}
	unlock(t, ctx, takeFree(t, ctx, other, name, 0))
}

// TestBatchPassesBeforeAnotherProcess: with batch=2, a Client that holds
// the lock while another process's waiter waits passes it to two of its
// own later waiters first, then lets Redis hand it to that waiter, and its
// third waiter comes after. Tokens go up all the way. Without batch,
// TestAPassDoesNotOvertakeAnotherProcess holds.
func TestBatchPassesBeforeAnotherProcess(t *testing.T) {
	t.Parallel()
	ctx, name, _, remote := passSetup(t, time.Minute)
	c := openClient(t, standaloneURL(t)+"?batch=2", locker.WithTTL(time.Minute))
	if c.Capabilities().FIFO || !remote.Capabilities().FIFO {
		t.Fatalf("FIFO declared: %v with batch=2, %v without; want false, true", c.Capabilities().FIFO, remote.Capabilities().FIFO)
	}
	holder, held := handedOff(t, ctx, c, remote, name)

	r, rGot := remoteWaiter(t, ctx, c, remote, name)
	var own [3]*locker.Mutex
	var got [3]<-chan error
	for i := range own {
		own[i], got[i] = localWaiter(t, ctx, c, name, i+1)
	}

	prev, m := held, holder
	for i := range 2 {
		unlock(t, ctx, m)
		mustLock(t, got[i], fmt.Sprintf("own waiter %d", i))
		stillWaits(t, rGot, "the other process's waiter, within the batch")
		if own[i].Token() != prev+1 {
			t.Errorf("own waiter %d: token %d after %d, want the next one (a pass)", i, own[i].Token(), prev)
		}
		prev, m = own[i].Token(), own[i]
	}
	unlock(t, ctx, m)
	mustLock(t, rGot, "the other process's waiter, after the batch")
	stillWaits(t, got[2], "the third waiter, after the batch")
	tokenAfter(t, r.Token(), prev)
	unlock(t, ctx, r)
	getsItNext(t, ctx, own[2], got[2], r.Token(), "the third waiter")
	takeFree(t, ctx, remote, name, 0)
}

// TestBatchAfterAGrantBehindAnotherProcess: a grant made while another
// process's waiter is queued reserves no tokens (the chain would pass
// nothing, TestAGrantBehindAnotherProcessIsNotPassedOn). With batch=1 the
// Driver reserves them itself before Lock returns, passes the lock once to
// its Client's own waiter, and then lets the other process's waiter have
// it.
func TestBatchAfterAGrantBehindAnotherProcess(t *testing.T) {
	t.Parallel()
	ctx, name, _, remote := passSetup(t, time.Minute)
	c := openClient(t, standaloneURL(t)+"?batch=1", locker.WithTTL(time.Minute))
	d := c.Driver().(*redislock.Driver)
	first := locked(t, ctx, remote, name)
	m := c.NewMutex(name)
	mGot := queued(t, ctx, m, c, 1)
	// Another process's waiter: not remote's, whose own owner holds.
	r := openClient(t, standaloneURL(t), locker.WithTTL(time.Minute)).NewMutex(name)
	rGot := queued(t, ctx, r, c, 2)
	own, ownGot := localWaiter(t, ctx, c, name, 2)
	unlock(t, ctx, first)
	mustLock(t, mGot, "the first waiter")
	if n := redislock.PassTokens(d, name); n == 0 {
		t.Error("no tokens reserved for passes when Lock returned")
	}
	if !redislock.RemoteQueued(d, name) {
		t.Error("the chain does not know of the other process's waiter")
	}
	held := m.Token()
	unlock(t, ctx, m)
	mustLock(t, ownGot, "own waiter")
	if own.Token() != held+1 {
		t.Errorf("own waiter: token %d after %d, want the next one (a pass)", own.Token(), held)
	}
	stillWaits(t, rGot, "the other process's waiter, within the batch")
	unlock(t, ctx, own)
	getsItNext(t, ctx, r, rGot, own.Token(), "the other process's waiter")
}

// TestQueuedBeforeTheChainBegins: the message that another process's
// waiter queued can come before the grant it is about has started its
// chain (the two travel on different connections). It is kept for that
// chain, which then passes nothing: lost, it let one Driver of four keep
// the lock for 1,700 turns in a row.
func TestQueuedBeforeTheChainBegins(t *testing.T) {
	t.Parallel()
	ctx, name, c, other := passSetup(t, time.Minute)
	d := c.Driver().(*redislock.Driver)
	// A Driver hears "q" messages, and its grants start chains, once its
	// inbox is subscribed: one wait subscribes it.
	h := takeFree(t, ctx, other, name, 0)
	w, got := localWaiter(t, ctx, c, name, 1)
	unlock(t, ctx, h)
	mustLock(t, got, "the waiter that subscribes the inbox")
	unlock(t, ctx, w)

	redislock.Queued(d, name)
	m := c.NewMutex(name)
	mustLock(t, lockAsync(ctx, m), "the lock after the message")
	if !redislock.RemoteQueued(d, name) {
		t.Error("the chain begun after the message does not know of the other process's waiter")
	}
	unlock(t, ctx, m)
	m = c.NewMutex(name)
	mustLock(t, lockAsync(ctx, m), "the next lock")
	if redislock.RemoteQueued(d, name) {
		t.Error("the message also marked the next chain")
	}
	unlock(t, ctx, m)
}

// mustLock fails the test unless the Lock started by lockAsync returns
// nil (within awaitLock's bound).
func mustLock(t *testing.T, got <-chan error, what string) {
	t.Helper()
	if err := awaitLock(t, got, what); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// getsItNext waits for the Lock of m that lockAsync started (got), fails
// the test unless m's token is above prev, and unlocks m.
func getsItNext(t *testing.T, ctx context.Context, m *locker.Mutex, got <-chan error, prev uint64, who string) {
	t.Helper()
	mustLock(t, got, who)
	tokenAfter(t, m.Token(), prev)
	unlock(t, ctx, m)
}

// tokenAfter fails the test unless token is above prev.
func tokenAfter(t *testing.T, token, prev uint64) {
	t.Helper()
	if token <= prev {
		t.Errorf("token %d after %d", token, prev)
	}
}
