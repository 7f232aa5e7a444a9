package driverkit

import "slices"

// Common is what the options of every driver that dials its store hold:
// the dialer of the clients Open creates, and the names of the options
// set, so that a constructor can refuse those that do not apply to it. A
// driver's options struct embeds it.
type Common struct {
	Dialer DialFunc // set by WithDialer; nil: the client's own dialing
	set    []string
}

// Kit returns c: through the options struct that embeds c, the options of
// this package reach it.
func (c *Common) Kit() *Common { return c }

// Set records that the option name (e.g. "WithDialer") was given.
func (c *Common) Set(name string) { c.set = append(c.set, name) }

// Refuse returns a BadOption error of driver pkg if one of names was set:
// "<name> does not apply to <to>".
func (c *Common) Refuse(pkg, to string, names ...string) error {
	for _, s := range c.set {
		if slices.Contains(names, s) {
			return BadOption(pkg, "%s does not apply to %s", s, to)
		}
	}
	return nil
}

// WithDialer is the WithDialer option of driver pkg, whose options struct
// T embeds Common: it sets Common.Dialer and records "WithDialer"; a nil
// dial is a BadOption error.
func WithDialer[T any, P interface {
	*T
	Kit() *Common
}](pkg string, dial DialFunc) func(*T) error {
	return func(o *T) error {
		if dial == nil {
			return BadOption(pkg, "nil dialer")
		}
		c := P(o).Kit()
		c.Dialer = dial
		c.Set("WithDialer")
		return nil
	}
}

// Checked returns an option of driver pkg that sets the field of T that
// field points to to what check makes of v; check's error is a BadOption
// error.
func Checked[T, V any](pkg string, v V, check func(V) (V, error), field func(*T) *V) func(*T) error {
	return func(o *T) error {
		c, err := check(v)
		if err != nil {
			return BadOption(pkg, "%v", err)
		}
		*field(o) = c
		return nil
	}
}
