package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/golocker/locker"
)

// TestMetricNames reports one hold's events to the observer and checks
// the names Prometheus sees, which docs/operating.md's queries use.
func TestMetricNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	obs, err := newObserver(mp)
	if err != nil {
		t.Fatal(err)
	}
	ctx := obs.AcquireStarted(context.Background(), locker.AcquireStart{Name: "orders/42", Op: "lock"})
	obs.AcquireEnded(ctx, locker.AcquireEnd{Name: "orders/42", Op: "lock", Outcome: locker.OutcomeAcquired, Wait: 3 * time.Millisecond, Token: 9})
	obs.Renewed(locker.Renewal{Name: "orders/42", Token: 9, Latency: time.Millisecond})
	obs.HoldEnded(ctx, locker.HoldEnd{Name: "orders/42", Token: 9, Held: time.Second, Reason: locker.LostRenewalFailed, Cause: locker.ErrLost})

	w := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(w.Body)
	text := string(body)
	for _, want := range []string{
		`golocker_lock_acquire_duration_seconds_bucket{golocker_lock_name="orders",golocker_lock_operation="lock",golocker_lock_outcome="acquired"`,
		`golocker_lock_acquire_duration_seconds_count{golocker_lock_name="orders",golocker_lock_operation="lock",golocker_lock_outcome="acquired"`,
		`golocker_lock_hold_duration_seconds_sum{golocker_lock_name="orders",golocker_lock_reason="renewal_failed"`,
		`golocker_lock_holds_active{golocker_lock_name="orders"`,
		`golocker_lock_waiters{golocker_lock_name="orders"`,
		`golocker_lock_renewals_total{golocker_lock_name="orders",golocker_renewal_outcome="ok"`,
		`golocker_lock_renewal_duration_seconds_count{golocker_lock_name="orders",golocker_renewal_outcome="ok"`,
		`golocker_lock_lost_total{golocker_lock_name="orders",golocker_lock_reason="renewal_failed"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
}

// TestTheProgramServesMetrics builds the program and runs it as the
// package doc says, with its default flags (but a free port): outside a
// test binary, where package locker refuses what it allows in tests. It
// must serve the Client's metrics and end cleanly on SIGINT.
func TestTheProgramServesMetrics(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building the program needs the go command: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "prometheus")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		// The packages this test was built from are compiled already.
		args = append(args, "-race")
	}
	if out, err := exec.CommandContext(ctx, goCmd, append(args, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	cmd := exec.CommandContext(ctx, bin, "-addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var logged strings.Builder // what the program printed, for failures
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logged.WriteString(sc.Text() + "\n")
			if _, url, ok := strings.Cut(sc.Text(), "serving metrics on "); ok {
				addr <- url
			}
		}
		close(addr)
		exited <- cmd.Wait()
	}()
	waited := false
	defer func() {
		if !waited {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	url, ok := <-addr
	if !ok {
		err := <-exited
		waited = true
		t.Fatalf("the program ended (%v) before serving metrics:\n%s", err, logged.String())
	}
	// The workers' first holds reach the exporter at the next scrape:
	// poll until they do.
	want := []string{"golocker_lock_acquire_duration_seconds_count{", "golocker_lock_hold_duration_seconds_count{", "golocker_lock_holds_active{"}
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; {
		body = get(ctx, t, url)
		if containsAll(body, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !containsAll(body, want) {
		t.Fatalf("%s serves no golocker metrics within 30 s (want %q); it served:\n%s", url, want, body)
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		waited = true
		if err != nil {
			t.Errorf("after SIGINT the program ended with %v, want status 0:\n%s", err, logged.String())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the program did not end within 30 s of SIGINT")
	}
}

func get(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(b)
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
