package driverkit

import (
	"errors"
	"fmt"

	"github.com/golocker/locker/backend"
)

// ErrOtherDriver is the error of a lease that a RenewBatch was given but
// another driver granted: Batches sets it, wrapped with the driver's
// package name, on that item alone.
var ErrOtherDriver = errors.New("RenewBatch: a lease of another driver")

// Batches groups the items of a BatchRenewer's RenewBatch of driver d, of
// package pkg: each item whose lease is not an L that owner says is d's
// gets ErrOtherDriver as its error; the others are grouped by what key
// says of their lease and TTL (a lease length, a Cluster slot), and each
// is called once per chunk of at most size items of a group, with the
// group's key, the chunk's indexes in items and their leases.
func Batches[L backend.Lease, D, K comparable](items []backend.RenewItem, d D, pkg string, owner func(L) D, key func(L, backend.RenewItem) K, size int, each func(k K, idx []int, leases []L)) {
	groups := make(map[K][]int)
	var notMine error
	for i, it := range items {
		l, ok := it.Lease.(L)
		if !ok || owner(l) != d {
			if notMine == nil {
				notMine = fmt.Errorf("%s: %w", pkg, ErrOtherDriver)
			}
			items[i].Err = notMine
			continue
		}
		k := key(l, it)
		groups[k] = append(groups[k], i)
	}
	for k, idx := range groups {
		for len(idx) > 0 {
			n := min(len(idx), size)
			chunk := idx[:n:n]
			leases := make([]L, n)
			for j, i := range chunk {
				leases[j] = items[i].Lease.(L)
			}
			each(k, chunk, leases)
			idx = idx[n:]
		}
	}
}
