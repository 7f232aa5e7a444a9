package bench_test

import (
	"math"
	"testing"
	"time"

	"github.com/golocker/locker/bench"
)

func TestPercentile(t *testing.T) {
	xs := []int64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		q    float64
		want int64
	}{{0, 1}, {0.5, 5}, {0.99, 10}, {1, 10}, {0.1, 1}, {0.11, 1}, {0.15, 2}} {
		if got := bench.Percentile(xs, c.q); got != time.Duration(c.want) {
			t.Errorf("Percentile(%v) = %v, want %v", c.q, int64(got), c.want)
		}
	}
	if xs[0] != 5 {
		t.Error("Percentile sorted its input")
	}
	if got := bench.Percentile(nil, 0.5); got != 0 {
		t.Errorf("Percentile(nil) = %v", got)
	}
}

func TestJain(t *testing.T) {
	for _, c := range []struct {
		counts []int
		want   float64
	}{
		{[]int{10, 10, 10, 10}, 1},
		{[]int{40, 0, 0, 0}, 0.25},
		{[]int{1, 2}, 0.9}, // 9 / (2·5)
		{[]int{0, 0}, 0},
	} {
		if got := bench.Jain(c.counts); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Jain(%v) = %v, want %v", c.counts, got, c.want)
		}
	}
}

func TestOverlapsAndGaps(t *testing.T) {
	disjoint := [][2]int64{{20, 30}, {0, 10}, {12, 18}}
	if n := bench.Overlaps(disjoint); n != 0 {
		t.Errorf("Overlaps(disjoint) = %d", n)
	}
	hold, gap := bench.HoldAndGap(disjoint)
	if hold != time.Duration(26/3) || gap != 2 {
		t.Errorf("HoldAndGap = %v, %v; want %v, 2ns", hold, gap, time.Duration(26/3))
	}
	// The third starts inside the first, which outlasts the second.
	nested := [][2]int64{{0, 100}, {10, 20}, {50, 60}}
	if n := bench.Overlaps(nested); n != 2 {
		t.Errorf("Overlaps(nested) = %d, want 2", n)
	}
	if n := bench.Overlaps([][2]int64{{0, 10}, {10, 20}}); n != 0 {
		t.Errorf("Overlaps(touching) = %d, want 0", n)
	}
}
