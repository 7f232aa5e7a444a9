package redlock

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker"
	"github.com/golocker/locker/internal/driverkit"
	"github.com/golocker/locker/redislock/internal/config"
)

// Scheme is the URL scheme this package registers with package locker:
// redlock://[user:pass@]h1:6379,h2:6379,h3:6379[/db].
const Scheme = "redlock"

// DefaultOpenTimeout bounds Open when its ctx has no deadline.
const DefaultOpenTimeout = driverkit.OpenTimeout

// opener opens redlock URLs.
var opener = driverkit.Opener[*config.URL, config.Options, Option, *Driver]{Pkg: "redislock", Parse: parse, Defaults: config.Defaults, Open: open}

func init() { locker.Register(Scheme, opener.ForLocker) }

// Open returns the Driver for rawURL, a redlock:// URL, as locker.Open
// would use it. It creates a go-redis client per instance, which the
// Driver's Close closes, and checks that a majority of the instances
// answer. opts apply after the URL's parameters.
//
// Open returns within DefaultOpenTimeout when ctx has no deadline (a
// deadline of ctx governs instead), and its error names the cause. The
// password never appears in an error.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Driver, error) {
	return opener.OpenRaw(ctx, rawURL, opts)
}

// parse reads a redlock URL; the other schemes of the shared parser are
// redislock's.
func parse(u *url.URL) (*config.URL, error) {
	cfg, err := config.ParseURL(u)
	if err == nil && cfg.Scheme != Scheme {
		return nil, config.BadURL("scheme %q is not %s (redislock.Open opens it)", u.Scheme, Scheme)
	}
	return cfg, err
}

// open makes the Driver of a URL's cfg, with options o.
func open(ctx context.Context, cfg *config.URL, o config.Options) (*Driver, error) {
	ctx, cancel := driverkit.OpenContext(ctx, DefaultOpenTimeout)
	defer cancel()
	if err := o.Refuse("RedLock", "WithWaitReplicas", "WithBatch", "WithKeyspaceEvents"); err != nil {
		return nil, err
	}
	dials := config.NewDialLog(o.Dialer)
	clients := make([]redis.UniversalClient, len(cfg.Addrs))
	for i, a := range cfg.Addrs {
		clients[i] = cfg.InstanceClient(a, dials)
	}
	rl := newDriver(clients, o, true)
	if err := rl.ping(ctx); err != nil {
		_ = rl.Close()
		return nil, err
	}
	return rl, nil
}

// ping checks that a majority of the instances answer.
func (rl *Driver) ping(ctx context.Context) error {
	results := rl.each(ctx, 10*time.Second, func(ctx context.Context, _ int, c redis.UniversalClient) (any, error) {
		return nil, c.Ping(ctx).Err()
	})
	var errs []error
	for i, r := range results {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", config.AddrOf(rl.clients[i]), config.ConnectError(r.err, false)))
		}
	}
	if len(errs) > len(rl.clients)-rl.quorum {
		return fmt.Errorf("redislock: %d of %d RedLock instances do not answer PING: %w", len(errs), len(rl.clients), joinErrors(errs))
	}
	return nil
}
