package testserver

import (
	"strings"
	"testing"
)

func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		require  string
		wantFail bool
	}{
		{"", false},
		{"0", false},
		{"1", true},
		{"true", true},
	} {
		t.Run("LOCKER_REQUIRE_SERVERS="+tc.require, func(t *testing.T) {
			t.Setenv(RequireServersEnv, tc.require)
			var s Shared
			defer s.Close()
			out := s.Run(func(tb TB) { Unavailable(tb, "no %s here", "widget") })
			if out.Failed != tc.wantFail || out.Skipped == tc.wantFail {
				t.Fatalf("outcome = %+v, want failed=%v", out, tc.wantFail)
			}
			if !strings.Contains(out.Message, "no widget here") {
				t.Fatalf("message %q does not say why", out.Message)
			}
		})
	}
}

func TestEnvAddrs(t *testing.T) {
	t.Setenv("LOCKER_TEST_X", " 127.0.0.1:1, ,127.0.0.1:2 ")
	got := EnvAddrs("LOCKER_TEST_X")
	if strings.Join(got, "|") != "127.0.0.1:1|127.0.0.1:2" {
		t.Fatalf("EnvAddrs = %q", got)
	}
	if EnvAddr("LOCKER_TEST_UNSET_FOR_SURE") != "" || EnvAddrs("LOCKER_TEST_UNSET_FOR_SURE") != nil {
		t.Fatal("unset variable gave a value")
	}
}

func TestShared(t *testing.T) {
	t.Run("cleanups_run_last_first_on_close", func(t *testing.T) {
		var s Shared
		var order []int
		out := s.Run(func(tb TB) {
			tb.Cleanup(func() { order = append(order, 1) })
			tb.Cleanup(func() { order = append(order, 2) })
		})
		if out != (Outcome{}) {
			t.Fatalf("outcome = %+v", out)
		}
		s.Close()
		if len(order) != 2 || order[0] != 2 || order[1] != 1 {
			t.Fatalf("cleanup order %v", order)
		}
	})
	t.Run("fatal_marks_failed", func(t *testing.T) {
		var s Shared
		defer s.Close()
		out := s.Run(func(tb TB) { tb.Fatalf("bad %d", 1); t.Error("Fatalf returned") })
		if !out.Failed || out.Message != "bad 1" || !s.Failed() {
			t.Fatalf("outcome = %+v, failed = %v", out, s.Failed())
		}
	})
}

// lazyPing is started by the first test that asks for it.
var lazyPing = NewLazy(&servers, startPingServer)

func TestLazy(t *testing.T) {
	t.Parallel()
	var addrs []string
	for range 2 {
		t.Run("get", func(t *testing.T) {
			r := lazyPing.Get(t)
			tracked.Track(r.Proc)
			addrs = append(addrs, r.Addr)
		})
	}
	if len(addrs) == 2 && addrs[0] != addrs[1] {
		t.Fatalf("two Gets gave two servers: %v", addrs)
	}

	t.Run("outside_main_fails", func(t *testing.T) {
		var notMain Shared
		l := NewLazy(&notMain, func(TB) int { return 1 })
		var s Shared
		defer s.Close()
		out := s.Run(func(tb TB) { l.Get(tb) })
		if !out.Failed || !strings.Contains(out.Message, "outside Shared.Main") {
			t.Fatalf("outcome = %+v", out)
		}
	})
}
