package driverkit

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuoteName(t *testing.T) {
	long := strings.Repeat("a", 10240)
	for _, tc := range []struct{ name, want string }{
		{"", `""`},
		{"orders/42", `"orders/42"`},
		{"tab\there", `"tab\there"`},
		{strings.Repeat("x", QuotedNameMax), `"` + strings.Repeat("x", QuotedNameMax) + `"`},
		{long, `"` + strings.Repeat("a", QuotedNameMax) + `…" (10240 bytes)`},
		// "é" is two bytes; the 64th byte is the first of one: it goes.
		{strings.Repeat("a", 63) + strings.Repeat("é", 10), `"` + strings.Repeat("a", 63) + `…" (83 bytes)`},
	} {
		if got := QuoteName(tc.name); got != tc.want {
			t.Errorf("QuoteName(%.20q…) = %s, want %s", tc.name, got, tc.want)
		}
	}
	for _, name := range []string{strings.Repeat("é", 100), strings.Repeat("€", 100), strings.Repeat("😀", 100), strings.Repeat("\xff", 100)} {
		got := QuoteName(name)
		if len(got) > 4*QuotedNameMax+32 || !strings.HasSuffix(got, "…\" ("+strconv.Itoa(len(name))+" bytes)") {
			t.Errorf("QuoteName(%.20q…) = %s: want at most %d bytes of the name, then … and the length", name, got, QuotedNameMax)
		}
		if utf8.ValidString(name) && !utf8.ValidString(got) {
			t.Errorf("QuoteName(%.20q…) = %s: not valid UTF-8", name, got)
		}
	}
}
