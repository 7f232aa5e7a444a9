package mongolock

import (
	"context"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// batchDocs bounds the documents of one renewal request.
const batchDocs = 1000

// RenewBatch implements backend.BatchRenewer: the leases of one length
// are renewed together, batchDocs at a time, each owner-checked as Renew
// does. ModeUpdate sends one updateMany that stamps the renewed documents
// with the batch's random stamp, and one find of the stamp; ModeHistory
// one find of the owners' documents, one updateMany, one find of the
// documents after them. A lease that was lost does not fail the others;
// an error fails only its request's leases.
func (d *Driver) RenewBatch(ctx context.Context, items []backend.RenewItem) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	length := func(_ *lease, it backend.RenewItem) time.Duration {
		return time.Duration(leaseMs(it.TTL)) * time.Millisecond
	}
	driverkit.Batches(items, d, "mongolock", func(l *lease) *Driver { return l.d }, length, batchDocs, func(ttl time.Duration, idx []int, leases []*lease) {
		errs := make([]error, len(idx))
		d.store.renewBatch(octx, leases, ttl, errs)
		for j, i := range idx {
			items[i].Err = ctxError(ctx, errs[j])
		}
	})
}
