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
// Redis comes to agree with each pass, and Waiters counts the waiters
// left, also before it does. The last release frees the lock, and the
// next grant's token is above every passed one.
func TestALocalWaiterIsPassedTheLock(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	url := standaloneURL(t)
	name := "pass/" + t.Name()
	other := openClient(t, url, locker.WithTTL(time.Minute))
	holder := other.NewMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	c := openClient(t, url, locker.WithTTL(time.Minute))
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
		eventually(t, 10*time.Second, fmt.Sprintf("Redis has token %d", tok), func() bool {
			return holdOf(t, ctx, c, name) == tok
		})
		if err := m.Unlock(ctx); err != nil {
			t.Errorf("grant %d: Unlock: %v", i, err)
		}
	}
	if got := holdOf(t, ctx, c, name); got != 0 {
		t.Errorf("held with token %d after the last release", got)
	}
	next := other.NewMutex(name)
	if ok, err := next.TryLock(ctx); !ok || err != nil {
		t.Fatalf("TryLock after the last release = %v, %v", ok, err)
	}
	if tok := next.Token(); tok <= tokens[n-1] {
		t.Errorf("the next grant's token %d is not above the passed ones %v", tok, tokens)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// TestAPassDoesNotOvertakeAnotherProcess: a local waiter that began to
// wait after another process's waiter is not passed the lock ahead of it.
func TestAPassDoesNotOvertakeAnotherProcess(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	url := standaloneURL(t)
	name := "pass/" + t.Name()
	c := openClient(t, url, locker.WithTTL(time.Minute))
	remote := openClient(t, url, locker.WithTTL(time.Minute))
	// A hand-off, so that the holder has tokens to pass.
	first := remote.NewMutex(name)
	if err := first.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	holder := c.NewMutex(name)
	holderGot := lockAsync(ctx, holder)
	awaitWaiters(t, ctx, c, name, 1)
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := awaitLock(t, holderGot, "holder"); err != nil {
		t.Fatal(err)
	}

	r := remote.NewMutex(name)
	rGot := lockAsync(ctx, r)
	awaitWaiters(t, ctx, c, name, 1)
	local := c.NewMutex(name)
	localGot := lockAsync(ctx, local)
	awaitWaiters(t, ctx, c, name, 2)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := awaitLock(t, rGot, "the other process's waiter"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-localGot:
		t.Fatalf("the local waiter got the lock (%v) while the other process's waiter, ahead of it, holds it", err)
	default:
	}
	if r.Token() <= holder.Token() {
		t.Errorf("token %d after %d", r.Token(), holder.Token())
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := awaitLock(t, localGot, "the local waiter"); err != nil {
		t.Fatal(err)
	}
	if local.Token() <= r.Token() {
		t.Errorf("token %d after %d", local.Token(), r.Token())
	}
	if err := local.Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// TestAPassOfALostLockIsLost: the holder's keys are deleted behind its
// back (the lock and its queue) while a local waiter waits. The release
// passes the lock, but the transfer finds it gone: the release reports
// ErrLost, the passed hold is not in Redis, another owner takes the lock
// with a higher token, and the passed hold's Unlock reports ErrLost
// without touching the new owner's lock.
func TestAPassOfALostLockIsLost(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	srv := standalone.Get(t)
	url := standaloneURL(t)
	name := "pass/" + t.Name()
	c := openClient(t, url, locker.WithTTL(time.Minute))
	other := openClient(t, url, locker.WithTTL(time.Minute))
	first := other.NewMutex(name)
	if err := first.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	holder := c.NewMutex(name)
	holderGot := lockAsync(ctx, holder)
	awaitWaiters(t, ctx, c, name, 1)
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := awaitLock(t, holderGot, "holder"); err != nil {
		t.Fatal(err)
	}
	held := holder.Token()
	waiter := c.NewMutex(name)
	waiterGot := lockAsync(ctx, waiter)
	awaitWaiters(t, ctx, c, name, 1)

	key := c.Driver().(*redislock.Driver).Key(name)
	for _, k := range []string{key, key + ":queue", key + ":waiters"} {
		if err := del(ctx, srv, k); err != nil {
			t.Fatalf("DEL %s: %v", k, err)
		}
	}
	if err := holder.Unlock(ctx); !errors.Is(err, locker.ErrLost) {
		t.Errorf("the holder's Unlock after its key was deleted = %v, want ErrLost", err)
	}
	if err := awaitLock(t, waiterGot, "waiter"); err != nil {
		t.Fatal(err)
	}
	if waiter.Token() != held+1 {
		t.Errorf("the waiter's token %d after %d: not passed", waiter.Token(), held)
	}
	next := other.NewMutex(name)
	if ok, err := next.TryLock(ctx); !ok || err != nil {
		t.Fatalf("TryLock while only the failed pass holds it = %v, %v", ok, err)
	}
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

// TestPassesRaceCancelledWaiters: 8 handles of one Driver take turns, some
// Locks with deadlines that end while the lock may be passed to them. No
// two hold at once, and at the end the lock is free at once, not after a
// lease: a waiter that gave up as it was passed the lock passed it on.
func TestPassesRaceCancelledWaiters(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 2*time.Minute)
	url := standaloneURL(t)
	name := "pass/" + t.Name()
	c := openClient(t, url, locker.WithTTL(time.Minute))
	other := openClient(t, url, locker.WithTTL(time.Minute))
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
	next := other.NewMutex(name)
	eventually(t, 5*time.Second, "the lock is free", func() bool {
		ok, err := next.TryLock(ctx)
		return ok && err == nil
	})
	if err := next.Unlock(ctx); err != nil {
		t.Error(err)
	}
}
