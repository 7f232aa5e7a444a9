package locallock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/locallock"
)

// Open a Client by URL, take a lock and give it back. Any driver works the
// same way; only the URL changes.
func Example() {
	ctx := context.Background()
	c, err := locker.Open(ctx, "mem://") // the driver's package is imported
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	m := c.NewMutex("orders/42", locker.WithTTL(10*time.Second))
	if err := m.Lock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held, with a fencing token:", m.Token() > 0)
	if err := m.Unlock(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println("after Unlock, token:", m.Token())
	// Output:
	// held, with a fencing token: true
	// after Unlock, token: 0
}

// Do holds the lock while fn runs and releases it afterwards, also when fn
// fails or panics. fn's ctx ends if the hold is lost.
func Example_do() {
	ctx := context.Background()
	c, _ := locker.New(locallock.New(nil))
	defer c.Close()

	m := c.NewMutex("nightly-report")
	err := locker.Do(ctx, m, func(ctx context.Context) error {
		fmt.Println("generating the report with token", m.Token())
		return nil
	})
	fmt.Println("err:", err, "still held:", m.HoldCount() > 0)
	// Output:
	// generating the report with token 1
	// err: <nil> still held: false
}

// Reentrancy follows the owner in the ctx: each Lock must be matched by an
// Unlock with the same owner.
func Example_reentrancy() {
	ctx := locker.WithOwner(context.Background())
	c, _ := locker.New(locallock.New(nil))
	defer c.Close()

	m := c.NewMutex("accounts/7")
	_ = m.Lock(ctx)
	_ = m.Lock(ctx) // the same owner: re-entered at once
	fmt.Println(m.HoldCount())
	_ = m.Unlock(ctx)
	fmt.Println(m.HoldCount())
	_ = m.Unlock(ctx)
	fmt.Println(m.HoldCount())
	fmt.Println(errors.Is(m.Unlock(ctx), locker.ErrNotHeld))
	// Output:
	// 2
	// 1
	// 0
	// true
}

// TryLock never waits for another owner. Two Clients on one Store behave
// as two processes on one server.
func Example_tryLock() {
	ctx := context.Background()
	store := locallock.NewStore()
	a, _ := locker.New(locallock.New(store))
	defer a.Close()
	b, _ := locker.New(locallock.New(store))
	defer b.Close()

	ma, mb := a.NewMutex("shards/rebalance"), b.NewMutex("shards/rebalance")
	_ = ma.Lock(ctx)
	ok, err := mb.TryLock(ctx)
	fmt.Println("b while a holds:", ok, err)
	_ = ma.Unlock(ctx)
	ok, err = mb.TryLock(ctx)
	fmt.Println("b after a unlocked:", ok, err)
	_ = mb.Unlock(ctx)
	// Output:
	// b while a holds: false <nil>
	// b after a unlocked: true <nil>
}

// storage refuses writes whose fencing token is older than one it has seen.
type storage struct{ highest uint64 }

func (s *storage) write(token uint64, v string) error {
	if token < s.highest {
		return fmt.Errorf("refused %q: token %d is stale (seen %d)", v, token, s.highest)
	}
	s.highest = token
	return nil
}

// Fencing tokens make a lock safe against an owner that was paused past its
// lease: the resource refuses its late write.
func Example_fencing() {
	ctx := context.Background()
	store := locallock.NewStore()
	a, _ := locker.New(locallock.New(store), locker.WithTTL(50*time.Millisecond), locker.WithFixedLease())
	defer a.Close()
	b, _ := locker.New(locallock.New(store))
	defer b.Close()
	var db storage

	ma := a.NewMutex("inventory")
	_ = ma.Lock(ctx)
	tokenA := ma.Token()
	<-ma.Lost() // a is paused past its lease...

	mb := b.NewMutex("inventory")
	_ = mb.Lock(ctx) // ...and b gets the lock
	fmt.Println("tokens increase:", mb.Token() > tokenA)
	fmt.Println(db.write(mb.Token(), "b"))
	fmt.Println(db.write(tokenA, "a, late")) // a wakes up and writes
	_ = mb.Unlock(ctx)
	// Output:
	// tokens increase: true
	// <nil>
	// refused "a, late": token 1 is stale (seen 2)
}

// Lost closes when the hold ends against the owner's will: here an admin
// force-releases it.
func Example_lost() {
	ctx := context.Background()
	c, _ := locker.New(locallock.New(nil))
	defer c.Close()

	m := c.NewMutex("migrations")
	_ = m.Lock(ctx)
	_ = c.ForceRelease(ctx, "migrations")
	select {
	case <-m.Lost():
		fmt.Println("lost")
	case <-time.After(5 * time.Second):
		fmt.Println("still held")
	}
	fmt.Println(errors.Is(m.Unlock(ctx), locker.ErrLost))
	// Output:
	// lost
	// true
}
