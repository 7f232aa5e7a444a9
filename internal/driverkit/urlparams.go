package driverkit

// URL parts that every driver writes the same way: a comma-separated list
// of hosts with a default port, and a query whose parameters must all be
// known and given once. Errors say what is wrong without the scheme or the
// password; the driver wraps them with BadURL.

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Hosts splits "h1[:p1],h2[:p2],..." into host:port addresses, with
// defaultPort where a host has none. IPv6 hosts are written in brackets. An
// empty list, an empty host, a bad port and a host given twice are errors.
func Hosts(list, defaultPort string) ([]string, error) {
	if list == "" {
		return nil, fmt.Errorf("no host")
	}
	var addrs []string
	for _, h := range strings.Split(list, ",") {
		if h == "" {
			return nil, fmt.Errorf("empty host in %q", list)
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), defaultPort
			if strings.Contains(host, ":") && !strings.HasPrefix(h, "[") {
				return nil, fmt.Errorf("bad host %q", h)
			}
		}
		if host == "" {
			return nil, fmt.Errorf("empty host name in %q", h)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("bad port in %q", h)
		}
		addr := net.JoinHostPort(host, port)
		if slices.Contains(addrs, addr) {
			return nil, fmt.Errorf("host %s given twice", addr)
		}
		addrs = append(addrs, addr)
	}
	return addrs, nil
}

// Query parses raw and checks that every parameter is in known and given
// once. It returns the values and the parameter names, sorted, so that a
// driver reading them in that order reports the same first error every
// time.
func Query(raw string, known []string) (url.Values, []string, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("bad query: %v", err)
	}
	keys := make([]string, 0, len(q))
	for k, vs := range q {
		if !slices.Contains(known, k) {
			return nil, nil, fmt.Errorf("unknown parameter %q (known: %s)", k, strings.Join(known, ", "))
		}
		if len(vs) != 1 {
			return nil, nil, fmt.Errorf("parameter %q given %d times", k, len(vs))
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return q, keys, nil
}
