// Package driverkit is what golocker's drivers share beyond the SPI: the
// scrubbing of secrets from URLs and errors, the errors of bad URLs and
// options, Open's parsing and wrapping of a URL, option application, grace
// contexts for clean-up after a cancelled call, TLS settings from URL
// parameters, URL hosts and queries (ParseHostsURL), the escaping of lock
// names into store keys and paths, the retries of a session driver's
// acquisition (Attempts), the Grant a polling store's lease embeds, and
// the dial function that tests (conformance.FaultNet) hand to a driver. It uses the
// standard library only, so a driver module pays nothing for it.
package driverkit
