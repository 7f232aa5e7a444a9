package bench

import (
	"cmp"
	"slices"
	"time"
)

// Percentile returns the q-quantile (0 ≤ q ≤ 1) of xs by nearest rank, 0
// for no samples. xs is not modified.
func Percentile(xs []int64, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	i = min(max(i, 0), len(s)-1)
	return time.Duration(s[i])
}

// Jain returns Jain's fairness index of the counts, (Σx)²/(n·Σx²): 1 when
// every handle got the same share, 1/n when one got everything, 0 when
// nobody got anything.
func Jain(counts []int) float64 {
	var sum, sq float64
	for _, c := range counts {
		x := float64(c)
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(counts)) * sq)
}

// Overlaps counts the hold intervals that begin before an earlier one
// ended: two holders at once. Intervals is sorted in place.
func Overlaps(intervals [][2]int64) int {
	sortIntervals(intervals)
	n := 0
	var end int64
	for i, iv := range intervals {
		if i > 0 && iv[0] < end {
			n++
		}
		end = max(end, iv[1])
	}
	return n
}

// HoldAndGap returns the mean length of the hold intervals, and the mean
// gap from the end of one hold to the start of the next (the hand-off: a
// release, and the next owner learning of it and taking the lock). With
// one lock, 1/(hold+gap) is the rate. Intervals is sorted in place.
func HoldAndGap(intervals [][2]int64) (hold, gap time.Duration) {
	if len(intervals) == 0 {
		return 0, 0
	}
	sortIntervals(intervals)
	var h, g int64
	for i, iv := range intervals {
		h += iv[1] - iv[0]
		if i > 0 {
			g += iv[0] - intervals[i-1][1]
		}
	}
	hold = time.Duration(h / int64(len(intervals)))
	if len(intervals) > 1 {
		gap = time.Duration(g / int64(len(intervals)-1))
	}
	return hold, gap
}

// Gaps returns the gaps between consecutive hold intervals, in
// nanoseconds. Intervals is sorted in place.
func Gaps(intervals [][2]int64) []int64 {
	sortIntervals(intervals)
	var gs []int64
	for i := 1; i < len(intervals); i++ {
		gs = append(gs, intervals[i][0]-intervals[i-1][1])
	}
	return gs
}

func sortIntervals(intervals [][2]int64) {
	slices.SortFunc(intervals, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
}
