package mongolock

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/golocker/locker/backend"
)

// historyStore is ModeHistory. A lock's state is the last document of its
// history, "f/<n>/<name>" for n = 1, 2, …: held by its owner until its
// expires_at, or free (no owner). Changing owner — acquiring, releasing,
// force-releasing — inserts document n+1, and the unique _id lets exactly
// one of several writers win: no decision ever rests on an update that
// another owner could race, which is what makes it correct on servers
// whose updates are not atomic. The fence is n. A history document is
// never rewritten but by its owner, who only extends its lease (to renew)
// and then checks that no document n+1 exists.
//
// Every lookup is by exact _id. The head document "h/<name>" is a hint:
// the number of a recent acquisition's document and a copy of it, which
// its owner writes after the insert. Reading the history starts there, so
// a look at a lock that is held takes two reads: the head, and document
// n+1 to see that none follows. Fields and documents that other versions
// of the driver wrote (a waiters' queue: "served", "at", "t/…" and "th/…"
// documents, a head without a copy) are ignored.
type historyStore struct{ d *Driver }

type historyDoc struct {
	ID        string    `bson:"_id"`
	Name      string    `bson:"name"`
	N         int64     `bson:"n"`
	Owner     string    `bson:"owner,omitempty"`
	ExpiresAt time.Time `bson:"expires_at,omitempty"`
}

// headDoc is a lock's head: N is a recent acquisition's document, Copy
// the owner and lease of document Copy.N as its acquisition wrote them
// (nil in a head that another version wrote).
type headDoc struct {
	N    int64 `bson:"n"`
	Copy *struct {
		N         int64     `bson:"n"`
		Owner     string    `bson:"owner"`
		ExpiresAt time.Time `bson:"expires_at"`
	} `bson:"copy"`
}

// pointUpsert creates a head document on its first update.
var pointUpsert = options.UpdateOne().SetUpsert(true)

func stateKey(name string, n int64) string { return "f/" + strconv.FormatInt(n, 10) + "/" + name }

func headKey(name string) string { return "h/" + name }

// held reports whether doc holds the lock at server time now.
func (doc *historyDoc) held(now time.Time) bool {
	return doc != nil && doc.Owner != "" && !doc.ExpiresAt.Before(now)
}

// find returns the document with _id id, or nil.
func (s historyStore) find(ctx context.Context, id string) (*historyDoc, error) {
	var doc historyDoc
	err := s.d.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &doc, nil
}

// last returns the last document of name's history (nil if there is
// none) and its number (0 if none). It reads the head, then the history
// forward from the head's document until one is missing. The head's copy
// stands for its document while the copy's lease runs: the document's
// own lease is at least as long (renewals only extend it), and the
// following read sees whether anything came after it.
func (s historyStore) last(ctx context.Context, name string) (*historyDoc, int64, error) {
	var head headDoc
	err := s.d.coll.FindOne(ctx, bson.D{{Key: "_id", Value: headKey(name)}}).Decode(&head)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return nil, 0, err
	}
	n := head.N
	var last *historyDoc
	if c := head.Copy; n > 0 && c != nil && c.N == n && c.Owner != "" && !c.ExpiresAt.Before(s.d.serverNow(ctx)) {
		last = &historyDoc{Name: name, N: n, Owner: c.Owner, ExpiresAt: c.ExpiresAt}
	} else if n > 0 {
		if last, err = s.find(ctx, stateKey(name, n)); err != nil {
			return nil, 0, err
		}
		if last == nil {
			// A head ahead of the history, which this driver never
			// writes: read the history from its start.
			n = 0
		}
	}
	for {
		doc, err := s.find(ctx, stateKey(name, n+1))
		if err != nil {
			return nil, 0, err
		}
		if doc == nil {
			return last, n, nil
		}
		last = doc
		n++
	}
}

// append inserts doc as number doc.N of its name's history; it reports
// false when another writer inserted it first.
func (s historyStore) append(ctx context.Context, doc historyDoc) (bool, error) {
	doc.ID = stateKey(doc.Name, doc.N)
	_, err := s.d.coll.InsertOne(ctx, doc)
	if mongo.IsDuplicateKeyError(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// point makes the head name the acquisition doc, with a copy of it. The
// filter is the _id alone, which FerretDB 1.x answers from its index (a
// filter with more fields reads the collection). A head that names a
// later document keeps its number ($max) but takes this copy, which then
// stands for nothing (last reads that document itself); on servers whose
// updates are not atomic a racing writer may even leave the number
// behind. Either way the head is only where reading starts, and an error
// is ignored: reading forward finds the last document all the same.
func (s historyStore) point(ctx context.Context, doc historyDoc) {
	update := bson.D{
		{Key: "$max", Value: bson.D{{Key: "n", Value: doc.N}}},
		{Key: "$set", Value: bson.D{{Key: "copy", Value: bson.D{
			{Key: "n", Value: doc.N}, {Key: "owner", Value: doc.Owner}, {Key: "expires_at", Value: doc.ExpiresAt},
		}}}},
	}
	_, _ = s.d.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: headKey(doc.Name)}}, update, pointUpsert)
}

// acquire reads the history and, if the lock is free, inserts the next
// document with the owner, then points the head at it. An insert that
// another writer beat is answered by the document that won, which names
// the new holder; if it is free (a clean-up's), the attempt inserts after
// it, at most three times in all.
func (s historyStore) acquire(ctx context.Context, r backend.Request) (*lease, error) {
	last, n, err := s.last(ctx, r.Name)
	if err != nil {
		return nil, err
	}
	for range 3 {
		now := s.d.serverNow(ctx)
		if last.held(now) {
			return nil, heldBy(last.Owner, n, last.ExpiresAt, now)
		}
		start := time.Now()
		doc := historyDoc{Name: r.Name, N: n + 1, Owner: r.Owner, ExpiresAt: now.Add(time.Duration(leaseMs(r.TTL)) * time.Millisecond)}
		ok, err := s.append(ctx, doc)
		if err != nil {
			if !definite(err) {
				s.claim(ctx, r, n+1)
			}
			return nil, err
		}
		if ok {
			s.point(ctx, doc)
			l := s.d.newLease(r, n+1, start)
			l.expires.Store(doc.ExpiresAt.UnixNano())
			return l, nil
		}
		n++
		if last, err = s.find(ctx, stateKey(r.Name, n)); err != nil {
			return nil, err
		}
	}
	// The lock changed hands three times during this attempt.
	return nil, &backend.HeldError{}
}

// claim settles an insert of document n whose outcome is unknown (it may
// still be on its way to the server): it inserts a free document n itself.
// If that wins, the lost insert can never land; if document n exists and
// is the owner's, it appends a free document after it.
func (s historyStore) claim(ctx context.Context, r backend.Request, n int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	ok, err := s.append(ctx, historyDoc{Name: r.Name, N: n})
	if ok || err != nil {
		return
	}
	if doc, err := s.find(ctx, stateKey(r.Name, n)); err == nil && doc != nil && doc.Owner == r.Owner {
		_, _ = s.append(ctx, historyDoc{Name: r.Name, N: n + 1})
	}
}

// mine returns nil if the lease's own document still holds the lock.
func (s historyStore) mine(ctx context.Context, l *lease) error {
	doc, err := s.find(ctx, stateKey(l.Name, int64(l.Fence)))
	if err != nil {
		return err
	}
	if doc == nil || doc.Owner != l.Owner || !doc.held(s.d.serverNow(ctx)) {
		return backend.ErrLost
	}
	return nil
}

// renew updates the owner's own document — nobody else writes it — and
// then checks that no later document took the lock. A renewal that
// arrives after the lease ran out is refused by the first check; one
// whose write lands just as another owner took over is reported lost by
// the second, or by the next renewal.
func (s historyStore) renew(ctx context.Context, l *lease, ttl time.Duration) error {
	errs := []error{nil}
	s.renewBatch(ctx, []*lease{l}, ttl, errs)
	return errs[0]
}

// renewBatch renews leases as renew does, three requests for all: a find
// of their documents, an update of those still held, a find of the
// documents after them.
func (s historyStore) renewBatch(ctx context.Context, leases []*lease, ttl time.Duration, errs []error) {
	ids := make(bson.A, len(leases))
	nexts := make(bson.A, len(leases))
	for i, l := range leases {
		ids[i], nexts[i] = stateKey(l.Name, int64(l.Fence)), stateKey(l.Name, int64(l.Fence)+1)
	}
	fail := func(err error) {
		for i := range errs {
			errs[i] = err
		}
	}
	key := func(doc bson.Raw) (string, string) {
		id, _ := doc.Lookup("_id").StringValueOK()
		owner, _ := doc.Lookup("owner").StringValueOK()
		return id, owner
	}
	own, err := stamped(ctx, s.d.coll, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}},
		{Key: "expires_at", Value: bson.D{{Key: "$gte", Value: s.d.serverNow(ctx)}}}}, key)
	if err != nil {
		fail(err)
		return
	}
	var held bson.A
	for i, l := range leases {
		if own[ids[i].(string)] == l.Owner {
			held = append(held, ids[i])
		}
	}
	expires := s.d.serverNow(ctx).Add(time.Duration(leaseMs(ttl)) * time.Millisecond)
	if len(held) > 0 {
		_, err := s.d.coll.UpdateMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: held}}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "expires_at", Value: expires}}}})
		if err != nil {
			fail(err)
			return
		}
	}
	taken, err := stamped(ctx, s.d.coll, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: nexts}}}}, key)
	if err != nil {
		fail(err)
		return
	}
	for i, l := range leases {
		_, next := taken[nexts[i].(string)]
		if own[ids[i].(string)] == l.Owner && !next {
			errs[i] = nil
			l.expires.Store(expires.UnixNano())
		} else {
			errs[i] = backend.ErrLost
		}
	}
}

// release appends a free document after the owner's: if another owner
// appended first (the lease ran out and the lock was taken, or it was
// forced off), the hold was lost. The owner's document holds the lease
// that the acquisition and the last renewal that succeeded wrote, or a
// longer one (a renewal whose outcome was unknown): while that lease
// runs the document need not be read; after it, the document says
// whether the lease ended.
func (s historyStore) release(ctx context.Context, l *lease) error {
	if !time.Unix(0, l.expires.Load()).After(s.d.serverNow(ctx)) {
		if err := s.mine(ctx, l); err != nil {
			return err
		}
	}
	ok, err := s.append(ctx, historyDoc{Name: l.Name, N: int64(l.Fence) + 1})
	if err != nil {
		return err
	}
	if !ok {
		return backend.ErrLost
	}
	return nil
}

func (s historyStore) releaseAny(ctx context.Context, name, owner string) error {
	last, n, err := s.last(ctx, name)
	if err != nil || last == nil || last.Owner != owner {
		return err
	}
	_, err = s.append(ctx, historyDoc{Name: name, N: n + 1})
	return err
}

func (s historyStore) forceRelease(ctx context.Context, name string) error {
	for range 3 {
		last, n, err := s.last(ctx, name)
		if err != nil {
			return err
		}
		if !last.held(s.d.serverNow(ctx)) {
			return fmt.Errorf("%w: nobody holds it", backend.ErrNotHeld)
		}
		ok, err := s.append(ctx, historyDoc{Name: name, N: n + 1})
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("%w: the lock changed hands while it was being released", backend.ErrNotHeld)
}

// holds reads every history document (an admin operation: it scans the
// collection) and keeps the last of each name.
func (s historyStore) holds(ctx context.Context, prefix string) ([]backend.Hold, error) {
	cur, err := s.d.coll.Find(ctx, bson.D{})
	if err != nil {
		return nil, err
	}
	var docs []historyDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	last := make(map[string]historyDoc)
	for _, doc := range docs {
		if !strings.HasPrefix(doc.ID, "f/") || !strings.HasPrefix(doc.Name, prefix) {
			continue
		}
		if prev, ok := last[doc.Name]; !ok || doc.N > prev.N {
			last[doc.Name] = doc
		}
	}
	now := s.d.serverNow(ctx)
	var holds []backend.Hold
	for _, doc := range last {
		if doc.held(now) {
			holds = append(holds, backend.Hold{Name: doc.Name, Owner: doc.Owner, Token: uint64(doc.N), Expires: s.d.localTime(doc.ExpiresAt)})
		}
	}
	sort.Slice(holds, func(i, j int) bool { return holds[i].Name < holds[j].Name })
	return holds, nil
}
