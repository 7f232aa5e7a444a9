package mongolock

import (
	"context"
	"net"
	"strings"

	"github.com/golocker/locker/internal/driverkit"
)

// Defaults of a Driver.
const (
	DefaultDatabase   = "golocker"
	DefaultCollection = "golocker_locks"
)

// Option configures a Driver (New, Open). An invalid value is an error
// that matches locker.ErrInvalidOption.
type Option func(*config) error

type config struct {
	database   string
	collection string
	dialer     driverkit.DialFunc
}

func defaultConfig() config {
	return config{database: DefaultDatabase, collection: DefaultCollection}
}

// WithDatabase sets the database of the lock collection (default
// DefaultDatabase, "golocker"; a URL names it in its path).
func WithDatabase(name string) Option {
	return func(o *config) error {
		if name == "" || len(name) > 63 || strings.ContainsAny(name, "/\\. \"$*<>:|?\x00") {
			return driverkit.BadOption("mongolock", "database %q: want 1 to 63 characters, none of /\\. \"$*<>:|?", name)
		}
		o.database = name
		return nil
	}
}

// WithCollection sets the lock collection (default DefaultCollection,
// "golocker_locks"). URL parameter: collection.
func WithCollection(name string) Option {
	return func(o *config) error {
		if name == "" || len(name) > 200 || strings.ContainsAny(name, "$\x00") || strings.HasPrefix(name, "system.") {
			return driverkit.BadOption("mongolock", "collection %q: want 1 to 200 characters, no $ and not system.*", name)
		}
		o.collection = name
		return nil
	}
}

// WithDialer makes Open connect through dial (a proxy, a tunnel, or
// conformance.FaultNet in tests) instead of a plain TCP dial. It is an
// error with New, whose *mongo.Client is connected already.
func WithDialer(dial func(ctx context.Context, network, address string) (net.Conn, error)) Option {
	return func(o *config) error {
		if dial == nil {
			return driverkit.BadOption("mongolock", "WithDialer(nil)")
		}
		o.dialer = dial
		return nil
	}
}
