package otellocker

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ErrInvalidOption is returned by NewObserver for an option it cannot
// accept.
var ErrInvalidOption = errors.New("otellocker: invalid option")

// Option configures NewObserver.
type Option func(*config) error

type config struct {
	mp    metric.MeterProvider
	tp    trace.TracerProvider
	label func(string) string
	raw   bool
}

// WithMeterProvider sets the MeterProvider of the instruments (default:
// the global one, otel.GetMeterProvider()).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return fmt.Errorf("%w: nil MeterProvider", ErrInvalidOption)
		}
		c.mp = mp
		return nil
	}
}

// WithTracerProvider sets the TracerProvider of the spans (default: the
// global one, otel.GetTracerProvider()).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return fmt.Errorf("%w: nil TracerProvider", ErrInvalidOption)
		}
		c.tp = tp
		return nil
	}
}

// WithNameLabel adds the attribute golocker.lock.name to every
// measurement and span, with the value f returns for the lock's name. f
// must map the names to a small, bounded set (a prefix, the name of a
// template such as "orders/{id}"), since each value makes a time series
// of every instrument; it must return the same value for the same name,
// and be quick and safe for concurrent use.
func WithNameLabel(f func(name string) string) Option {
	return func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil name label function", ErrInvalidOption)
		}
		c.label = f
		return nil
	}
}

// WithLockNames adds the attribute golocker.lock.name with each lock's
// own name. Use it only when the names are few and fixed: every name makes
// a time series of every instrument.
func WithLockNames() Option {
	return func(c *config) error {
		c.raw = true
		return nil
	}
}
