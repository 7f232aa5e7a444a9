// Package redlock is the RedLock driver of package locker: one lock over
// N independent Redis instances, after the Redlock algorithm of the Redis
// documentation.
//
// Most code opens it by URL and uses package locker; importing package
// redislock registers redlock:// too, so a program that moves from
// redis:// to redlock:// changes its URL, not its imports:
//
//	import _ "github.com/golocker/locker/redislock" // or this package
//
//	c, err := locker.Open(ctx, "redlock://:secret@h1:6379,h2:6379,h3:6379")
//
// or builds it from go-redis clients it already has, one per instance:
//
//	d, err := redlock.New([]redis.UniversalClient{rdb1, rdb2, rdb3})
//	c, err := locker.New(d)
//
// # URLs
//
//	redlock://[user:password@]h1[:6379],h2[:6379],h3[:6379][/db]   at least 3 instances
//
// The user and password are those of every instance. The last host needs
// its port (a limit of net/url). Query parameters, all optional; an
// unknown one is an error:
//
//	key_prefix=golocker:       prefix of every key (WithKeyPrefix)
//	dial_timeout=5s, read_timeout=3s, write_timeout=3s, pool_size=N   go-redis settings
//	instance_timeout=          each instance's bound (WithInstanceTimeout)
//
// Clients opened from a URL have ContextTimeoutEnabled, so a ctx deadline
// bounds every call, and are closed by the Driver's Close.
//
// # The algorithm
//
// The acquire script runs on all the instances at once, each bounded by a
// short timeout; the lock is held if a majority granted it and the time
// that took leaves a validity (TTL − elapsed − drift, drift = TTL/100 +
// 2ms) above zero. Otherwise it is released on every instance that
// granted it or did not answer. Renewal and release also need a majority.
// Losing fewer than half of the instances loses no lock. The keys are
// redislock's (golocker:{name}, a hash {owner, token}, expiring with the
// lease), without the queue.
//
// # Capabilities
//
// Expiry, CrossProcess, backend.Inspector (Holds lists the locks a
// majority holds for one owner; ForceRelease deletes on every instance)
// and backend.LogSetter; no Fencing (independent instances have no common
// counter: Token is 0), no Notify (package locker retries with back-off),
// no LostSignal (the next renewal finds a lost hold).
//
// RedLock avoids the replication problem of a Redis master and its
// replicas (there are none), but its safety rests on bounded clock drift
// and process pauses, and it has no fencing.
//
// # Logs
//
// go-redis has one logger per process, which prints on stderr; a Driver
// does not change it. redislock.CaptureGoRedisLog sends its messages to
// the loggers of the open drivers, this package's included.
package redlock
