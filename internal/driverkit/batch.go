package driverkit

import "github.com/golocker/locker/backend"

// Batches groups the items of a BatchRenewer's RenewBatch of driver d:
// each item whose lease is not an L that owner says is d's gets notMine as
// its error; the others are grouped by what key says of their lease and
// TTL (a lease length, a Cluster slot), and each is called once per chunk
// of at most size items of a group, with the group's key, the chunk's
// indexes in items and their leases.
func Batches[L backend.Lease, D, K comparable](items []backend.RenewItem, d D, owner func(L) D, notMine error, key func(L, backend.RenewItem) K, size int, each func(k K, idx []int, leases []L)) {
	groups := make(map[K][]int)
	for i, it := range items {
		l, ok := it.Lease.(L)
		if !ok || owner(l) != d {
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
