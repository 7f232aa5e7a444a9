package redislock

import (
	"fmt"
	"strings"

	"github.com/golocker/locker/internal/driverkit"
)

// DefaultKeyPrefix starts the Redis key of every lock unless WithKeyPrefix
// (URL parameter key_prefix) says otherwise.
const DefaultKeyPrefix = "golocker:"

// maxKeyPrefixLen bounds WithKeyPrefix; a prefix is a namespace, not data.
const maxKeyPrefixLen = 256

// keys names the Redis keys and channel of locks under one prefix.
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
type keys struct{ prefix string }

func (k keys) lock(name string) string { return k.prefix + "{" + escapeName(name) + "}" }

func fenceKey(lockKey string) string { return lockKey + ":fence" }

// scriptKeys returns the KEYS of the scripts that include queue.lua.
func scriptKeys(lockKey string) []string {
	return []string{lockKey, fenceKey(lockKey), lockKey + ":queue", lockKey + ":waiters"}
}

// name returns the lock name of a lock key, or false if key is not one.
func (k keys) name(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.prefix+"{")
	if !ok {
		return "", false
	}
	esc, ok := strings.CutSuffix(rest, "}")
	if !ok || strings.ContainsAny(esc, "{}") {
		return "", false
	}
	return unescapeName(esc)
}

// pattern returns the SCAN MATCH pattern of the lock keys whose names
// start with prefix.
func (k keys) pattern(prefix string) string {
	return globEscape(k.prefix+"{"+escapeName(prefix)) + "*"
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

func validKeyPrefix(p string) error {
	switch {
	case len(p) > maxKeyPrefixLen:
		return fmt.Errorf("key prefix of %d bytes, more than %d", len(p), maxKeyPrefixLen)
	case strings.ContainsAny(p, "{}"):
		return fmt.Errorf("key prefix %q contains '{' or '}', which would break the keys' hash tag", p)
	}
	return nil
}
