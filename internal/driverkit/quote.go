package driverkit

import (
	"strconv"
	"unicode/utf8"
)

// QuotedNameMax is how many bytes of a lock name QuoteName shows.
const QuotedNameMax = 64

// QuoteName returns name quoted for a message, as strconv.Quote does. A
// name longer than QuotedNameMax bytes is cut there, at the start of a
// UTF-8 sequence, and marked "…" with its length in bytes: a 10 KB name
// must not make a 10 KB error, and its first bytes say which one it is.
func QuoteName(name string) string {
	if len(name) <= QuotedNameMax {
		return strconv.Quote(name)
	}
	cut := QuotedNameMax
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(name[cut]); i++ {
		cut--
	}
	return strconv.Quote(name[:cut]+"…") + " (" + strconv.Itoa(len(name)) + " bytes)"
}
