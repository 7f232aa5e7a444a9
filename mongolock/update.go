package mongolock

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/golocker/locker/backend"
)

// updateStore is ModeUpdate: one document per name, atomic updates, and
// every "now" is the server's $$NOW. Only the name, the owner and the
// lease length come from the client. Fields that other versions of the
// driver wrote (a waiters' queue's counters) are left alone and never
// read.
type updateStore struct{ d *Driver }

// Expressions on the document as it was. Missing fields (the upsert's new
// document, a released one) read as a free lock.
var (
	fOwner = bson.D{{Key: "$ifNull", Value: bson.A{"$owner", ""}}}
	fFence = bson.D{{Key: "$ifNull", Value: bson.A{"$fence", int64(0)}}}
	// free: no owner, or a lease that ran out.
	free = bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "$eq", Value: bson.A{fOwner, ""}}},
		bson.D{{Key: "$lt", Value: bson.A{"$expires_at", "$$NOW"}}},
	}}}
	// running matches a lease that has not run out.
	running = bson.E{Key: "$expr", Value: bson.D{{Key: "$gte", Value: bson.A{"$expires_at", "$$NOW"}}}}
	// anyOwner matches every owner of a held lock.
	anyOwner = bson.D{{Key: "$nin", Value: bson.A{nil, ""}}}
	// releaseUpdate frees the lock at $$NOW; the document and its fence
	// stay.
	releaseUpdate = bson.A{
		bson.D{{Key: "$set", Value: bson.D{{Key: "expires_at", Value: "$$NOW"}}}},
		bson.D{{Key: "$unset", Value: "owner"}},
	}
)

// expiresIn is the aggregation expression $$NOW + ttl.
func expiresIn(ttl time.Duration) bson.D {
	return bson.D{{Key: "$add", Value: bson.A{"$$NOW", leaseMs(ttl)}}}
}

func cond(ifExpr, then, els any) bson.D {
	return bson.D{{Key: "$cond", Value: bson.A{ifExpr, then, els}}}
}

// acquire is one findOneAndUpdate with upsert that returns the document
// as it leaves it: a free lock becomes the owner's (fence + 1, a new
// document fence 1), a held one stays as it is (a no-op write) and names
// its holder. The filter leaves out a document that this owner already
// holds, which only an earlier attempt whose outcome was unknown can have
// written: that hold is not this attempt's grant (its clean-up releases
// it), so the upsert then fails with a duplicate key error, as it does
// when another attempt created the document first, and a read names the
// holder.
func (s updateStore) acquire(ctx context.Context, r backend.Request) (*lease, error) {
	filter := bson.D{{Key: "_id", Value: r.Name}, {Key: "owner", Value: bson.D{{Key: "$ne", Value: r.Owner}}}}
	update := bson.A{bson.D{{Key: "$set", Value: bson.D{
		{Key: "owner", Value: cond(free, bson.D{{Key: "$literal", Value: r.Owner}}, "$owner")},
		{Key: "fence", Value: cond(free, bson.D{{Key: "$add", Value: bson.A{fFence, int64(1)}}}, "$fence")},
		{Key: "expires_at", Value: cond(free, expiresIn(r.TTL), "$expires_at")},
	}}}}
	opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
	start := time.Now()
	var doc lockDoc
	err := s.d.coll.FindOneAndUpdate(ctx, filter, update, opts).Decode(&doc)
	switch {
	case err == nil && doc.Owner == r.Owner:
		return s.d.newLease(r, doc.Fence, start), nil
	case err == nil:
		return nil, heldBy(doc.Owner, doc.Fence, doc.ExpiresAt, s.d.serverNow(ctx))
	case mongo.IsDuplicateKeyError(err):
		return nil, s.holder(ctx, r.Name)
	case !definite(err):
		s.d.cleanup(ctx, r)
	}
	return nil, err
}

// holder returns the HeldError that names name's holder as a read finds
// it, or the read's error.
func (s updateStore) holder(ctx context.Context, name string) error {
	var doc lockDoc
	if err := s.d.coll.FindOne(ctx, bson.D{{Key: "_id", Value: name}}).Decode(&doc); err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return err
	}
	if doc.Owner == "" {
		// Freed since the attempt: the next one may take it.
		return &backend.HeldError{}
	}
	return heldBy(doc.Owner, doc.Fence, doc.ExpiresAt, s.d.serverNow(ctx))
}

// lockDoc is a lock's document.
type lockDoc struct {
	ID        string    `bson:"_id"`
	Owner     string    `bson:"owner"`
	Fence     int64     `bson:"fence"`
	ExpiresAt time.Time `bson:"expires_at"`
}

func (s updateStore) renew(ctx context.Context, l *lease, ttl time.Duration) error {
	filter := bson.D{{Key: "_id", Value: l.Name}, {Key: "owner", Value: l.Owner}, running}
	update := bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "expires_at", Value: expiresIn(ttl)}}}}}
	return matchedOrLost(s.d.coll.UpdateOne(ctx, filter, update))
}

// renewBatch is one updateMany over the leases' documents, each
// owner-checked, that stamps the renewed ones with the batch's random
// stamp, and one find of the stamp.
func (s updateStore) renewBatch(ctx context.Context, leases []*lease, ttl time.Duration, errs []error) {
	or := make(bson.A, len(leases))
	ids := make(bson.A, len(leases))
	for i, l := range leases {
		or[i] = bson.D{{Key: "_id", Value: l.Name}, {Key: "owner", Value: l.Owner}}
		ids[i] = l.Name
	}
	stamp := bson.NewObjectID()
	filter := bson.D{{Key: "$or", Value: or}, running}
	update := bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "expires_at", Value: expiresIn(ttl)}, {Key: "renew_stamp", Value: stamp}}}}}
	renewed, err := func() (map[string]string, error) {
		if _, err := s.d.coll.UpdateMany(ctx, filter, update); err != nil {
			return nil, err
		}
		return stamped(ctx, s.d.coll, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "renew_stamp", Value: stamp}},
			func(doc bson.Raw) (string, string) {
				id, _ := doc.Lookup("_id").StringValueOK()
				owner, _ := doc.Lookup("owner").StringValueOK()
				return id, owner
			})
	}()
	for i, l := range leases {
		switch {
		case err != nil:
			errs[i] = err
		case renewed[l.Name] == l.Owner:
			errs[i] = nil
		default:
			errs[i] = backend.ErrLost
		}
	}
}

// stamped finds the documents of filter and returns key → owner.
func stamped(ctx context.Context, coll *mongo.Collection, filter bson.D, kv func(bson.Raw) (string, string)) (map[string]string, error) {
	cur, err := coll.Find(ctx, filter, options.Find().SetProjection(bson.D{{Key: "owner", Value: 1}, {Key: "name", Value: 1}}))
	if err != nil {
		return nil, err
	}
	defer cur.Close(ctx)
	out := make(map[string]string)
	for cur.Next(ctx) {
		k, v := kv(cur.Current)
		out[k] = v
	}
	return out, cur.Err()
}

func (s updateStore) release(ctx context.Context, l *lease) error {
	filter := bson.D{{Key: "_id", Value: l.Name}, {Key: "owner", Value: l.Owner}, running}
	return matchedOrLost(s.d.coll.UpdateOne(ctx, filter, releaseUpdate))
}

func (s updateStore) releaseAny(ctx context.Context, name, owner string) error {
	_, err := s.d.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: owner}}, releaseUpdate)
	return err
}

func (s updateStore) forceRelease(ctx context.Context, name string) error {
	filter := bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: anyOwner}, running}
	res, err := s.d.coll.UpdateOne(ctx, filter, releaseUpdate)
	if err != nil {
		return err
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("%w: nobody holds it", backend.ErrNotHeld)
	}
	return nil
}

func (s updateStore) holds(ctx context.Context, prefix string) ([]backend.Hold, error) {
	filter := bson.D{{Key: "owner", Value: anyOwner}, running}
	if prefix != "" {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$regex", Value: "^" + regexp.QuoteMeta(prefix)}}})
	}
	cur, err := s.d.coll.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	var docs []lockDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	holds := make([]backend.Hold, 0, len(docs))
	for _, doc := range docs {
		holds = append(holds, backend.Hold{Name: doc.ID, Owner: doc.Owner, Token: uint64(doc.Fence), Expires: s.d.localTime(doc.ExpiresAt)})
	}
	return holds, nil
}

// matchedOrLost turns an owner-checked update's result into nil or ErrLost.
func matchedOrLost(res *mongo.UpdateResult, err error) error {
	if err != nil {
		return err
	}
	if res.MatchedCount == 0 {
		return backend.ErrLost
	}
	return nil
}
