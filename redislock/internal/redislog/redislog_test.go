package redislog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestForward: a message goes once to each distinct logger of the open
// drivers, as a warning naming go-redis, and no more to a driver's once it
// is forgotten.
func TestForward(t *testing.T) {
	var one, two bytes.Buffer
	l1 := slog.New(slog.NewTextHandler(&one, nil))
	l2 := slog.New(slog.NewTextHandler(&two, nil))
	a, b, c := new(int), new(int), new(int)
	Set(a, l1)
	Set(b, l1) // two drivers of one Client
	Set(c, l2)
	Set(new(int), nil)
	defer Forget(c)
	forward{}.Printf(context.Background(), "pool: failed to dial %d", 5)
	for name, buf := range map[string]*bytes.Buffer{"first": &one, "second": &two} {
		out := buf.String()
		if strings.Count(out, "\n") != 1 || !strings.Contains(out, "level=WARN") || !strings.Contains(out, `"redislock: go-redis: pool: failed to dial 5"`) {
			t.Errorf("the %s logger got %q, want the message once, as a warning", name, out)
		}
	}
	Forget(a)
	Forget(b)
	one.Reset()
	forward{}.Printf(context.Background(), "again")
	if one.Len() != 0 {
		t.Errorf("a forgotten driver's logger got %q", one.String())
	}
	if !strings.Contains(two.String(), "again") {
		t.Error("an open driver's logger missed a message")
	}
}
