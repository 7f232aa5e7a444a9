package conformance

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// heapSlack is the heap growth tolerated after cycling through Scale names:
// noise from the runtime and the test framework, far below what keeping even
// a small record per name would cost.
const heapSlack = 1 << 20

var scaleChecks = []check{
	{
		name:   "scale/thousands_of_names_leave_no_goroutines_or_memory_behind",
		proves: []string{CapScale},
		run: func(t *testing.T, s *suite) {
			ctx := s.ctx(t)
			c := s.client(t)
			cycle := func(prefix string, n int) {
				var wg sync.WaitGroup
				next := make(chan int)
				for range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range next {
							m := c.NewMutex(s.name(t, fmt.Sprintf("%s-%d", prefix, i)))
							if err := m.Lock(ctx); err != nil {
								t.Errorf("Lock: %v", err)
								continue
							}
							if err := m.Unlock(ctx); err != nil {
								t.Errorf("Unlock: %v", err)
							}
						}
					}()
				}
				for i := range n {
					next <- i
				}
				close(next)
				wg.Wait()
			}
			cycle("warm", 200)
			goroutines, heap := runtime.NumGoroutine(), heapInUse()
			start := time.Now()
			within(t, s.h.Timeout, "cycling through names", func() { cycle("n", s.h.Scale) })
			t.Logf("%d names locked and unlocked in %v", s.h.Scale, time.Since(start).Round(time.Millisecond))
			eventually(t, 10*time.Second, "goroutines back to their number before", func() bool {
				return runtime.NumGoroutine() <= goroutines
			})
			var grown int64
			eventually(t, 10*time.Second, "heap back near its size before", func() bool {
				grown = int64(heapInUse()) - int64(heap)
				return grown < heapSlack
			})
			t.Logf("heap grew by %d bytes over %d names", grown, s.h.Scale)
		},
	},
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
