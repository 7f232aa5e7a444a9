// Command prometheus serves a golocker Client's metrics to Prometheus
// through OpenTelemetry: otellocker's observer, the SDK's MeterProvider and
// the OpenTelemetry Prometheus exporter. A few workers take locks on the
// in-process driver (or on -url) so that there is something to see:
//
//	go run . -addr 127.0.0.1:9464
//	curl -s 127.0.0.1:9464/metrics | grep golocker
//
// The default -url is the in-process driver, which a program must declare
// to be one process (?single_process=true): package locker refuses it
// otherwise, since replicas configured with it would not exclude each
// other. It is a module of its own so that the exporter stays out of
// otellocker's dependencies.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/golocker/locker"
	_ "github.com/golocker/locker/locallock"
	"github.com/golocker/locker/otellocker"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9464", "address of the /metrics endpoint")
	url := flag.String("url", "mem://?single_process=true", "backend URL (this program imports only the in-process driver)")
	workers := flag.Int("workers", 4, "goroutines taking locks")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *url, *workers); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, addr, url string, workers int) error {
	exporter, err := prometheus.New()
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())

	obs, err := newObserver(mp)
	if err != nil {
		return err
	}
	c, err := locker.Open(ctx, url, locker.WithObserver(obs), locker.WithTTL(2*time.Second))
	if err != nil {
		return err
	}
	defer c.Close()

	for i := range workers {
		go work(ctx, c, i)
	}

	// Listening before serving makes the log line name the real address,
	// also for -addr 127.0.0.1:0.
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Printf("serving metrics on http://%s/metrics", l.Addr())
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newObserver returns the observer that records into mp. It labels each
// lock by its kind, "orders" for "orders/42": lock names themselves would
// make a time series each.
func newObserver(mp *sdkmetric.MeterProvider) (locker.Observer, error) {
	return otellocker.NewObserver(
		otellocker.WithMeterProvider(mp),
		otellocker.WithNameLabel(func(name string) string {
			kind, _, _ := strings.Cut(name, "/")
			return kind
		}),
	)
}

// work takes one of a few locks again and again, holding each briefly.
func work(ctx context.Context, c *locker.Client, id int) {
	names := []string{"orders/1", "orders/2", "jobs/nightly"}
	for ctx.Err() == nil {
		m := c.NewMutex(names[rand.IntN(len(names))])
		if ok, err := m.LockTimeout(ctx, 50*time.Millisecond); err != nil || !ok {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(1+rand.IntN(20)) * time.Millisecond):
		}
		if err := m.Unlock(context.WithoutCancel(ctx)); err != nil {
			log.Printf("worker %d: %v", id, err)
		}
	}
}
