package mongoserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"

	"github.com/golocker/locker/internal/testserver"
)

func TestMongo(t *testing.T) {
	var trace testserver.ServerTrace
	t.Run("server", func(t *testing.T) {
		begin := time.Now()
		srv := StartMongo(t)
		t.Logf("mongo server ready in %v (FerretDB: %v, replica set: %q)",
			time.Since(begin).Round(time.Millisecond), srv.FerretDB, srv.ReplicaSet)
		defer func() { trace = testserver.TraceOf(srv.Proc) }()

		t.Run("documents go in and come out", func(t *testing.T) {
			coll := mongoCollection(t, srv.NewDatabase(t), "things")
			ctx := mongoTestContext(t)
			if _, err := coll.InsertOne(ctx, bson.M{"_id": "a", "n": 1}); err != nil {
				t.Fatalf("InsertOne: %v", err)
			}
			var got struct{ N int }
			if err := coll.FindOne(ctx, bson.M{"_id": "a"}).Decode(&got); err != nil {
				t.Fatalf("FindOne: %v", err)
			}
			if got.N != 1 {
				t.Fatalf("FindOne returned n=%d, want 1", got.N)
			}
		})

		t.Run("a unique index rejects a duplicate", func(t *testing.T) {
			coll := mongoCollection(t, srv.NewDatabase(t), "names")
			ctx := mongoTestContext(t)
			_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{
				Keys:    bson.D{{Key: "name", Value: 1}},
				Options: options.Index().SetUnique(true),
			})
			if err != nil {
				t.Fatalf("CreateOne index: %v", err)
			}
			if _, err := coll.InsertOne(ctx, bson.M{"name": "x"}); err != nil {
				t.Fatalf("first insert: %v", err)
			}
			_, err = coll.InsertOne(ctx, bson.M{"name": "x"})
			if !mongo.IsDuplicateKeyError(err) {
				t.Fatalf("second insert: got %v, want a duplicate key error", err)
			}
		})

		t.Run("of concurrent upserts on one _id exactly one wins", func(t *testing.T) {
			testMongoUpsertRace(t, srv)
		})

		t.Run("URI names the test's database", func(t *testing.T) {
			db := srv.NewDatabase(t)
			u, err := url.Parse(db.URI)
			if err != nil || u.Path != "/"+db.Name {
				t.Fatalf("URI %q: path is not /%s (err %v)", db.URI, db.Name, err)
			}
			if db.Name == srv.NewDatabase(t).Name {
				t.Fatalf("two databases share the name %q", db.Name)
			}
		})

		if srv.Proc != nil {
			t.Run("a paused server answers nothing until resumed", func(t *testing.T) {
				coll := mongoCollection(t, srv.NewDatabase(t), "p")
				ctx := mongoTestContext(t)
				if _, err := coll.InsertOne(ctx, bson.M{"_id": 1}); err != nil {
					t.Fatalf("InsertOne: %v", err)
				}
				if err := srv.Pause(); err != nil {
					t.Fatalf("Pause: %v", err)
				}
				short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				err := coll.FindOne(short, bson.M{"_id": 1}).Err()
				cancel()
				if rerr := srv.Resume(); rerr != nil {
					t.Fatalf("Resume: %v", rerr)
				}
				if err == nil {
					t.Fatalf("FindOne on a paused server succeeded")
				}
				if err := testserver.PollUntil(ctx, func(ctx context.Context) error {
					return coll.FindOne(ctx, bson.M{"_id": 1}).Err()
				}); err != nil {
					t.Fatalf("FindOne after Resume: %v", err)
				}
			})

			t.Run("documents survive a restart", func(t *testing.T) {
				coll := mongoCollection(t, srv.NewDatabase(t), "kept")
				ctx := mongoTestContext(t)
				if _, err := coll.InsertOne(ctx, bson.M{"_id": "k"}); err != nil {
					t.Fatalf("InsertOne: %v", err)
				}
				begin := time.Now()
				if err := srv.Restart(ctx); err != nil {
					t.Fatalf("Restart: %v", err)
				}
				t.Logf("restarted in %v", time.Since(begin).Round(time.Millisecond))
				err := testserver.PollUntil(ctx, func(ctx context.Context) error {
					return coll.FindOne(ctx, bson.M{"_id": "k"}).Err()
				})
				if err != nil {
					t.Fatalf("after restart: %v", err)
				}
			})
		}
	})
	testserver.RequireProcsGone(t, trace)
}

// testMongoUpsertRace has several owners try to take one lock document at
// once, as the Mongo driver's acquire does: findOneAndUpdate with upsert on
// {_id: name, owner: free}. The document's unique _id lets one insert win;
// the others must fail with a duplicate key error (or match nothing), and
// a later taker must fail the same way while the lock is held.
func testMongoUpsertRace(t *testing.T, srv *MongoServer) {
	coll := mongoCollection(t, srv.NewDatabase(t), "locks")
	ctx := mongoTestContext(t)
	acquire := func(owner string) error {
		filter := bson.M{"_id": "orders/42", "owner": nil}
		update := bson.M{"$set": bson.M{"owner": owner}, "$inc": bson.M{"fence": 1}}
		opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
		var doc struct {
			Owner string
			Fence int64
		}
		if err := coll.FindOneAndUpdate(ctx, filter, update, opts).Decode(&doc); err != nil {
			return err
		}
		if doc.Owner != owner || doc.Fence < 1 {
			return fmt.Errorf("acquired document %+v", doc)
		}
		return nil
	}

	const owners = 8
	wins, errs := testserver.Race(owners, func(i int) error { return acquire(fmt.Sprintf("owner-%d", i)) },
		func(err error) bool { return mongo.IsDuplicateKeyError(err) || errors.Is(err, mongo.ErrNoDocuments) },
		func(i int, err error) { t.Errorf("owner %d: unexpected error %v", i, err) })
	if wins != 1 {
		t.Fatalf("%d owners acquired the lock, want exactly 1 (errors: %v)", wins, errs)
	}
	if err := acquire("late"); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("acquire of a held lock: got %v, want a duplicate key error", err)
	}
}

func mongoCollection(t *testing.T, db *MongoDatabase, name string) *mongo.Collection {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(db.URI).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatalf("mongo.Connect: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Disconnect(ctx)
	})
	return c.Database(db.Name).Collection(name)
}

func mongoTestContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestMongoFromEnv(t *testing.T) {
	srv := StartMongo(t)
	if srv.Proc == nil {
		t.Skipf("%s is set already", EnvMongoURI)
	}
	t.Run("a server named by a URI is used", func(t *testing.T) {
		t.Setenv(EnvMongoURI, srv.URI+"ignored")
		env := StartMongo(t)
		if env.Proc != nil || env.Addr != srv.Addr {
			t.Fatalf("got a server at %s (started here: %v), want the one at %s", env.Addr, env.Proc != nil, srv.Addr)
		}
		coll := mongoCollection(t, env.NewDatabase(t), "c")
		if _, err := coll.InsertOne(mongoTestContext(t), bson.M{"x": 1}); err != nil {
			t.Fatalf("InsertOne: %v", err)
		}
	})
	t.Run("an unreachable server's error hides the password", func(t *testing.T) {
		testserver.CheckEnvErrorHidesPassword(t, EnvMongoURI, "mongodb://u:sekrit-pw@127.0.0.1:1/", func(t testserver.TB) { StartMongo(t) })
	})
}

// TestBuildHelper builds the FerretDB helper, or finds it built, where
// StartMongo would need it. make helpers runs it before the other tests,
// so that a first build (a minute or more of both cores) does not slow the
// servers of timing-sensitive tests that run at the same time.
func TestBuildHelper(t *testing.T) {
	if mongodPath() != "" {
		t.Skip("mongod is installed: StartMongo does not use FerretDB")
	}
	begin := time.Now()
	bin, _, err := ferretdbBuild()
	if err != nil {
		testserver.Unavailable(t, "cannot build the FerretDB helper: %v", err)
	}
	t.Logf("FerretDB helper %s ready in %v", bin, time.Since(begin).Round(time.Millisecond))
}

// tracked holds the server processes these tests started: TestMain fails
// the run if one of them, or a goroutine, outlived the tests.
var tracked testserver.Tracker

func TestMain(m *testing.M) { os.Exit(tracked.MainChecked(m, func() error { return goleak.Find() })) }
