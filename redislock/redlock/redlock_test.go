package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver/redisserver"
	"github.com/golocker/locker/redislock"
	"github.com/golocker/locker/redislock/internal/config"
	"github.com/golocker/locker/redislock/internal/keys"
	"github.com/golocker/locker/redislock/redlock"
)

// TestMajority: a lock needs a majority of the instances. Losing one of
// three changes nothing; losing two makes acquisitions fail with an error
// (not "held", not a hang); tokens are 0.
func TestMajority(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, time.Minute)
	rs := redisserver.RedisInstances(t, 3) // its own: the test kills two of them
	c := openClient(t, urlOf(rs), locker.WithTTL(2*time.Second))
	m := c.NewMutex("majority")
	lockUnlock := func() error {
		if err := m.Lock(ctx); err != nil {
			return err
		}
		if m.Token() != 0 {
			t.Errorf("RedLock Token = %d, want 0", m.Token())
		}
		return m.Unlock(ctx)
	}
	if err := lockUnlock(); err != nil {
		t.Fatalf("with every instance: %v", err)
	}
	if err := rs[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := lockUnlock(); err != nil {
		t.Fatalf("with one instance of three down: %v", err)
	}
	// A hold taken with two instances survives renewals.
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Lost():
		t.Fatal("a hold on two instances of three was lost")
	case <-time.After(3 * time.Second):
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock on two instances of three: %v", err)
	}
	if err := rs[1].Kill(); err != nil {
		t.Fatal(err)
	}
	ok, err := m.TryLock(ctx)
	if ok || err == nil || errors.Is(err, locker.ErrLost) {
		t.Fatalf("TryLock with two instances of three down = %v, %v; want an error", ok, err)
	}
	t.Logf("with two instances down: %v", err)
}

// TestUndoesAFailedQuorum: when only a minority grants the lock, those
// grants are released at once instead of blocking the name until they
// expire.
func TestUndoesAFailedQuorum(t *testing.T) {
	t.Parallel()
	ctx := drivertest.Context(t, time.Minute)
	rs := instances.Get(t)
	url := urlOf(rs)
	d := drivertest.Open(t, url, func(ctx context.Context) (*redlock.Driver, error) { return redlock.Open(ctx, url) })
	name := "undo/" + t.Name()
	key := d.Key(name)
	// Another owner holds the lock on two instances of three.
	for _, r := range rs[:2] {
		if _, err := r.Do(ctx, "HSET", key, "owner", "someone-else", "token", "0"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Do(ctx, "PEXPIRE", key, "60000"); err != nil {
			t.Fatal(err)
		}
	}
	m := openClient(t, url).NewMutex(name)
	if ok, err := m.TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock against a majority held elsewhere = %v, %v; want false, nil", ok, err)
	}
	if n, err := rs[2].Do(ctx, "EXISTS", key); err != nil || n != int64(0) {
		t.Errorf("EXISTS on the instance that granted = %v, %v; want 0: the minority grant was not released", n, err)
	}
	for _, r := range rs[:2] {
		if _, err := r.Do(ctx, "DEL", key); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := m.TryLock(ctx); !ok || err != nil {
		t.Fatalf("TryLock once free = %v, %v", ok, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNewValidates(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	three := []redis.UniversalClient{rdb, rdb, rdb}
	for _, tc := range []struct {
		name      string
		err       error
		badOption bool
	}{
		{"two instances", must(redlock.New(three[:2])), false},
		{"nil instance", must(redlock.New([]redis.UniversalClient{rdb, nil, rdb})), false},
		{"wait replicas", must(redlock.New(three, redislock.WithWaitReplicas(1, time.Second))), true},
		{"zero instance timeout", must(redlock.New(three, redlock.WithInstanceTimeout(0))), true},
		{"batch", must(redlock.New(three, redislock.WithBatch(2))), true},
		{"keyspace events", must(redlock.New(three, redislock.WithKeyspaceEvents(true))), true},
		{"prefix with a brace", must(redlock.New(three, redlock.WithKeyPrefix("a}"))), true},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if got := errors.Is(tc.err, locker.ErrInvalidOption); got != tc.badOption {
			t.Errorf("%s: %v; errors.Is(ErrInvalidOption) = %v, want %v", tc.name, tc.err, got, tc.badOption)
		}
	}
	d, err := redlock.New(three, redlock.WithKeyPrefix("app:"), redlock.WithInstanceTimeout(time.Second))
	if err != nil {
		t.Fatalf("New with its own options: %v", err)
	}
	if got := d.Key("a"); got != "app:{a}" {
		t.Errorf("Key with WithKeyPrefix(app:) = %q", got)
	}
	if err := d.Close(); err != nil {
		t.Error(err)
	}
}

// TestOpenRefusesOtherSchemes: Open takes redlock URLs only, and an
// option that does not apply to RedLock.
func TestOpenRefusesOtherSchemes(t *testing.T) {
	ctx := drivertest.Context(t, time.Minute)
	for _, raw := range []string{"redis://127.0.0.1:1", "redis+cluster://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"} {
		if d, err := redlock.Open(ctx, raw); err == nil || !errors.Is(err, locker.ErrBadURL) {
			t.Errorf("Open(%s) = %v, %v; want a bad URL", raw, d, err)
		}
	}
	url := urlOf(instances.Get(t))
	if _, err := redlock.Open(ctx, url, redislock.WithBatch(1)); !errors.Is(err, locker.ErrInvalidOption) {
		t.Errorf("Open with WithBatch = %v, want an invalid option", err)
	}
}

// TestConstants: the exported constants are those of the code they stand
// for.
func TestConstants(t *testing.T) {
	if redlock.DefaultKeyPrefix != keys.DefaultPrefix || redislock.DefaultKeyPrefix != keys.DefaultPrefix {
		t.Errorf("DefaultKeyPrefix %q, redislock's %q, the keys' %q", redlock.DefaultKeyPrefix, redislock.DefaultKeyPrefix, keys.DefaultPrefix)
	}
	if redlock.MinInstances != config.MinRedLockInstances || redlock.Scheme != config.SchemeRedLock {
		t.Errorf("MinInstances %d, Scheme %q; the URL parser's %d, %q", redlock.MinInstances, redlock.Scheme, config.MinRedLockInstances, config.SchemeRedLock)
	}
	for _, s := range [][2]string{
		{redislock.Scheme, config.Scheme}, {redislock.SchemeTLS, config.SchemeTLS},
		{redislock.SchemeSentinel, config.SchemeSentinel}, {redislock.SchemeCluster, config.SchemeCluster},
	} {
		if s[0] != s[1] {
			t.Errorf("redislock's scheme %q, the URL parser's %q", s[0], s[1])
		}
	}
}

// TestOpenHidesThePassword opens RedLock URLs with a password that fail
// in every way, through locker.Open and through Open.
func TestOpenHidesThePassword(t *testing.T) {
	t.Parallel()
	const pw = "s3cr3t-pw"
	drivertest.OpenFailures(t, pw, time.Second, redlock.Open,
		"redlock://u:"+pw+"@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?dial_timeout=100ms",
		"redlock://u:"+pw+"@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?unknown=1",
		"redlock://u:"+pw+"@127.0.0.1:1,127.0.0.1:2/x",
	)
}

func must[T any](_ T, err error) error { return err }
