package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker"
	"github.com/golocker/locker/redislock"
)

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

// TestALocalWaiterIsPassedTheLock: 4 waiters of one Driver, queued behind
// another process's holder. The first gets the lock by hand-off; each
// release after that passes it to the next local waiter without freeing
// it, which shows in the tokens: one more each time (the hand-off reserved
// them), where a release and a new grant would skip the reserved ones.
// Holds reports each passed hold, and Waiters the waiters left (not those
// passed the lock, whose places in Redis stay until the chain ends). The
// last release frees the lock, and the next grant's token is above every
// passed one.
func TestALocalWaiterIsPassedTheLock(t *testing.T) {
	t.Parallel()
	ctx, name, c, other := passSetup(t, time.Minute)
	holder := other.NewMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
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
		awaitWaiters(t, ctx, c, name, i+1)
	}
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
		if k, err := c.Driver().(interface {
			Waiters(context.Context, string) (int, error)
		}).Waiters(ctx, name); err != nil || k != n-1-i {
			t.Errorf("after grant %d: Waiters = %d, %v; want %d", i, k, err, n-1-i)
		}
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

// TestAPassDoesNotOvertakeAnotherProcess: a local waiter that began to
// wait after another process's waiter, once the holder's Driver was told
// of it, is not passed the lock ahead of it.
func TestAPassDoesNotOvertakeAnotherProcess(t *testing.T) {
	t.Parallel()
	ctx, name, c, remote := passSetup(t, time.Minute)
	holder, held := handedOff(t, ctx, c, remote, name)

	r := remote.NewMutex(name)
	rGot := lockAsync(ctx, r)
	awaitWaiters(t, ctx, c, name, 1)
	d := c.Driver().(*redislock.Driver)
	eventually(t, 10*time.Second, "the holder's Driver is told of the other process's waiter", func() bool {
		return redislock.RemoteQueued(d, name)
	})
	local := c.NewMutex(name)
	localGot := lockAsync(ctx, local)
	awaitWaiters(t, ctx, c, name, 2)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, rGot, "the other process's waiter")
	stillWaits(t, localGot, "the local waiter, while the other process's waiter ahead of it holds the lock")
	tokenAfter(t, r.Token(), held)
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, localGot, "the local waiter")
	tokenAfter(t, local.Token(), r.Token())
	unlock(t, ctx, local)
}

// TestAPassOfALostLockIsLost: the holder's key is deleted behind its back
// while a waiter of its Driver waits in the process. The release, which
// does not call Redis, passes the lock; the passed hold's token is below
// that of the next owner, who finds the lock free, and its Unlock reports
// ErrLost without touching the next owner's lock.
func TestAPassOfALostLockIsLost(t *testing.T) {
	t.Parallel()
	ctx, name, c, other := passSetup(t, time.Minute)
	srv := standalone.Get(t)
	holder, held := handedOff(t, ctx, c, other, name)
	waiter := c.NewMutex(name)
	waiterGot := lockAsync(ctx, waiter)
	awaitLocalWaiters(t, c, name, 1)

	if err := del(ctx, srv, c.Driver().(*redislock.Driver).Key(name)); err != nil {
		t.Fatal(err)
	}
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

// TestLocalWaitersOfALostChainQueue: the holder's key is deleted behind
// its back; its next renewal finds it gone, and its Driver's waiter that
// waited in the process queues in Redis and takes the free lock, while
// the old holder, which has not unlocked, is told it lost its hold.
func TestLocalWaitersOfALostChainQueue(t *testing.T) {
	t.Parallel()
	const ttl = 900 * time.Millisecond
	ctx, name, c, other := passSetup(t, ttl)
	srv := standalone.Get(t)
	holder, held := handedOff(t, ctx, c, other, name)
	waiter := c.NewMutex(name)
	waiterGot := lockAsync(ctx, waiter)
	awaitLocalWaiters(t, c, name, 1)
	if err := del(ctx, srv, c.Driver().(*redislock.Driver).Key(name)); err != nil {
		t.Fatal(err)
	}
	mustLock(t, waiterGot, "waiter")
	if waiter.Token() <= held {
		t.Errorf("the waiter's token %d is not above the lost hold's %d", waiter.Token(), held)
	}
	select {
	case <-holder.Lost():
	case <-time.After(5 * time.Second):
		t.Error("the old holder was not told it lost its hold")
	}
	if err := holder.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Errorf("the old holder's Unlock = %v, want ErrLost", err)
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Errorf("the waiter's Unlock = %v", err)
	}
}

// handedOff returns a handle of c that holds name by a hand-off from a
// holder of other (so that its Driver has tokens to pass), and its token.
func handedOff(t *testing.T, ctx context.Context, c, other *locker.Client, name string) (*locker.Mutex, uint64) {
	t.Helper()
	first := other.NewMutex(name)
	if err := first.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	m := c.NewMutex(name)
	got := lockAsync(ctx, m)
	awaitWaiters(t, ctx, c, name, 1)
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
	return testCtx(t, time.Minute), "pass/" + t.Name(),
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
	eventually(t, within, name+" is free", try)
	return m
}

// unlock unlocks m, which must hold the lock.
func unlock(t *testing.T, ctx context.Context, m *locker.Mutex) {
	t.Helper()
	if err := m.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}

// awaitLocalWaiters waits until n of c's waiters for name wait in the
// process only.
func awaitLocalWaiters(t *testing.T, c *locker.Client, name string, n int) {
	t.Helper()
	d := c.Driver().(*redislock.Driver)
	eventually(t, 10*time.Second, fmt.Sprintf("%d local waiter(s)", n), func() bool {
		return redislock.LocalWaiters(d, name) == n
	})
}

// TestPassesRaceCancelledWaiters: 8 handles of one Driver take turns, some
// Locks with deadlines that end while the lock may be passed to them. No
// two hold at once, and at the end the lock is free at once, not after a
// lease: a waiter that gave up as it was passed the lock passed it on.
func TestPassesRaceCancelledWaiters(t *testing.T) {
	t.Parallel()
	ctx, name, c, other := passSetup(t, time.Minute)
	// Start with a hand-off, so that there are tokens to pass.
	first := other.NewMutex(name)
	if err := first.Lock(ctx); err != nil {
		t.Fatal(err)
	}
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
	time.Sleep(10 * time.Millisecond) // let some wait before the hand-off
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
// queued before the lock was handed to this Driver's waiter; the Driver's
// later waiter is not passed the lock ahead of it.
func TestAGrantBehindAnotherProcessIsNotPassedOn(t *testing.T) {
	t.Parallel()
	ctx, name, c, remote := passSetup(t, time.Minute)
	other := openClient(t, standaloneURL(t), locker.WithTTL(time.Minute))
	holder := other.NewMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	a := c.NewMutex(name)
	aGot := lockAsync(ctx, a)
	awaitWaiters(t, ctx, c, name, 1)
	r := remote.NewMutex(name)
	rGot := lockAsync(ctx, r)
	awaitWaiters(t, ctx, c, name, 2)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, aGot, "the Driver's first waiter")
	local := c.NewMutex(name)
	localGot := lockAsync(ctx, local)
	awaitWaiters(t, ctx, c, name, 2)
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, rGot, "the other process's waiter")
	stillWaits(t, localGot, "the Driver's later waiter, while the other process's waiter ahead of it holds the lock")
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, localGot, "the Driver's later waiter")
	unlock(t, ctx, local)
}

// TestNoPassBetweenDifferentTTLs: the holder's lease in Redis is for its
// own TTL, so a waiter that asked for another one gets the lock from Redis,
// with a lease of its own, not passed.
func TestNoPassBetweenDifferentTTLs(t *testing.T) {
	t.Parallel()
	ctx, name, c, other := passSetup(t, time.Minute)
	holder, held := handedOff(t, ctx, c, other, name)
	waiter := c.NewMutex(name, locker.WithTTL(2*time.Minute))
	got := lockAsync(ctx, waiter)
	awaitWaiters(t, ctx, c, name, 1)
	if n := redislock.LocalWaiters(c.Driver().(*redislock.Driver), name); n != 0 {
		t.Errorf("%d local waiters with another TTL than the holder's", n)
	}
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
// the process with ErrClosed and releases the hold, so another process
// takes the lock at once.
func TestCloseEndsLocalWaiters(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	url := standaloneURL(t)
	name := "pass/" + t.Name()
	c, err := locker.Open(ctx, url, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	other := openClient(t, url, locker.WithTTL(time.Minute))
	handedOff(t, ctx, c, other, name)
	waiter := c.NewMutex(name)
	got := lockAsync(ctx, waiter)
	awaitLocalWaiters(t, c, name, 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := awaitLock(t, got, "waiter"); !errors.Is(err, locker.ErrClosed) {
		t.Errorf("the local waiter's Lock after Close = %v, want ErrClosed", err)
	}
	unlock(t, ctx, takeFree(t, ctx, other, name, 0))
}

// TestAStrayGrantIsReleased: a waiter queued in Redis is passed the lock
// by its Driver, so its place is left in Redis for a while. Another
// process frees the lock by force, and Redis hands it to that place. The
// Driver releases that grant at once, so a third owner need not wait for
// its lease, and the passed hold is told it lost the lock.
func TestAStrayGrantIsReleased(t *testing.T) {
	t.Parallel()
	ctx, name, c, other := passSetup(t, time.Minute)
	holder := other.NewMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	a, b := c.NewMutex(name), c.NewMutex(name)
	aGot := lockAsync(ctx, a)
	awaitWaiters(t, ctx, c, name, 1)
	bGot := lockAsync(ctx, b)
	awaitWaiters(t, ctx, c, name, 2)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, aGot, "a")
	tokA := a.Token()
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, bGot, "b")
	if b.Token() != tokA+1 {
		t.Fatalf("b's token %d after a's %d: not passed", b.Token(), tokA)
	}
	if err := other.ForceRelease(ctx, name); err != nil {
		t.Fatal(err)
	}
	third := takeFree(t, ctx, other, name, 10*time.Second)
	if err := b.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Errorf("the passed hold's Unlock = %v, want ErrLost", err)
	}
	if err := third.Unlock(ctx); err != nil {
		t.Errorf("the third owner's Unlock = %v", err)
	}
}

// TestBatchPassesBeforeAnotherProcess: with batch=2, a Driver that holds
// the lock while another process's waiter waits passes it to two of its
// own later waiters first (they wait in the process, with no call), then
// lets Redis hand it to that waiter, and its third waiter comes after.
// Tokens go up all the way. Without batch,
// TestAPassDoesNotOvertakeAnotherProcess holds.
func TestBatchPassesBeforeAnotherProcess(t *testing.T) {
	t.Parallel()
	ctx, name, _, remote := passSetup(t, time.Minute)
	c := openClient(t, standaloneURL(t)+"?batch=2", locker.WithTTL(time.Minute))
	if c.Capabilities().FIFO || !remote.Capabilities().FIFO {
		t.Fatalf("FIFO declared: %v with batch=2, %v without; want false, true", c.Capabilities().FIFO, remote.Capabilities().FIFO)
	}
	holder, held := handedOff(t, ctx, c, remote, name)

	r := remote.NewMutex(name)
	rGot := lockAsync(ctx, r)
	awaitWaiters(t, ctx, c, name, 1)
	d := c.Driver().(*redislock.Driver)
	eventually(t, 10*time.Second, "the holder's Driver is told of the other process's waiter", func() bool {
		return redislock.RemoteQueued(d, name)
	})
	var own [3]*locker.Mutex
	var got [3]<-chan error
	for i := range own {
		own[i] = c.NewMutex(name)
		got[i] = lockAsync(ctx, own[i])
		awaitWaiters(t, ctx, c, name, 2+i)
		awaitLocalWaiters(t, c, name, i+1)
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
	mustLock(t, got[2], "the third waiter")
	tokenAfter(t, own[2].Token(), r.Token())
	unlock(t, ctx, own[2])
	takeFree(t, ctx, remote, name, 0)
}

// TestBatchAfterAGrantBehindAnotherProcess: a grant made while another
// process's waiter is queued reserves no tokens (the chain would pass
// nothing, TestAGrantBehindAnotherProcessIsNotPassedOn). With batch=1 the
// Driver reserves them itself before Lock returns, passes the lock once
// to its own waiter queued in Redis behind the other process's, and then
// lets the other process's waiter have it.
func TestBatchAfterAGrantBehindAnotherProcess(t *testing.T) {
	t.Parallel()
	ctx, name, _, remote := passSetup(t, time.Minute)
	c := openClient(t, standaloneURL(t)+"?batch=1", locker.WithTTL(time.Minute))
	d := c.Driver().(*redislock.Driver)
	first := remote.NewMutex(name)
	if err := first.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	m := c.NewMutex(name)
	mGot := lockAsync(ctx, m)
	awaitWaiters(t, ctx, c, name, 1)
	r := remote.NewMutex(name)
	rGot := lockAsync(ctx, r)
	awaitWaiters(t, ctx, c, name, 2)
	own := c.NewMutex(name)
	ownGot := lockAsync(ctx, own)
	awaitWaiters(t, ctx, c, name, 3)
	eventually(t, 10*time.Second, "the waiters' calls returned", func() bool {
		return redislock.CalledWaiters(d, name) == 2
	})
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
	mustLock(t, rGot, "the other process's waiter")
	tokenAfter(t, r.Token(), own.Token())
	unlock(t, ctx, r)
}

// TestQueuedBeforeTheChainBegins: the message that another process's
// waiter queued can come before the grant it is about has started its
// chain (the two travel on different connections). It is kept for that
// chain, which then passes nothing: lost, it let one Driver of four keep
// the lock for 1,700 turns in a row.
func TestQueuedBeforeTheChainBegins(t *testing.T) {
	t.Parallel()
	ctx, name, c, _ := passSetup(t, time.Minute)
	d := c.Driver().(*redislock.Driver)
	redislock.Queued(d, name)
	m := takeFree(t, ctx, c, name, 0)
	if !redislock.RemoteQueued(d, name) {
		t.Error("the chain begun after the message does not know of the other process's waiter")
	}
	unlock(t, ctx, m)
	m = takeFree(t, ctx, c, name, 0)
	if redislock.RemoteQueued(d, name) {
		t.Error("the message also marked the next chain")
	}
	unlock(t, ctx, m)
}

// TestALateCallsPlaceIsReleased: a waiter queued in Redis is passed the
// lock while a call of its own, renewing its place, is on its way; the
// chain takes the place away, and the call, landing after, makes it
// again. The test makes that place by hand once the chain has ended.
// Redis then hands the lock to it; the Driver, which knows the owner for
// one that was passed the lock while calling, releases the grant at
// once, so the next owner does not wait out its lease.
func TestALateCallsPlaceIsReleased(t *testing.T) {
	t.Parallel()
	ctx, name, c, other := passSetup(t, time.Minute)
	d := c.Driver().(*redislock.Driver)
	rdb := redis.NewClient(&redis.Options{Addr: standalone.Get(t).Addr})
	defer rdb.Close()
	key := d.Key(name)

	holder := other.NewMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	a, b := c.NewMutex(name), c.NewMutex(name)
	aGot := lockAsync(ctx, a)
	awaitWaiters(t, ctx, c, name, 1)
	bGot := lockAsync(ctx, b)
	awaitWaiters(t, ctx, c, name, 2)
	places, err := rdb.HGetAll(ctx, key+":waiters").Result()
	if err != nil || len(places) != 2 {
		t.Fatalf("places: %v, %v", places, err)
	}
	unlock(t, ctx, holder)
	mustLock(t, aGot, "a")
	// b's place is the one left; its owner, and whether it is calling,
	// are the Driver's.
	var bOwner, bEntry string
	for o, e := range places {
		if rdb.HExists(ctx, key+":waiters", o).Val() {
			bOwner, bEntry = o, e
		}
	}
	if bOwner == "" {
		t.Fatal("b's place is gone")
	}
	redislock.AddCall(d, bOwner) // as if its renewal were on its way
	unlock(t, ctx, a)
	mustLock(t, bGot, "b")
	unlock(t, ctx, b) // the chain ends: b's place goes, the lock is free

	// The late call lands: b's place again, live for a while.
	_, lease, inbox := splitEntry(t, bEntry)
	deadline := time.Now().Add(5 * time.Second).UnixMilli()
	if err := rdb.RPush(ctx, key+":queue", bOwner).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, key+":waiters", bOwner, fmt.Sprintf("%d %s %s", deadline, lease, inbox)).Err(); err != nil {
		t.Fatal(err)
	}
	// The next Lock finds the lock free, hands it to that place and
	// queues; the Driver releases the stray grant, and it gets the lock.
	next := other.NewMutex(name)
	nextGot := lockAsync(ctx, next)
	mustLock(t, nextGot, "the next owner, after a grant to the late place")
	unlock(t, ctx, next)
}

// splitEntry splits a waiter's entry in Redis: deadline, lease, inbox.
func splitEntry(t *testing.T, e string) (deadline, lease, inbox string) {
	t.Helper()
	parts := strings.SplitN(e, " ", 3)
	if len(parts) != 3 {
		t.Fatalf("entry %q", e)
	}
	return parts[0], parts[1], parts[2]
}

// mustLock fails the test unless the Lock started by lockAsync returns
// nil (within awaitLock's bound).
func mustLock(t *testing.T, got <-chan error, what string) {
	t.Helper()
	if err := awaitLock(t, got, what); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// tokenAfter fails the test unless token is above prev.
func tokenAfter(t *testing.T, token, prev uint64) {
	t.Helper()
	if token <= prev {
		t.Errorf("token %d after %d", token, prev)
	}
}
