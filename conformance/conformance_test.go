package conformance_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/conformance/internal/broken"
	"github.com/golocker/locker/locallock"
)

const brokenEnv = "LOCKER_CONFORMANCE_BROKEN"

// TestBrokenDriverSuite runs the suite against one broken driver. It runs
// only in the subprocess started by TestSuiteCatchesBrokenDrivers, where it
// is expected to fail.
func TestBrokenDriverSuite(t *testing.T) {
	kind := os.Getenv(brokenEnv)
	if kind == "" {
		t.Skip("run by TestSuiteCatchesBrokenDrivers")
	}
	store := locallock.NewStore()
	conformance.Run(t, conformance.Harness{
		Name:      kind,
		NewDriver: func(context.Context) (backend.Driver, error) { return broken.New(kind, store), nil },
		TTL:       300 * time.Millisecond,
		Timeout:   20 * time.Second,
		Scale:     500,
	})
}

// TestSuiteCatchesBrokenDrivers proves that the suite fails each broken
// driver, in the checks that should catch it. Each suite runs in a
// subprocess, since a failing suite fails the test that runs it.
func TestSuiteCatchesBrokenDrivers(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("in the subprocess")
	}
	want := map[string][]string{
		broken.NoOwnerCheck: {
			"unlock/by_a_stale_owner_never_frees_the_next_owners_lock",
			"spi/stale_renew_and_release_are_refused",
		},
		broken.ConstantTokens: {
			"exclusion/one_owner_at_a_time_across_clients_and_goroutines",
			"fencing/tokens_strictly_increase_across_holders",
			"fencing/a_lost_holders_token_is_below_the_next_owners",
		},
		broken.IgnoresCtx: {
			"lock/returns_the_ctx_error_and_leaves_nothing_behind",
		},
		broken.OverDeclares: {
			"declaration/inspect_matches_the_inspector_interface",
			"declaration/lost_channel_and_token_match_the_declaration",
		},
	}
	for _, kind := range broken.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBrokenDriverSuite$", "-test.v", "-test.timeout=150s")
			cmd.Env = append(os.Environ(), brokenEnv+"="+kind)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed the %s driver:\n%s", kind, out)
			}
			if ctx.Err() != nil {
				t.Fatalf("the suite hung on the %s driver:\n%s", kind, out)
			}
			text := string(out)
			if strings.Contains(text, "panic: ") {
				t.Errorf("the suite crashed instead of failing checks:\n%s", text)
			}
			for _, check := range want[kind] {
				if !strings.Contains(text, "--- FAIL: TestBrokenDriverSuite/"+check+" ") {
					t.Errorf("check %s did not fail for the %s driver", check, kind)
				}
			}
			if t.Failed() {
				t.Logf("suite output:\n%s", text)
			}
		})
	}
}
