package lockadmin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
)

// clock is a settable time for a Recorder under test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(sec int64) {
	c.mu.Lock()
	c.t = time.Unix(sec, 500e6)
	c.mu.Unlock()
}

func newTestRecorder(sec int64) (*Recorder, *clock) {
	clk := &clock{}
	clk.set(sec)
	return newRecorder(clk.now), clk
}

// acquire reports one acquisition from start to end.
func acquire(r *Recorder, name string, o locker.Outcome, wait time.Duration) {
	ctx := r.AcquireStarted(context.Background(), locker.AcquireStart{Name: name, Op: "lock"})
	r.AcquireEnded(ctx, locker.AcquireEnd{Name: name, Op: "lock", Outcome: o, Wait: wait, Token: 1})
}

func near(got Millis, want, tolerance float64) bool {
	return !math.IsNaN(float64(got)) && math.Abs(float64(got)-want) <= want*tolerance
}

func TestRecorder(t *testing.T) {
	r, clk := newTestRecorder(1000)
	bg := context.Background()

	// Second 1000: three waiters at once; two get the lock, one is busy; a
	// re-entry; a LockTimeout that times out.
	var ctxs []context.Context
	for range 3 {
		ctxs = append(ctxs, r.AcquireStarted(bg, locker.AcquireStart{Name: "a", Op: "lock"}))
	}
	r.AcquireEnded(ctxs[0], locker.AcquireEnd{Name: "a", Outcome: locker.OutcomeAcquired, Wait: time.Millisecond})
	r.AcquireEnded(ctxs[1], locker.AcquireEnd{Name: "a", Outcome: locker.OutcomeBusy, Wait: 50 * time.Microsecond})
	r.AcquireEnded(ctxs[2], locker.AcquireEnd{Name: "b", Outcome: locker.OutcomeAcquired, Wait: 3 * time.Millisecond})
	rctx := r.AcquireStarted(bg, locker.AcquireStart{Name: "a", Op: "lock", Reentry: true})
	r.AcquireEnded(rctx, locker.AcquireEnd{Name: "a", Reentry: true, Outcome: locker.OutcomeAcquired})
	acquire(r, "c", locker.OutcomeTimedOut, time.Second)
	// Second 1001: nothing. Second 1002: the holds end, renewals.
	clk.set(1002)
	r.HoldEnded(bg, locker.HoldEnd{Name: "a", Reason: locker.Released})
	r.HoldEnded(bg, locker.HoldEnd{Name: "b", Reason: locker.LostRefused, Cause: locker.ErrLost})
	r.Renewed(locker.Renewal{Name: "a"})
	r.Renewed(locker.Renewal{Name: "a"})
	r.Renewed(locker.Renewal{Name: "b", Err: fmt.Errorf("renew: %w", locker.ErrLost)})
	r.Renewed(locker.Renewal{Name: "b", Err: errors.New("connection refused")})
	// The current second is not reported yet.
	clk.set(1003)
	acquire(r, "d", locker.OutcomeFailed, 0)

	st := r.Snapshot()
	n := st.Seconds
	s1000, s1001, s1002 := n-3, n-2, n-1
	if st.Start != 1000 || n != 3 {
		t.Fatalf("start %d, %d seconds: want the 3 seconds from 1000, when the Recorder was created, to 1002", st.Start, n)
	}
	check := func(what string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("acquired", st.Acquired[s1000], 2)
	check("busy", st.Busy[s1000], 1)
	check("timed out", st.TimedOut[s1000], 1)
	check("failed at 1000", st.Failed[s1000], 0)
	check("re-entries", st.Reentries[s1000], 1)
	check("waiters at 1000 (the most at once)", st.Waiters[s1000], 3)
	check("holds at 1000", st.Active[s1000], 2)
	check("holds at 1001 (no events)", st.Active[s1001], 2)
	check("waiters at 1001", st.Waiters[s1001], 0)
	check("holds at 1002 (the most during it)", st.Active[s1002], 2)
	check("released", st.Released[s1002], 1)
	check("lost", st.Lost[s1002], 1)
	check("lost by reason", st.LostByReason["refused"][s1002], 1)
	check("lost reasons", len(st.LostByReason), 1)
	check("renewals ok", st.RenewalsOK[s1002], 2)
	check("renewals refused", st.RenewalsRefused[s1002], 1)
	check("renewals failed", st.RenewalsFailed[s1002], 1)
	check("totals", fmt.Sprint(st.Totals.Acquisitions), "map[acquired:2 busy:1 cancelled:0 failed:0 timed_out:1]")
	check("lost in total", st.Totals.Lost, 1)
	check("holds now", st.Totals.ActiveNow, 0)
	if !near(st.WaitP50MS[s1000], 1, 0.125) || !near(st.WaitP99MS[s1000], 3, 0.125) {
		t.Errorf("wait p50 %v, p99 %v at 1000: want about 1 and 3 ms (the busy and timed-out waits do not count)", st.WaitP50MS[s1000], st.WaitP99MS[s1000])
	}
	if !math.IsNaN(float64(st.WaitP50MS[s1001])) {
		t.Errorf("wait p50 at 1001 = %v, want none", st.WaitP50MS[s1001])
	}

	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"wait_p50_ms":[0.983,null,null]`) || !strings.Contains(string(b), `"enabled":true`) {
		t.Errorf("JSON %.300s: want null for seconds without waits", b)
	}

	t.Run("forgets_what_is_older_than_the_window", func(t *testing.T) {
		clk.set(1003 + window)
		st := r.Snapshot()
		if st.Seconds != window-1 {
			t.Errorf("%d seconds, want %d", st.Seconds, window-1)
		}
		for i := range st.Seconds {
			if st.Acquired[i]+st.Failed[i]+st.Lost[i] != 0 || st.Active[i] != 0 {
				t.Fatalf("second %d still counts events from 5 minutes ago", st.Start+int64(i))
			}
		}
		if st.Totals.Acquisitions["failed"] != 0 {
			t.Errorf("totals %v", st.Totals)
		}
	})
}

func TestRecorderGaugesCarryAcrossQuietSeconds(t *testing.T) {
	r, clk := newTestRecorder(1990)
	clk.set(2000)
	acquire(r, "a", locker.OutcomeAcquired, 0)
	acquire(r, "b", locker.OutcomeAcquired, 0)
	clk.set(2010)
	r.HoldEnded(context.Background(), locker.HoldEnd{Name: "a", Reason: locker.Released})
	clk.set(2020)
	st := r.Snapshot()
	at := func(sec int64) int32 { return st.Active[sec-st.Start] }
	if at(1999) != 0 || at(2000) != 2 || at(2005) != 2 || at(2009) != 2 || at(2010) != 2 || at(2011) != 1 || at(2019) != 1 {
		t.Errorf("holds at 1999..2019: %v", st.Active[1999-st.Start:])
	}
}

func TestRecorderPercentiles(t *testing.T) {
	r, _ := newTestRecorder(3000)
	for i := 1; i <= 1000; i++ {
		acquire(r, "a", locker.OutcomeAcquired, time.Duration(i)*time.Millisecond)
	}
	r.now = func() time.Time { return time.Unix(3001, 0) }
	st := r.Snapshot()
	p50, p99 := st.WaitP50MS[st.Seconds-1], st.WaitP99MS[st.Seconds-1]
	if !near(p50, 500, 0.125) || !near(p99, 990, 0.125) {
		t.Errorf("p50 %v, p99 %v; want about 500 and 990 ms", p50, p99)
	}
	if !near(st.Totals.WaitP99MS, 990, 0.125) {
		t.Errorf("window p99 %v, want about 990 ms", st.Totals.WaitP99MS)
	}
}

func TestBuckets(t *testing.T) {
	prev := -1
	for d := time.Duration(1); d < 1000*time.Second; d = d*21/20 + 1 {
		b := bucket(d)
		if b < prev || b < 0 || b >= numBuckets {
			t.Fatalf("bucket(%v) = %d after %d", d, b, prev)
		}
		prev = b
		if d >= 1<<minExp && d < 1<<maxExp {
			if mid := bucketMid(b); math.Abs(float64(mid-d)) > 0.125*float64(d) {
				t.Errorf("bucket(%v) = %d, reported as %v: more than 12.5%% off", d, b, mid)
			}
		}
	}
	if bucket(time.Hour) != numBuckets-1 || bucket(0) != 0 || bucket(-time.Second) != 0 {
		t.Error("out-of-range waits are not clamped")
	}
}

func TestRecorderAllocatesNothing(t *testing.T) {
	r := NewRecorder()
	ctx := context.Background()
	start := locker.AcquireStart{Name: "orders/42", Op: "lock"}
	end := locker.AcquireEnd{Name: "orders/42", Op: "lock", Outcome: locker.OutcomeAcquired, Wait: time.Millisecond, Token: 7}
	held := locker.HoldEnd{Name: "orders/42", Token: 7, Held: time.Second, Reason: locker.LostRenewalFailed}
	ren := locker.Renewal{Name: "orders/42", Token: 7, Err: locker.ErrLost}
	for name, f := range map[string]func(){
		"AcquireStarted": func() { _ = r.AcquireStarted(ctx, start) },
		"AcquireEnded":   func() { r.AcquireEnded(ctx, end) },
		"HoldEnded":      func() { r.HoldEnded(ctx, held) },
		"Renewed":        func() { r.Renewed(ren) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s allocates %v times per call", name, n)
		}
	}
}

func TestRecorderIsSafeForConcurrentUse(t *testing.T) {
	r := NewRecorder()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				acquire(r, "a", locker.Outcome(i%5), time.Duration(i)*time.Microsecond)
				if i%5 == 0 {
					r.HoldEnded(context.Background(), locker.HoldEnd{Reason: locker.Released})
				}
				r.Renewed(locker.Renewal{})
				if g == 0 && i%500 == 0 {
					_ = r.Snapshot()
				}
			}
		}()
	}
	wg.Wait()
	st := r.Snapshot()
	if st.Totals.ActiveNow != 0 || st.Totals.WaitersNow != 0 {
		t.Errorf("after balanced events: %d held, %d waiting", st.Totals.ActiveNow, st.Totals.WaitersNow)
	}
}

func BenchmarkRecorder(b *testing.B) {
	ctx := context.Background()
	start := locker.AcquireStart{Name: "orders/42", Op: "lock"}
	end := locker.AcquireEnd{Name: "orders/42", Op: "lock", Outcome: locker.OutcomeAcquired, Wait: time.Millisecond, Token: 7}
	held := locker.HoldEnd{Name: "orders/42", Token: 7, Held: time.Second, Reason: locker.Released}
	ren := locker.Renewal{Name: "orders/42", Token: 7}
	// One event on a fresh Recorder, over and over.
	for _, ev := range []struct {
		name string
		on   func(r *Recorder)
	}{
		{"AcquireStarted", func(r *Recorder) { r.AcquireStarted(ctx, start) }},
		{"AcquireEnded", func(r *Recorder) { r.AcquireEnded(ctx, end) }},
		{"HoldEnded", func(r *Recorder) { r.HoldEnded(ctx, held) }},
		{"Renewed", func(r *Recorder) { r.Renewed(ren) }},
	} {
		b.Run(ev.name, func(b *testing.B) {
			r := NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				ev.on(r)
			}
		})
	}
	// One lock's events (start, end, hold end) from every P at once.
	b.Run("lock_cycle_parallel", func(b *testing.B) {
		r := NewRecorder()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c := r.AcquireStarted(ctx, start)
				r.AcquireEnded(c, end)
				r.HoldEnded(c, held)
			}
		})
	})
	b.Run("Snapshot", func(b *testing.B) {
		r := NewRecorder()
		r.start -= window // a full window, as after five minutes
		for range 10000 {
			r.AcquireEnded(ctx, end)
		}
		b.ReportAllocs()
		for b.Loop() {
			_ = r.Snapshot()
		}
	})
}
