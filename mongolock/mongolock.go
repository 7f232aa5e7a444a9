package mongolock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/driverkit"
)

// MaxNameLen is the longest lock name the driver stores, in bytes: every
// name that package locker accepts (backend.MaxNameLen) fits in an _id.
const MaxNameLen = backend.MaxNameLen

const (
	maxOwnerLen = 255
	// cleanupTimeout bounds the release of a grant that may have happened
	// while Acquire failed (its ctx ended after the request was sent).
	cleanupTimeout = 2 * time.Second
	// disconnectTimeout bounds Close's disconnection of a client it opened.
	disconnectTimeout = 5 * time.Second
)

// Driver is a lock collection in MongoDB. It implements backend.Driver,
// backend.Inspector, backend.BatchRenewer and backend.LogSetter, and is safe
// for concurrent use.
type Driver struct {
	client   *mongo.Client
	owned    bool
	database string
	collName string
	caps     backend.Capabilities
	log      *logSink // the SetLogger logger, also the mongo.Client's sink

	// Set once by ready, read after it.
	setup    driverkit.Setup
	coll     *mongo.Collection
	store    store
	modeSeen atomic.Value // ModeUpdate or ModeHistory, for Mode
	majority bool

	offset   atomic.Int64 // server clock minus local wall clock, ns
	measured atomic.Int64 // when offset was measured, local Unix ns
	wallNow  func() time.Time

	life *driverkit.Life // open or closed; the background clean-ups
}

var (
	_ backend.Driver       = (*Driver)(nil)
	_ backend.Inspector    = (*Driver)(nil)
	_ backend.BatchRenewer = (*Driver)(nil)
	_ backend.LogSetter    = (*Driver)(nil)
)

// New returns a Driver on client, a *mongo.Client the caller already has
// and keeps: the Driver's Close does not disconnect it.
func New(client *mongo.Client, opts ...Option) (*Driver, error) {
	return newDriver(client, false, nil, opts)
}

func newDriver(client *mongo.Client, owned bool, log *logSink, opts []Option) (*Driver, error) {
	if client == nil {
		return nil, driverkit.BadOption("mongolock", "nil *mongo.Client")
	}
	o := defaultConfig()
	if err := driverkit.Apply(&o, opts); err != nil {
		return nil, err
	}
	if o.dialer != nil && !owned {
		return nil, driverkit.BadOption("mongolock", "WithDialer applies to Open: New's *mongo.Client is connected already")
	}
	if log == nil {
		log = &logSink{}
	}
	return &Driver{
		client:   client,
		owned:    owned,
		database: o.database,
		collName: o.collection,
		log:      log,
		caps: backend.Capabilities{
			Fencing:      true,
			Expiry:       true,
			CrossProcess: true,
		},
		wallNow: time.Now,
		life:    driverkit.NewLife(),
	}, nil
}

// Capabilities implements backend.Driver: Fencing, Expiry and
// CrossProcess. Waiters poll (package locker's back-off).
func (d *Driver) Capabilities() backend.Capabilities { return d.caps }

// SetLogger implements backend.LogSetter: the Go driver's log messages, for
// a Driver from Open, go to l. A *mongo.Client given to New keeps its own
// logger.
func (d *Driver) SetLogger(l *slog.Logger) { d.log.set(l) }

// Close stops the Driver's background clean-ups and, if the Driver
// connected the client itself (Open), disconnects it. Holds stay in the
// collection until released or expired.
func (d *Driver) Close() error {
	return d.life.Close(func() error {
		if !d.owned {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), disconnectTimeout)
		defer cancel()
		return d.client.Disconnect(ctx)
	})
}

// Mode reports how the Driver stores locks, once it has been used:
// ModeUpdate (MongoDB 4.2+: atomic updates on the server's clock) or
// ModeHistory (servers without update pipelines, such as FerretDB 1.x);
// "" before first use.
func (d *Driver) Mode() string {
	m, _ := d.modeSeen.Load().(string)
	return m
}

// ready checks that the Driver is open and, on first use, learns about the
// deployment: a replica set or sharded cluster gets majority writes, and a
// server without update pipelines gets the estimated clock.
func (d *Driver) ready(ctx context.Context) error {
	if err := d.life.Err(); err != nil {
		return err
	}
	return d.setup.Run(ctx, d.life, d.learn)
}

// learn is ready's set-up.
func (d *Driver) learn(ctx context.Context) error {
	info, err := d.measureClock(ctx)
	if err != nil {
		return err
	}
	copts := options.Collection()
	if info.SetName != "" || info.Msg == "isdbgrid" {
		d.majority = true
		copts.SetWriteConcern(writeconcern.Majority())
	}
	coll := d.client.Database(d.database).Collection(d.collName, copts)
	// An update pipeline on a document that cannot exist (lock _ids are
	// strings) writes nothing, and tells whether the server has them:
	// FerretDB 1.x refuses it, and its findAndModify is not atomic.
	probe := bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "probed_at", Value: "$$NOW"}}}}}
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "golocker", Value: "probe"}}}}, probe)
	var se mongo.ServerError
	mode := ModeUpdate
	d.coll = coll
	switch {
	case err == nil:
		d.store = updateStore{d}
	case errors.As(err, &se) && definite(err):
		mode = ModeHistory
		d.store = historyStore{d}
	default:
		return err
	}
	d.modeSeen.Store(mode)
	return nil
}

// definite reports whether err is the server's own refusal of a request,
// which then changed nothing. A network error, a timeout, a cancelled ctx
// or a write concern error (the write may have been applied on the
// primary) leave the outcome unknown.
func definite(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		mongo.IsNetworkError(err) || mongo.IsTimeout(err) {
		return false
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		return we.WriteConcernError == nil
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code != 0 && !ce.HasErrorLabel("RetryableWriteError")
	}
	var se mongo.ServerError
	return errors.As(err, &se)
}

func (d *Driver) newLease(r backend.Request, fence int64, start time.Time) *lease {
	return &lease{Grant: driverkit.GrantOf(r, fence, start), d: d}
}

func checkRequest(r backend.Request) error {
	if err := backend.CheckName(r.Name); err != nil {
		return err
	}
	if r.Owner == "" || len(r.Owner) > maxOwnerLen {
		return fmt.Errorf("mongolock: owner of %d bytes: want 1 to %d", len(r.Owner), maxOwnerLen)
	}
	if r.TTL <= 0 {
		return backend.ErrInvalidTTL
	}
	return nil
}

// logSink is the Go driver's log sink: it sends the driver's messages to
// the logger of SetLogger (none until then).
type logSink struct{ p atomic.Pointer[slog.Logger] }

func (s *logSink) set(l *slog.Logger) { s.p.Store(l) }

// Info implements options.LogSink.
func (s *logSink) Info(level int, msg string, kv ...any) {
	if l := s.p.Load(); l != nil {
		l.Debug("mongolock: mongo driver: "+msg, kv...)
	}
}

// Error implements options.LogSink.
func (s *logSink) Error(err error, msg string, kv ...any) {
	if l := s.p.Load(); l != nil {
		l.Warn("mongolock: mongo driver: "+msg, append(kv, "err", err)...)
	}
}
