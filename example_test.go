package locker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/golocker/locker"
	"github.com/golocker/locker/locallock" // mem://, the in-process driver
)

// Do holds the lock while fn runs and releases it afterwards, also when fn
// fails or panics. fn's ctx carries the hold, and ends if the hold is lost.
func ExampleDo() {
	ctx := context.Background()
	c, _ := locker.Open(ctx, "mem://")
	defer c.Close()

	m := c.NewMutex("reports/daily")
	err := locker.Do(ctx, m, func(ctx context.Context) error {
		h, _ := locker.HoldFromContext(ctx)
		fmt.Println("generating", h.Name(), "with token", h.Token())
		return nil
	})
	fmt.Println("err:", err, "held after:", m.HoldCount() > 0)
	// Output:
	// generating reports/daily with token 1
	// err: <nil> held after: false
}

// A *Mutex shared by goroutines excludes them, as a sync.Mutex does: one
// package-level handle is enough.
func ExampleMutex_shared() {
	ctx := context.Background()
	c, _ := locker.New(locallock.New(nil))
	defer c.Close()

	mu := c.NewMutex("inventory") // shared, like a sync.Mutex
	done := make(chan bool)
	total := 0
	for range 4 {
		go func() {
			if err := mu.Lock(ctx); err == nil {
				total++ // one goroutine at a time
				_ = mu.Unlock(ctx)
			}
			done <- true
		}()
	}
	for range 4 {
		<-done
	}
	fmt.Println(total)
	// Output:
	// 4
}

// Reentrancy follows the owner in the ctx. Code that locks, then locks
// again further down the same call chain, puts an owner in its ctx.
func ExampleWithOwner() {
	c, _ := locker.New(locallock.New(nil))
	defer c.Close()
	m := c.NewMutex("accounts/7")

	ctx := locker.WithOwner(context.Background())
	_ = m.Lock(ctx)
	_ = m.Lock(ctx) // the same owner: re-entered at once, same token
	fmt.Println(m.HoldCount())
	fmt.Println(errors.Is(m.Unlock(context.Background()), locker.ErrNotHeld)) // not the owner
	_ = m.Unlock(ctx)
	_ = m.Unlock(ctx)
	fmt.Println(m.HoldCount())
	// Output:
	// 2
	// true
	// 0
}

// The Middleware holds a lock per key while the handler runs; the handler
// finds the fencing token to send with its writes in its request's ctx.
func ExampleMiddleware() {
	c, _ := locker.New(locallock.New(nil))
	defer c.Close()

	byAccount := func(r *http.Request) (string, error) {
		id := r.PathValue("account")
		if id == "" {
			return "", errors.New("no account")
		}
		return "account/" + id, nil
	}
	transfer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, _ := locker.HoldFromContext(r.Context())
		fmt.Fprintf(w, "%s, token %d", h.Name(), h.Token())
	})
	mux := http.NewServeMux()
	mux.Handle("POST /accounts/{account}/transfer", locker.Middleware(c, byAccount)(transfer))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", "/accounts/7/transfer", nil))
	body, _ := io.ReadAll(rec.Body)
	fmt.Println(string(body))
	// Output:
	// account/7, token 1
}

// A name template turns a value into a lock name, and runs fn under it.
func ExampleNameTemplate_Do() {
	ctx := context.Background()
	c, _ := locker.New(locallock.New(nil))
	defer c.Close()

	type order struct {
		ID       int
		Customer string
	}
	orders := locker.MustParseName("customer/{{.Customer}}/order/{{.ID}}")
	err := orders.Do(ctx, c, order{ID: 42, Customer: "ada"}, func(ctx context.Context) error {
		h, _ := locker.HoldFromContext(ctx)
		fmt.Println("holding", h.Name())
		return nil
	})
	fmt.Println(err)
	// An empty field would give a name every such order shares: refused.
	err = orders.Do(ctx, c, order{ID: 43}, func(context.Context) error { return nil })
	fmt.Println(errors.Is(err, locker.ErrInvalidName))
	// Output:
	// holding customer/ada/order/42
	// <nil>
	// true
}

// WithLostHook hears of every hold that is lost, for a log line or an
// alert.
func ExampleWithLostHook() {
	ctx := context.Background()
	store := locallock.NewStore()
	lost := make(chan locker.HoldEnd, 1)
	c, _ := locker.New(locallock.New(store), locker.WithLostHook(func(e locker.HoldEnd) { lost <- e }))
	defer c.Close()

	m := c.NewMutex("jobs/nightly")
	_ = m.Lock(ctx)
	_ = locallock.New(store).ForceRelease(ctx, "jobs/nightly") // an admin frees it
	e := <-lost
	fmt.Println(e.Name, e.Reason, errors.Is(e.Cause, locker.ErrLost))
	_ = m.Unlock(ctx)
	// Output:
	// jobs/nightly store true
}
