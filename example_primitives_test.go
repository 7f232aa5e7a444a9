package locker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/golocker/locker"
	"github.com/golocker/locker/locallock"
)

// A Semaphore lets at most its limit of permits be held at once, across
// every process that uses the name: here, at most 2 jobs call a fragile
// downstream together. Each grant is a hold with its own lease, token and
// loss.
func ExampleSemaphore() {
	ctx := context.Background()
	c, _ := locker.New(locallock.New(nil))
	defer c.Close()

	calls := c.NewSemaphore("downstream/billing", 2)
	a, _ := calls.Acquire(ctx, 1)
	b, _ := calls.Acquire(ctx, 1)
	none, _ := calls.TryAcquire(ctx, 1) // the limit is reached
	fmt.Println(a.Count()+b.Count(), "held; a third:", none != nil)

	// Another Client that thinks the limit is 5 is refused, never admitted.
	_, err := c.NewSemaphore("downstream/billing", 5).TryAcquire(ctx, 1)
	fmt.Println(errors.Is(err, locker.ErrLimitConflict))

	_ = a.Release(ctx)
	err = calls.Do(ctx, 1, func(ctx context.Context) error {
		h, _ := locker.HoldFromContext(ctx)
		fmt.Println("calling with token", h.Token())
		return nil
	})
	fmt.Println("err:", err)
	_ = b.Release(ctx)
	// Output:
	// 2 held; a third: false
	// true
	// calling with token 3
	// err: <nil>
}

// Readers share an RWMutex, a writer excludes everyone, and a writer that
// waits keeps later readers out. A writer can downgrade to a reader at
// once; a reader that asks to write is refused instead of waiting for
// itself.
func ExampleRWMutex() {
	ctx := context.Background()
	c, _ := locker.New(locallock.New(nil))
	defer c.Close()

	config := c.NewRWMutex("config/routes")
	_ = config.RLock(ctx)
	ok, _ := config.TryRLock(ctx) // readers share
	fmt.Println("second reader:", ok)
	ok, _ = config.TryLock(ctx) // a writer waits for them
	fmt.Println("writer beside readers:", ok)
	_ = config.RUnlock(ctx)
	_ = config.RUnlock(ctx)

	w := locker.WithOwner(ctx)
	_ = config.Lock(w)
	_ = config.Downgrade(w) // now a reader, with the same token
	ok, _ = config.TryRLock(ctx)
	fmt.Println("reader after the downgrade:", ok)
	_ = config.RUnlock(ctx)
	fmt.Println(errors.Is(config.Lock(w), locker.ErrUpgrade))
	_ = config.RUnlock(w)
	// Output:
	// second reader: true
	// writer beside readers: false
	// reader after the downgrade: true
	// true
}

// LockAll takes several locks as one, all or nothing, in one order
// whatever order they are given in, so two transfers between the same
// accounts never deadlock.
func ExampleClient_LockAll() {
	ctx := context.Background()
	c, _ := locker.New(locallock.New(nil))
	defer c.Close()

	var wg sync.WaitGroup
	for _, accounts := range [][]string{{"accounts/1", "accounts/2"}, {"accounts/2", "accounts/1"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			set, err := c.LockAll(ctx, accounts...)
			if err != nil {
				return
			}
			defer set.Unlock(ctx)
			// Both accounts are held; set.Lost() closes if either is lost.
		}()
	}
	wg.Wait()

	set := c.NewMultiLock([]string{"accounts/2", "accounts/1", "accounts/3"})
	fmt.Println(set.Names())
	held := c.NewMutex("accounts/3")
	_ = held.Lock(ctx)
	ok, _ := set.TryLock(ctx) // accounts/3 is held: nothing is taken
	free, _ := c.NewMutex("accounts/1").TryLock(ctx)
	fmt.Println(ok, free)
	_ = held.Unlock(ctx)
	// Output:
	// [accounts/1 accounts/2 accounts/3]
	// false true
}

// An Election has one leader at a time. A term's context ends when the
// term is lost or resigned, its token outranks every earlier term's, and
// anyone can read or follow the leader.
func ExampleElection() {
	ctx := context.Background()
	c, _ := locker.New(locallock.New(nil))
	defer c.Close()

	e := c.NewElection("scheduler")
	views, _ := e.Observe(ctx)
	fmt.Println("leading:", (<-views).Leading())

	term, _ := e.Campaign(ctx, "replica-1")
	fmt.Println("leader:", (<-views).Value)
	rival, _ := e.TryCampaign(ctx, "replica-2")
	fmt.Println("a second leader:", rival != nil)

	_ = term.Resign(ctx)
	<-term.Context().Done() // the leader's work stops here
	fmt.Println("after resigning:", (<-views).Leading())

	// Run campaigns, runs the work while it leads, and campaigns again
	// after a lost term; it returns when its ctx ends.
	rctx, cancel := context.WithCancel(ctx)
	err := e.Run(rctx, "replica-2", func(ctx context.Context) error {
		h, _ := locker.HoldFromContext(ctx)
		fmt.Println("replica-2 leads with token", h.Token())
		cancel()
		<-ctx.Done()
		return nil
	})
	fmt.Println(errors.Is(err, context.Canceled))
	// Output:
	// leading: false
	// leader: replica-1
	// a second leader: false
	// after resigning: false
	// replica-2 leads with token 2
	// true
}
