// Package keys names the Redis keys of redislock's locks, for the Driver
// and for RedLock.
package keys

import (
	"fmt"
	"strings"

	"github.com/golocker/locker/internal/driverkit"
)

// DefaultPrefix starts the Redis key of every lock unless an option (URL
// parameter key_prefix) says otherwise.
const DefaultPrefix = "golocker:"

// maxPrefixLen bounds a prefix; a prefix is a namespace, not data.
const maxPrefixLen = 256

// Keys names the Redis keys of locks under one prefix.
//
// The lock "orders/42" under the prefix "golocker:" uses:
//
//	golocker:{orders/42}           the hash {owner, token}, expiring with the lease
//	golocker:{orders/42}:fence     the fencing counter, never expiring
//	golocker:{orders/42}:queue     the waiting owners, oldest first (a list)
//	golocker:{orders/42}:waiters   each waiting owner's deadline and lease (a hash)
//
// The name is the hash tag, so all keys live in one Cluster slot and the
// scripts may touch them together. In the name, '%', '{' and '}' are
// written %25, %7B and %7D, so that the tag ends where the name does (a
// '}' would end it early, and a name starting with '}' would make an empty
// tag, which Redis ignores) and a key reads back to one name.
type Keys struct{ Prefix string }

// Lock returns the key of the lock name: the hash that holds the owner and
// the fencing token while the lock is held.
func (k Keys) Lock(name string) string { return k.Prefix + "{" + escapeName(name) + "}" }

// Fence returns the key of the fencing counter of the lock key lockKey.
func Fence(lockKey string) string { return lockKey + ":fence" }

// Queued returns the keys of the lock key lockKey and of its queue, in
// the order of the KEYS of the scripts that keep a queue: the lock, the
// fence counter, the queue and the waiters.
func Queued(lockKey string) []string {
	return []string{lockKey, Fence(lockKey), lockKey + ":queue", lockKey + ":waiters"}
}

// Name returns the lock name of a lock key, or false if key is not one.
func (k Keys) Name(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.Prefix+"{")
	if !ok {
		return "", false
	}
	esc, ok := strings.CutSuffix(rest, "}")
	if !ok || strings.ContainsAny(esc, "{}") {
		return "", false
	}
	return unescapeName(esc)
}

// Pattern returns the SCAN MATCH pattern of the lock keys whose names
// start with prefix.
func (k Keys) Pattern(prefix string) string {
	return globEscape(k.Prefix+"{"+escapeName(prefix)) + "*"
}

// escapeName and unescapeName map names to the part of a key between the
// braces of its hash tag and back: '%', '{' and '}' are percent-encoded.
func escapeName(name string) string { return driverkit.Escape(name, "{}") }

func unescapeName(s string) (string, bool) { return driverkit.Unescape(s, "{}") }

// globEscape quotes the characters that SCAN MATCH treats as a pattern.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ValidPrefix reports why p cannot be a key prefix, or nil.
func ValidPrefix(p string) error {
	switch {
	case len(p) > maxPrefixLen:
		return fmt.Errorf("key prefix of %d bytes, more than %d", len(p), maxPrefixLen)
	case strings.ContainsAny(p, "{}"):
		return fmt.Errorf("key prefix %q contains '{' or '}', which would break the keys' hash tag", p)
	}
	return nil
}
