package etcdlock

import (
	"context"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// Holds implements backend.Inspector: for each name that starts with
// prefix, its lowest key, which holds the lock. Expires is zero: a hold
// lives as long as its owner's session.
func (d *Driver) Holds(ctx context.Context, prefix string) ([]backend.Hold, error) {
	resp, err := d.cli.Get(ctx, d.prefix+"/"+driverkit.Escape(prefix, "/"), clientv3.WithPrefix())
	if err != nil {
		return nil, d.storeErr(ctx, err)
	}
	lowest := make(map[string]*mvccpb.KeyValue)
	for _, kv := range resp.Kvs {
		name, ok := d.nameOf(string(kv.Key))
		if !ok {
			continue
		}
		if cur := lowest[name]; cur == nil || kv.CreateRevision < cur.CreateRevision {
			lowest[name] = kv
		}
	}
	hs := make([]backend.Hold, 0, len(lowest))
	for name, kv := range lowest {
		hs = append(hs, backend.Hold{Name: name, Owner: string(kv.Value), Token: uint64(kv.CreateRevision)})
	}
	slices.SortFunc(hs, func(a, b backend.Hold) int { return strings.Compare(a.Name, b.Name) })
	return hs, nil
}

// ForceRelease implements backend.Inspector: it deletes the lowest key of
// name, so that its owner's Lost closes and the next waiter gets the lock.
func (d *Driver) ForceRelease(ctx context.Context, name string) error {
	pfx := d.namePrefix(name)
	for {
		resp, err := d.cli.Get(ctx, pfx, clientv3.WithFirstCreate()...)
		if err != nil {
			return d.storeErr(ctx, err)
		}
		if len(resp.Kvs) == 0 {
			return backend.ErrNotHeld
		}
		kv := resp.Kvs[0]
		tr, err := d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).
			Commit()
		if err != nil {
			return d.storeErr(ctx, err)
		}
		if tr.Succeeded {
			return nil
		}
		// Released meanwhile: look again.
	}
}

// Waiters implements backend.QueueInspector: the keys of name but the
// holder's.
func (d *Driver) Waiters(ctx context.Context, name string) (int, error) {
	resp, err := d.cli.Get(ctx, d.namePrefix(name), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, d.storeErr(ctx, err)
	}
	return max(int(resp.Count)-1, 0), nil
}
