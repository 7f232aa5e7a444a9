package lockadmin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/golocker/locker"
	_ "github.com/golocker/locker/locallock"
	"github.com/golocker/locker/lockadmin"
)

// Mount the admin page under /locks/ in a service, with live charts and an
// audit log. Without an authentication option it would answer only
// loopback clients.
func Example() {
	ctx := context.Background()
	rec := lockadmin.NewRecorder()
	c, err := locker.Open(ctx, "mem://", locker.WithObserver(rec))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	h, err := lockadmin.New(c,
		lockadmin.WithBearerToken("a-long-random-token-from-a-secret-store"),
		lockadmin.WithAuditLog(slog.New(slog.NewJSONHandler(os.Stderr, nil))),
		lockadmin.WithRecorder(rec),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/locks/", http.StripPrefix("/locks", h))

	m := c.NewMutex("jobs/nightly")
	if err := m.Lock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer m.Unlock(ctx)

	// What the page polls: the holds, as JSON.
	r := httptest.NewRequest("GET", "/locks/api/holds?prefix=jobs/", nil)
	r.Header.Set("Authorization", "Bearer a-long-random-token-from-a-secret-store")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	var ans struct {
		Holds []struct{ Name string }
	}
	_ = json.NewDecoder(w.Body).Decode(&ans)
	fmt.Println(w.Code, ans.Holds)
	// Output: 200 [{jobs/nightly}]
}
