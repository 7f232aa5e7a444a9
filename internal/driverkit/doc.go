// Package driverkit is what golocker's drivers share beyond the SPI: the
// scrubbing of secrets from URLs and errors, the errors of bad URLs and
// options, Open's parsing and wrapping of a URL and an Opener that applies
// a URL's options, option application and the options every dialing
// driver has (Common, WithDialer, Checked), grace contexts for clean-up
// after a cancelled call, calls bounded by a ctx they ignore (Within), the
// bound of Open and the causes of failed connections, named once for every
// driver, with probes beside clients that retry silently (OpenTimeout,
// Cause, ConnectError, Reach), TLS
// settings from URL parameters, URL hosts and queries (ParseHostsURL), the
// escaping of lock names into store keys and paths, a session driver's
// capabilities, errors and retries of an acquisition (Attempts), the
// grouping of a batch renewal (Batches), the Grant a polling store's lease
// embeds, and the dial function that tests (conformance.FaultNet) hand to
// a driver. It uses the standard library only, so a driver module pays
// nothing for it.
package driverkit
