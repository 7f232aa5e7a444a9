package driverkit

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
)

// testLease is a lease of the driver named by d.
type testLease struct {
	backend.Lease // nil: Batches calls none of its methods
	d             string
	id            int
}

// otherLease is a lease of another type than the driver's.
type otherLease struct{ backend.Lease }

// TestBatches: leases of another driver, or of another type, get
// ErrOtherDriver with the package's name and are passed to no call; the
// others are grouped by key and cut into chunks of at most size, each item
// in exactly one chunk, with its own lease.
func TestBatches(t *testing.T) {
	var items []backend.RenewItem
	for i := range 7 {
		items = append(items, backend.RenewItem{Lease: &testLease{d: "mine", id: i}, TTL: time.Duration(1+i%2) * time.Second})
	}
	items = append(items,
		backend.RenewItem{Lease: &testLease{d: "theirs", id: 7}, TTL: time.Second},
		backend.RenewItem{Lease: otherLease{}, TTL: time.Second})

	seen := make(map[int]int) // item index: calls that had it
	var sizes []int
	Batches(items, "mine", "testlock", func(l *testLease) string { return l.d },
		func(_ *testLease, it backend.RenewItem) time.Duration { return it.TTL }, 3,
		func(ttl time.Duration, idx []int, leases []*testLease) {
			sizes = append(sizes, len(idx))
			if len(idx) != len(leases) || len(idx) > 3 {
				t.Errorf("a chunk of %d indexes and %d leases, want the same, at most 3", len(idx), len(leases))
			}
			for j, i := range idx {
				seen[i]++
				if leases[j].id != i {
					t.Errorf("index %d came with the lease of item %d", i, leases[j].id)
				}
				if items[i].TTL != ttl {
					t.Errorf("item %d (TTL %v) in the group of %v", i, items[i].TTL, ttl)
				}
			}
		})
	for i := range 7 {
		if seen[i] != 1 || items[i].Err != nil {
			t.Errorf("item %d: in %d chunks, Err %v; want 1 and nil", i, seen[i], items[i].Err)
		}
	}
	for _, i := range []int{7, 8} {
		err := items[i].Err
		if seen[i] != 0 || !errors.Is(err, ErrOtherDriver) || !strings.HasPrefix(err.Error(), "testlock: ") {
			t.Errorf("item %d: in %d chunks, Err %v; want none and testlock's ErrOtherDriver", i, seen[i], err)
		}
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{1, 3, 3}) { // 4 of 1s and 3 of 2s, by 3
		t.Errorf("chunk sizes %v, want [1 3 3]", sizes)
	}
}
