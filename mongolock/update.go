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
// lease length come from the client.
type updateStore struct{ d *Driver }

// Filters and updates.
var (
	// freeOr matches a free lock: no owner, or a lease that ran out.
	freeOr = bson.A{
		bson.D{{Key: "owner", Value: nil}},
		bson.D{{Key: "owner", Value: ""}},
		bson.D{{Key: "$expr", Value: bson.D{{Key: "$lt", Value: bson.A{"$expires_at", "$$NOW"}}}}},
	}
	// running matches a lease that has not run out.
	running = bson.E{Key: "$expr", Value: bson.D{{Key: "$gte", Value: bson.A{"$expires_at", "$$NOW"}}}}
	// anyOwner matches every owner of a held lock.
	anyOwner = bson.D{{Key: "$nin", Value: bson.A{nil, ""}}}
	// releaseUpdate frees the lock; the document and its fence stay.
	releaseUpdate = bson.D{{Key: "$unset", Value: bson.D{{Key: "owner", Value: ""}, {Key: "expires_at", Value: ""}}}}
)

// expiresIn is the aggregation expression $$NOW + ttl.
func expiresIn(ttl time.Duration) bson.D {
	return bson.D{{Key: "$add", Value: bson.A{"$$NOW", leaseMs(ttl)}}}
}

// acquire is one findOneAndUpdate with upsert on {_id: name, free}: it
// takes the document, or creates it held (fence 1); a duplicate key error
// means that the document exists and another owner holds it.
func (s updateStore) acquire(ctx context.Context, r backend.Request) (*lease, time.Duration, error) {
	filter := bson.D{{Key: "_id", Value: r.Name}, {Key: "$or", Value: freeOr}}
	update := bson.A{bson.D{{Key: "$set", Value: bson.D{
		{Key: "owner", Value: bson.D{{Key: "$literal", Value: r.Owner}}},
		{Key: "fence", Value: bson.D{{Key: "$add", Value: bson.A{
			bson.D{{Key: "$ifNull", Value: bson.A{"$fence", int64(0)}}}, int64(1)}}}},
		{Key: "expires_at", Value: expiresIn(r.TTL)},
	}}}}
	opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
	start := time.Now()
	var doc struct {
		Fence int64 `bson:"fence"`
	}
	err := s.d.coll.FindOneAndUpdate(ctx, filter, update, opts).Decode(&doc)
	switch {
	case err == nil:
		return s.d.newLease(r, doc.Fence, start), unknown, nil
	case mongo.IsDuplicateKeyError(err):
		return nil, unknown, backend.ErrHeld
	case !definite(err):
		s.d.cleanup(ctx, r)
	}
	return nil, unknown, err
}

func (s updateStore) remaining(ctx context.Context, name string) (time.Duration, error) {
	var doc struct {
		Owner     string    `bson:"owner"`
		ExpiresAt time.Time `bson:"expires_at"`
	}
	err := s.d.coll.FindOne(ctx, bson.D{{Key: "_id", Value: name}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	if err != nil || doc.Owner == "" {
		return 0, err
	}
	// A hint for the wait only: the server decides with $$NOW.
	return doc.ExpiresAt.Sub(s.d.serverNow(ctx)), nil
}

func (s updateStore) renew(ctx context.Context, l *lease, ttl time.Duration) error {
	filter := bson.D{{Key: "_id", Value: l.name}, {Key: "owner", Value: l.owner}, running}
	update := bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "expires_at", Value: expiresIn(ttl)}}}}}
	return matchedOrLost(s.d.coll.UpdateOne(ctx, filter, update))
}

func (s updateStore) release(ctx context.Context, l *lease) error {
	filter := bson.D{{Key: "_id", Value: l.name}, {Key: "owner", Value: l.owner}, running}
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
	var docs []struct {
		ID        string    `bson:"_id"`
		Owner     string    `bson:"owner"`
		Fence     int64     `bson:"fence"`
		ExpiresAt time.Time `bson:"expires_at"`
	}
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
