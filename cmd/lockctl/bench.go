package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/golocker/locker"
)

func cmdBench(ctx context.Context, g globals, args []string, e env) error {
	fs := newFlags("bench", &g)
	workers := fs.Int("workers", 8, "contending handles, each on its own connection")
	duration := durationValue{d: 5 * time.Second}
	hold := durationValue{d: time.Millisecond}
	think := durationValue{d: time.Millisecond}
	fs.Var(&duration, "duration", "how long to run")
	fs.Var(&hold, "hold", "how long each acquisition holds the lock")
	fs.Var(&think, "think", "pause between a release and the next Lock")
	name := fs.String("name", "lockctl-bench", "lock name")
	if err := parseNoArgs(fs, args, ""); err != nil {
		return err
	}
	switch {
	case *workers < 1 || *workers > 1024:
		return usage("bench: --workers must be between 1 and 1024")
	case duration.d <= 0 || duration.d > time.Hour:
		return usage("bench: --duration must be between 0 and 1h")
	}
	clients := make([]*locker.Client, *workers)
	var u string
	for i := range clients {
		c, redacted, err := open(ctx, g, e)
		if err != nil {
			return err
		}
		defer c.Close()
		clients[i], u = c, redacted
	}
	fmt.Fprintf(e.stdout, "backend %s: %d workers, hold %v, think %v, for %v\n", u, *workers, hold.d, think.d, duration.d)
	res, err := contend(ctx, clients, *name, duration.d, hold.d, think.d)
	if err != nil {
		return fail(exitBackend, "bench: %v", err)
	}
	res.print(e, hold.d)
	return nil
}

// benchResult is what contend measured.
type benchResult struct {
	elapsed time.Duration
	counts  []int           // acquisitions per worker
	waits   []time.Duration // every Lock's wait
}

// contend runs one worker per client on the lock name until d has passed.
func contend(ctx context.Context, clients []*locker.Client, name string, d, hold, think time.Duration) (*benchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	end := time.Now().Add(d)
	res := &benchResult{counts: make([]int, len(clients))}
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range clients {
		wg.Go(func() {
			m := c.NewMutex(name)
			var waits []time.Duration
			for time.Now().Before(end) {
				t0 := time.Now()
				if err := m.Lock(ctx); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					break
				}
				waits = append(waits, time.Since(t0))
				time.Sleep(hold)
				if err := m.Unlock(ctx); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					break
				}
				res.counts[i]++
				time.Sleep(think)
			}
			mu.Lock()
			res.waits = append(res.waits, waits...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res, firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func (r *benchResult) total() int {
	n := 0
	for _, c := range r.counts {
		n += c
	}
	return n
}

func (r *benchResult) print(e env, hold time.Duration) {
	total := r.total()
	rate := float64(total) / r.elapsed.Seconds()
	ideal := float64(time.Second) / float64(hold)
	slices.Sort(r.waits)
	fmt.Fprintf(e.stdout, "acquisitions   %d in %v\n", total, r.elapsed.Round(time.Millisecond))
	fmt.Fprintf(e.stdout, "throughput     %.0f/s (%.2f of the ideal %.0f/s = 1/hold)\n", rate, rate/ideal, ideal)
	fmt.Fprintf(e.stdout, "wait p50       %v\n", percentile(r.waits, 0.50))
	fmt.Fprintf(e.stdout, "wait p99       %v\n", percentile(r.waits, 0.99))
	if len(r.waits) > 0 {
		fmt.Fprintf(e.stdout, "wait max       %v\n", r.waits[len(r.waits)-1].Round(time.Microsecond))
	}
	fmt.Fprintf(e.stdout, "fairness       %.3f (Jain's index over workers; 1 = equal shares)\n", jain(r.counts))
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i].Round(time.Microsecond)
}

// jain is Jain's fairness index: (Σx)² / (n·Σx²), 1 when all are equal.
func jain(xs []int) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}
