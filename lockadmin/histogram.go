package lockadmin

import (
	"math"
	"math/bits"
	"time"
)

// The wait histogram has four buckets per power of two, from 2^minExp ns
// (8.2 µs) to 2^maxExp ns (137 s), and one bucket below. A bucket spans
// 14 to 25% of its lower bound and reports its middle, so a percentile
// read from it is off by at most 12.5%. Longer waits count in the last
// bucket.
const (
	minExp     = 13
	maxExp     = 37
	numBuckets = 1 + 4*(maxExp-minExp)
)

// bucket returns the histogram bucket of d.
func bucket(d time.Duration) int {
	if d < 1<<minExp {
		return 0
	}
	x := uint64(d)
	e := bits.Len64(x) - 1
	if e >= maxExp {
		return numBuckets - 1
	}
	sub := int(x>>(e-2)) & 3
	return 1 + (e-minExp)*4 + sub
}

// bucketMid returns the middle of bucket i: the value a percentile that
// falls in it is reported as.
func bucketMid(i int) time.Duration {
	if i <= 0 {
		return 1 << (minExp - 1)
	}
	e := minExp + (i-1)/4
	sub := (i - 1) % 4
	lo := uint64(1)<<e + uint64(sub)<<(e-2)
	return time.Duration(lo + uint64(1)<<(e-3))
}

// percentile returns the p-quantile (0 < p <= 1) of the histogram h of n
// values, or false when it is empty.
func percentile(h *[numBuckets]uint32, n uint64, p float64) (time.Duration, bool) {
	if n == 0 {
		return 0, false
	}
	rank := max(uint64(math.Ceil(p*float64(n))), 1)
	var cum uint64
	for i, c := range h {
		cum += uint64(c)
		if cum >= rank {
			return bucketMid(i), true
		}
	}
	return bucketMid(numBuckets - 1), true
}
