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
// every "now" is the server's $$NOW. Only the name, the owner, the lease
// length and the waiter's ticket come from the client.
type updateStore struct{ d *Driver }

// Expressions on the document as it was. Missing fields (a document
// created by an earlier version, or the upsert's new one) read as a free
// lock with an empty queue.
var (
	fOwner   = bson.D{{Key: "$ifNull", Value: bson.A{"$owner", ""}}}
	fTickets = bson.D{{Key: "$ifNull", Value: bson.A{"$tickets", int64(0)}}}
	fServing = bson.D{{Key: "$ifNull", Value: bson.A{"$serving", int64(1)}}}
	fFence   = bson.D{{Key: "$ifNull", Value: bson.A{"$fence", int64(0)}}}
	// free: no owner, or a lease that ran out.
	free = bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "$eq", Value: bson.A{fOwner, ""}}},
		bson.D{{Key: "$lt", Value: bson.A{"$expires_at", "$$NOW"}}},
	}}}
	// empty: nobody queues.
	empty = bson.D{{Key: "$gt", Value: bson.A{fServing, fTickets}}}
	// lapsed: free for claimWindow, and the turn older than that (a
	// release sets expires_at to its time).
	lapsed = bson.D{{Key: "$and", Value: bson.A{free,
		bson.D{{Key: "$lt", Value: bson.A{
			bson.D{{Key: "$max", Value: bson.A{
				bson.D{{Key: "$ifNull", Value: bson.A{"$serving_at", time.Unix(0, 0)}}},
				bson.D{{Key: "$ifNull", Value: bson.A{"$expires_at", time.Unix(0, 0)}}},
			}}},
			bson.D{{Key: "$subtract", Value: bson.A{"$$NOW", claimWindow.Milliseconds()}}},
		}}},
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

// acquire is one findOneAndUpdate with upsert on {_id: name, grant}: it
// takes the document, or creates it held (fence 1); a duplicate key error
// means that the document exists and the lock is not granted. A grant of
// the waiter whose turn it is passes the turn to the next ticket.
func (s updateStore) acquire(ctx context.Context, a attempt) (*lease, state, error) {
	tk := a.ticket
	wait := int64(0)
	if a.wait {
		wait = 1
	}
	// head: the waiter's ticket is served, or follows a lapsed head.
	head := bson.D{{Key: "$and", Value: bson.A{
		bson.D{{Key: "$gt", Value: bson.A{tk, int64(0)}}},
		bson.D{{Key: "$lte", Value: bson.A{tk, fTickets}}},
		bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "$eq", Value: bson.A{tk, fServing}}},
			bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "$gt", Value: bson.A{tk, fServing}}}, lapsed}}},
		}}},
	}}}
	// grant: a single attempt, nobody queues, the waiter's turn, or a new
	// waiter behind a lapsed head.
	grant := bson.D{{Key: "$and", Value: bson.A{free, bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "$eq", Value: bson.A{wait, int64(0)}}}, empty, head,
		bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "$eq", Value: bson.A{tk, int64(0)}}}, lapsed}}},
	}}}}}}
	turnMoves := bson.D{{Key: "$and", Value: bson.A{
		bson.D{{Key: "$gt", Value: bson.A{tk, int64(0)}}},
		bson.D{{Key: "$gte", Value: bson.A{tk, fServing}}},
		bson.D{{Key: "$lte", Value: bson.A{tk, fTickets}}},
	}}}
	filter := bson.D{{Key: "_id", Value: a.Name}, {Key: "$expr", Value: grant}}
	update := bson.A{bson.D{{Key: "$set", Value: bson.D{
		{Key: "owner", Value: bson.D{{Key: "$literal", Value: a.Owner}}},
		{Key: "fence", Value: bson.D{{Key: "$add", Value: bson.A{fFence, int64(1)}}}},
		{Key: "expires_at", Value: expiresIn(a.TTL)},
		{Key: "tickets", Value: fTickets},
		{Key: "serving", Value: cond(turnMoves, tk+1, fServing)},
		{Key: "serving_at", Value: cond(turnMoves, "$$NOW", "$serving_at")},
	}}}}
	opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
	start := time.Now()
	var doc struct {
		Fence int64 `bson:"fence"`
	}
	err := s.d.coll.FindOneAndUpdate(ctx, filter, update, opts).Decode(&doc)
	switch {
	case err == nil:
		return s.d.newLease(a.Request, doc.Fence, start), state{}, nil
	case mongo.IsDuplicateKeyError(err):
		return nil, state{}, nil
	case !definite(err):
		s.d.cleanup(ctx, a.Request)
	}
	return nil, state{}, err
}

// takeTicket is one findOneAndUpdate: tickets + 1 is the waiter's; the
// first ticket of an empty queue has its turn at once.
func (s updateStore) takeTicket(ctx context.Context, name string) (int64, state, error) {
	update := bson.A{bson.D{{Key: "$set", Value: bson.D{
		{Key: "tickets", Value: bson.D{{Key: "$add", Value: bson.A{fTickets, int64(1)}}}},
		{Key: "serving", Value: fServing},
		{Key: "serving_at", Value: cond(empty, "$$NOW", "$serving_at")},
	}}}}
	var doc lockDoc
	err := s.d.coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: name}}, update,
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&doc)
	if err != nil {
		return 0, state{}, err
	}
	return doc.Tickets, doc.state(s.d.serverNow(ctx)), nil
}

// lockDoc is a lock's document.
type lockDoc struct {
	ID        string    `bson:"_id"`
	Owner     string    `bson:"owner"`
	Fence     int64     `bson:"fence"`
	ExpiresAt time.Time `bson:"expires_at"`
	Tickets   int64     `bson:"tickets"`
	Serving   int64     `bson:"serving"`
	ServingAt time.Time `bson:"serving_at"`
}

// state is the document's state at server time now (an estimate: the
// server decides with $$NOW).
func (doc *lockDoc) state(now time.Time) state {
	s := state{Exists: true, Owner: doc.Owner, Fence: doc.Fence, Tickets: doc.Tickets, Serving: max(doc.Serving, 1), Left: -1}
	if doc.Owner != "" {
		s.Left = doc.ExpiresAt.Sub(now)
	}
	if !doc.ServingAt.IsZero() {
		s.Age = now.Sub(doc.ServingAt)
	}
	s.Lapsed = s.Left <= 0 && now.Sub(doc.ExpiresAt) > claimWindow && (doc.ServingAt.IsZero() || s.Age > claimWindow)
	return s
}

func (s updateStore) look(ctx context.Context, name string) (state, error) {
	var doc lockDoc
	err := s.d.coll.FindOne(ctx, bson.D{{Key: "_id", Value: name}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return state{}, nil
	}
	if err != nil {
		return state{}, err
	}
	return doc.state(s.d.serverNow(ctx)), nil
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
