package mongolock

import (
	"errors"
	"fmt"
	"strings"
)

// Defaults of a Driver.
const (
	DefaultDatabase   = "golocker"
	DefaultCollection = "golocker_locks"
)

// Option configures a Driver (New, Open).
type Option func(*config) error

type config struct {
	database   string
	collection string
}

func defaultConfig() config {
	return config{database: DefaultDatabase, collection: DefaultCollection}
}

func (o *config) apply(opts []Option) error {
	for _, f := range opts {
		if f == nil {
			continue
		}
		if err := f(o); err != nil {
			return err
		}
	}
	return nil
}

// errOption is wrapped by every invalid option value.
var errOption = errors.New("mongolock: invalid option")

// WithDatabase sets the database of the lock collection (default
// DefaultDatabase, "golocker"; a URL names it in its path).
func WithDatabase(name string) Option {
	return func(o *config) error {
		if name == "" || len(name) > 63 || strings.ContainsAny(name, "/\\. \"$*<>:|?\x00") {
			return fmt.Errorf("%w: database %q: want 1 to 63 characters, none of /\\. \"$*<>:|?", errOption, name)
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
			return fmt.Errorf("%w: collection %q: want 1 to 200 characters, no $ and not system.*", errOption, name)
		}
		o.collection = name
		return nil
	}
}
