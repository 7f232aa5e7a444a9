package lockadmin

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/locallock"
)

func names(hs []holdRow) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Name
	}
	return out
}

func TestHolds(t *testing.T) {
	c := newClient(t)
	ms := map[string]uint64{}
	for _, n := range []string{"jobs/report", "jobs/backup", "orders/42", "jobs/backup-old"} {
		ms[n] = hold(t, c, n).Token()
	}
	h := newHandler(t, c)

	t.Run("lists_every_hold_sorted_by_name_with_owner_token_and_lease", func(t *testing.T) {
		w := serve(h, localReq("GET", "/api/holds", nil))
		if w.Code != http.StatusOK {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		ans := decode[holdsAnswer](t, w)
		want := []string{"jobs/backup", "jobs/backup-old", "jobs/report", "orders/42"}
		if got := names(ans.Holds); !slices.Equal(got, want) {
			t.Fatalf("names %v, want %v", got, want)
		}
		host, _ := os.Hostname()
		if len(host) > 24 {
			host = host[:24]
		}
		for _, r := range ans.Holds {
			if r.Token != ms[r.Name] || r.Token == 0 {
				t.Errorf("%s: token %d, want %d", r.Name, r.Token, ms[r.Name])
			}
			if r.Host != host || r.PID != strconv.Itoa(os.Getpid()) {
				t.Errorf("%s: host %q pid %q from owner %q, want %q and %d", r.Name, r.Host, r.PID, r.Owner, host, os.Getpid())
			}
			if r.ExpiresInMS == nil || *r.ExpiresInMS <= 0 || *r.ExpiresInMS > time.Minute.Milliseconds() {
				t.Errorf("%s: expires_in_ms %v, want within the 1m lease", r.Name, r.ExpiresInMS)
			}
			if r.Waiters == nil || *r.Waiters != 0 {
				t.Errorf("%s: waiters %v, want 0 (the in-process driver counts them)", r.Name, r.Waiters)
			}
		}
		if !ans.WaitersCounted || ans.Total != 4 || ans.Truncated || ans.CSRFToken == "" {
			t.Errorf("answer %+v: want waiters counted, 4 in total, not truncated, a CSRF token", ans)
		}
	})

	t.Run("filters_by_prefix_and_substring", func(t *testing.T) {
		for _, tt := range []struct {
			query string
			want  []string
		}{
			{"?prefix=jobs/", []string{"jobs/backup", "jobs/backup-old", "jobs/report"}},
			{"?prefix=jobs/&q=backup", []string{"jobs/backup", "jobs/backup-old"}},
			{"?q=42", []string{"orders/42"}},
			{"?q=old", []string{"jobs/backup-old"}},
			{"?prefix=nothing/", nil},
		} {
			ans := decode[holdsAnswer](t, serve(h, localReq("GET", "/api/holds"+tt.query, nil)))
			if got := names(ans.Holds); !slices.Equal(got, tt.want) {
				t.Errorf("%s: %v, want %v", tt.query, got, tt.want)
			}
		}
	})

	t.Run("the_handler_prefix_bounds_every_listing", func(t *testing.T) {
		hp := newHandler(t, c, WithPrefix("jobs/"))
		for _, tt := range []struct {
			query string
			want  []string
		}{
			{"", []string{"jobs/backup", "jobs/backup-old", "jobs/report"}},
			{"?prefix=jobs/r", []string{"jobs/report"}},
			{"?prefix=j", []string{"jobs/backup", "jobs/backup-old", "jobs/report"}},
			{"?prefix=orders/", nil},
		} {
			ans := decode[holdsAnswer](t, serve(hp, localReq("GET", "/api/holds"+tt.query, nil)))
			if got := names(ans.Holds); !slices.Equal(got, tt.want) {
				t.Errorf("%q: %v, want %v", tt.query, got, tt.want)
			}
		}
	})
}

func TestHoldsCountsWaiters(t *testing.T) {
	// The waiter is of another Client, as another process's would be: a
	// waiter of the holder's own Client waits in that Client, not in the
	// store (docs/decisions.md, D8), and the store counts its waiters.
	store := locallock.NewStore()
	c := newClientOn(t, store)
	m := hold(t, c, "busy")
	h := newHandler(t, c)

	waiter := newClientOn(t, store).NewMutex("busy")
	done := make(chan error, 1)
	go func() {
		err := waiter.Lock(context.Background())
		if err == nil {
			err = waiter.Unlock(context.Background())
		}
		done <- err
	}()
	qi := c.Driver().(backend.QueueInspector)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n, _ := qi.Waiters(context.Background(), "busy"); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter did not start waiting within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	ans := decode[holdsAnswer](t, serve(h, localReq("GET", "/api/holds", nil)))
	if len(ans.Holds) != 1 || ans.Holds[0].Waiters == nil || *ans.Holds[0].Waiters != 1 {
		t.Errorf("holds %+v, want busy with 1 waiter", ans.Holds)
	}
	if err := m.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
}

func TestParseOwner(t *testing.T) {
	for _, tt := range []struct{ owner, host, pid string }{
		{"web-1/4242/a1b2c3d4e5f6/7", "web-1", "4242"},
		{"web-1/x/a1b2/7", "", ""},
		{"someone-else", "", ""},
		{"/4242/a/1", "", ""},
		{"h/1/2/3/4", "", ""},
	} {
		host, pid := parseOwner(tt.owner)
		if host != tt.host || pid != tt.pid {
			t.Errorf("parseOwner(%q) = %q, %q; want %q, %q", tt.owner, host, pid, tt.host, tt.pid)
		}
	}
}
