package locker_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/locallock"
)

func byAccount(r *http.Request) (string, error) {
	a := r.URL.Query().Get("account")
	if a == "" {
		return "", errors.New("no account in " + r.URL.RawQuery)
	}
	return "account/" + a, nil
}

func TestMiddleware(t *testing.T) {
	c, err := locker.New(locallock.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	t.Run("serialises_requests_with_the_same_key", func(t *testing.T) {
		var inside, overlap atomic.Int32
		h := locker.Middleware(c, byAccount)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if inside.Add(1) > 1 {
				overlap.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
			inside.Add(-1)
		}))
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("POST", "/?account=7", nil))
				if rec.Code != http.StatusOK {
					t.Errorf("status %d", rec.Code)
				}
			}()
		}
		wg.Wait()
		if n := overlap.Load(); n != 0 {
			t.Errorf("%d requests with the same key overlapped", n)
		}
	})

	t.Run("runs_different_keys_in_parallel", func(t *testing.T) {
		release := make(chan struct{})
		entered := make(chan string, 2)
		h := locker.Middleware(c, byAccount)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered <- r.URL.Query().Get("account")
			<-release
		}))
		var wg sync.WaitGroup
		for _, a := range []string{"1", "2"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/?account="+a, nil))
			}()
		}
		for range 2 {
			select {
			case <-entered:
			case <-time.After(5 * time.Second):
				t.Fatal("two different keys did not run at the same time")
			}
		}
		close(release)
		wg.Wait()
	})

	t.Run("answers_400_without_echoing_a_bad_key", func(t *testing.T) {
		h := locker.Middleware(c, byAccount)(http.NotFoundHandler())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/?secret=hunter2", nil))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("status %d, want 400", rec.Code)
		}
		if body := rec.Body.String(); strings.Contains(body, "hunter2") {
			t.Errorf("the response echoes request data: %q", body)
		}
	})

	t.Run("answers_423_when_busy_under_fail_fast_and_204_under_skip", func(t *testing.T) {
		holder := c.NewMutex("account/9")
		if err := holder.Lock(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer holder.Unlock(context.Background())
		called := false
		next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })
		for _, tc := range []struct {
			opt  locker.DoOption
			want int
		}{
			{locker.OnBusy(locker.FailFast), http.StatusLocked},
			{locker.WaitAtMost(20 * time.Millisecond), http.StatusLocked},
			{locker.OnBusy(locker.Skip), http.StatusNoContent},
		} {
			rec := httptest.NewRecorder()
			locker.Middleware(c, byAccount, locker.HTTPDoOptions(tc.opt))(next).ServeHTTP(rec, httptest.NewRequest("POST", "/?account=9", nil))
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d", rec.Code, tc.want)
			}
		}
		if called {
			t.Error("the handler ran while the lock was held elsewhere")
		}
	})
}
