package driverkit

import "github.com/golocker/locker/backend"

// Batches groups the items of a BatchRenewer's RenewBatch: each item whose
// lease mine does not accept as the driver's own gets notMine as its
// error; the others are grouped by what key says of their lease and TTL
// (a lease length, a Cluster slot), and each is called once per chunk of
// at most size items of a group, with the group's key and the chunk's
// indexes in items.
func Batches[L any, K comparable](items []backend.RenewItem, mine func(backend.Lease) (L, bool), notMine error, key func(L, backend.RenewItem) K, size int, each func(K, []int)) {
	groups := make(map[K][]int)
	for i, it := range items {
		l, ok := mine(it.Lease)
		if !ok {
			items[i].Err = notMine
			continue
		}
		k := key(l, it)
		groups[k] = append(groups[k], i)
	}
	for k, idx := range groups {
		for len(idx) > 0 {
			n := min(len(idx), size)
			each(k, idx[:n:n])
			idx = idx[n:]
		}
	}
}
