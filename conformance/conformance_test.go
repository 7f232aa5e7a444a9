package conformance_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/conformance"
	"github.com/golocker/locker/conformance/internal/broken"
	"github.com/golocker/locker/locallock"
)

const (
	brokenEnv = "LOCKER_CONFORMANCE_BROKEN"
	reportEnv = "LOCKER_CONFORMANCE_REPORT"
)

// TestBrokenDriverSuite runs the suite against one broken driver. It runs
// only in the subprocess started by TestSuiteCatchesBrokenDrivers, where it
// is expected to fail; it writes the suite's report where that test says.
func TestBrokenDriverSuite(t *testing.T) {
	kind := os.Getenv(brokenEnv)
	if kind == "" {
		t.Skip("run by TestSuiteCatchesBrokenDrivers")
	}
	store := locallock.NewStore()
	rep := conformance.Run(t, conformance.Harness{
		Name: kind,
		NewDriver: func(context.Context) (backend.Driver, error) {
			d, _ := broken.New(kind, store)
			return d, nil
		},
		NewFaultyDriver: func(context.Context) (backend.Driver, conformance.Faults, error) {
			d, f := broken.New(kind, store)
			return d, f, nil
		},
		Footprint: func(context.Context) (int, error) { return store.Len(), nil },
		TTL:       300 * time.Millisecond,
		Timeout:   20 * time.Second,
		Scale:     500,
	})
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv(reportEnv), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSuiteCatchesBrokenDrivers proves that the suite fails each broken
// driver, in the checks that should catch it, and that its report says so.
// Each suite runs in a subprocess, since a failing suite fails the test
// that runs it, and only the checks that should catch the driver run.
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
			"election/one_leader_at_a_time_and_each_term_outranks_the_last",
		},
		broken.IgnoresCtx: {
			"lock/returns_the_ctx_error_and_leaves_nothing_behind",
		},
		broken.OverDeclares: {
			"declaration/notify_and_fifo_come_with_the_interfaces_they_need",
			"declaration/lost_channel_and_token_match_the_declaration",
		},
		broken.SameDriverStale: {
			"spi/a_stale_owner_on_the_same_driver_never_frees_the_next_owners_lock",
		},
		broken.StaleGrant: {
			"faults/a_waiter_paused_past_its_lease_or_session_returns_a_real_hold_with_a_fresh_token_or_an_error",
		},
		broken.PhantomWaiter: {
			"faults/a_waiter_paused_past_its_lease_or_session_returns_a_real_hold_with_a_fresh_token_or_an_error",
		},
		broken.AbandonsWait: {
			"lock/an_abandoned_wait_leaves_nothing_in_the_store_or_the_process",
		},
		broken.StrandsOnDeadline: {
			"lock/short_deadlines_racing_the_request_leave_the_lock_free",
			"faults/an_acquisition_whose_ctx_ends_while_its_request_is_in_flight_leaves_the_lock_free",
		},
		broken.GivesUpAfterTTL: {
			"lock/without_a_deadline_waits_as_long_as_the_holder_holds",
		},
		broken.PrefixBlocks: {
			"input/parent_child_and_prefix_names_are_distinct_locks",
		},
		broken.CloseFails: {
			"trylock/returns_at_once_when_held_elsewhere",
		},
		broken.DataRace: {
			"exclusion/one_owner_at_a_time_across_clients_and_goroutines",
		},
		broken.BlockingOnly: nil, // refused before any check
		broken.HoldsIgnoresPrefix: {
			"inspect/holds_lists_each_hold_by_prefix_with_its_token",
		},
		broken.ForceReleaseNoop: {
			"inspect/force_release_frees_the_lock_and_its_holder_learns_it",
		},
		broken.RemembersHeld: {
			"spi/acquire_is_one_attempt_that_remembers_nothing",
		},
		broken.NoWriterPreference: {
			"rwmutex/a_waiting_writer_keeps_new_readers_out_and_gets_in_when_the_readers_leave",
		},
		broken.KeepsPlace: {
			"rwmutex/a_writer_that_gives_up_lets_readers_in_at_once",
			"semaphore/cancelled_and_timed_out_acquisitions_leave_the_whole_limit",
			"election/a_cancelled_campaign_leaves_nothing_behind",
		},
		broken.DowngradeReleases: {
			"rwmutex/a_downgrade_keeps_a_queued_writer_out_and_the_read_hold_is_renewed",
		},
		broken.ReadsNotRenewed: {
			"rwmutex/read_holds_are_renewed_well_past_the_ttl",
			"rwmutex/a_downgrade_keeps_a_queued_writer_out_and_the_read_hold_is_renewed",
		},
		broken.AliasesKinds: {
			"kinds/a_mutex_a_semaphore_and_a_read_write_lock_of_one_name_are_three_locks",
		},
		broken.NoLimitCheck: {
			"semaphore/the_limit_is_stored_with_the_name_and_a_conflict_is_an_error",
		},
		broken.PermitsOutliveHolders: {
			"semaphore/a_crashed_holders_permits_come_back_after_its_lease",
		},
		broken.MissesWakeups: {
			"semaphore/a_waiter_for_several_permits_is_not_overtaken_and_wakes_when_they_are_free",
		},
		broken.RenewRecreates: {
			"semaphore/spi_a_renewal_never_brings_back_an_expired_permit",
		},
		broken.GrowsStore: {
			"semaphore/using_one_name_over_and_over_does_not_grow_the_store",
		},
		broken.ReleaseLies: {
			"multilock/an_acquisition_that_fails_or_is_cancelled_leaves_nothing_held",
		},
		broken.HidesValues: {
			"election/leader_and_observe_show_each_term_its_value_and_no_leader_between",
		},
		broken.ProclaimNoCheck: {
			"election/spi_a_stale_terms_proclaim_renew_and_release_are_refused",
		},
		broken.ValueIsIdentity: {
			"election/two_campaigns_with_one_value_are_two_candidates",
		},
	}
	// Checks that must pass on the broken driver, to show that a failure in
	// a cleanup or under the race detector is what fails the others.
	control := map[string][]string{
		broken.SameDriverStale:    {"spi/stale_renew_and_release_are_refused"},
		broken.StrandsOnDeadline:  {"trylock/returns_at_once_when_held_elsewhere"},
		broken.PrefixBlocks:       {"input/unusual_names_are_distinct_locks"},
		broken.DataRace:           {"trylock/returns_at_once_when_held_elsewhere"},
		broken.HoldsIgnoresPrefix: {"inspect/force_release_frees_the_lock_and_its_holder_learns_it"},
		broken.ForceReleaseNoop:   {"inspect/holds_lists_each_hold_by_prefix_with_its_token"},
		// The weighted faults spare what they do not touch.
		broken.NoWriterPreference:    {"rwmutex/readers_share_and_a_writer_excludes_everyone_across_clients"},
		broken.KeepsPlace:            {"rwmutex/read_holds_are_renewed_well_past_the_ttl"},
		broken.DowngradeReleases:     {"rwmutex/a_waiting_writer_keeps_new_readers_out_and_gets_in_when_the_readers_leave"},
		broken.ReadsNotRenewed:       {"semaphore/never_more_permits_than_the_limit_across_clients_and_goroutines"},
		broken.AliasesKinds:          {"semaphore/the_limit_is_stored_with_the_name_and_a_conflict_is_an_error"},
		broken.NoLimitCheck:          {"rwmutex/an_upgrade_fails_at_once"},
		broken.PermitsOutliveHolders: {"semaphore/the_limit_is_stored_with_the_name_and_a_conflict_is_an_error"},
		broken.MissesWakeups:         {"semaphore/the_limit_is_stored_with_the_name_and_a_conflict_is_an_error"},
		broken.RenewRecreates:        {"semaphore/a_crashed_holders_permits_come_back_after_its_lease"},
		broken.GrowsStore:            {"semaphore/the_limit_is_stored_with_the_name_and_a_conflict_is_an_error"},
		broken.ReleaseLies:           {"multilock/sets_given_in_opposite_orders_never_deadlock"},
		broken.HidesValues:           {"election/a_cancelled_campaign_leaves_nothing_behind"},
		broken.ProclaimNoCheck:       {"election/one_leader_at_a_time_and_each_term_outranks_the_last"},
		broken.ValueIsIdentity:       {"election/one_leader_at_a_time_and_each_term_outranks_the_last"},
	}
	for _, kind := range broken.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			if kind == broken.DataRace && !raceEnabled {
				t.Skip("only the race detector sees this driver's fault")
			}
			checks := append(append([]string(nil), want[kind]...), control[kind]...)
			run := "^TestBrokenDriverSuite$"
			if len(checks) > 0 {
				// A -run pattern is split at each "/": one alternation
				// per level of the check names.
				run = "^TestBrokenDriverSuite$/" + levels(checks)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			reportPath := filepath.Join(t.TempDir(), "report.json")
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.v", "-test.timeout=150s")
			cmd.Env = append(os.Environ(), brokenEnv+"="+kind, reportEnv+"="+reportPath)
			out, err := cmd.CombinedOutput()
			text := string(out)
			defer func() {
				if t.Failed() {
					t.Logf("suite output:\n%s", text)
				}
			}()
			if err == nil {
				t.Fatalf("the suite passed the %s driver", kind)
			}
			if ctx.Err() != nil {
				t.Fatalf("the suite hung on the %s driver", kind)
			}
			if strings.Contains(text, "panic: ") {
				t.Errorf("the suite crashed instead of failing checks")
			}
			if kind == broken.BlockingOnly {
				if !strings.Contains(text, "conformance: refused: the driver has no attempt that does not wait") {
					t.Error("the suite did not refuse the blocking-only driver with its one message")
				}
				if strings.Contains(text, "--- FAIL: TestBrokenDriverSuite/") {
					t.Error("the suite ran checks on a driver it refuses")
				}
				return
			}
			for _, check := range want[kind] {
				if !strings.Contains(text, "--- FAIL: TestBrokenDriverSuite/"+check+" ") {
					t.Errorf("check %s did not fail for the %s driver", check, kind)
				}
			}
			b, err := os.ReadFile(reportPath)
			if err != nil {
				t.Fatalf("the suite wrote no report: %v", err)
			}
			var rep conformance.Report
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatal(err)
			}
			outcome := map[string]conformance.Outcome{}
			for _, c := range rep.Checks {
				outcome[c.Name] = c.Outcome
			}
			for _, check := range want[kind] {
				if outcome[check] != conformance.Failed {
					t.Errorf("the report says %s %q for the %s driver, want %q", check, outcome[check], kind, conformance.Failed)
				}
			}
			for _, check := range control[kind] {
				if outcome[check] != conformance.Passed {
					t.Errorf("the report says %s %q for the %s driver, want %q (the control)", check, outcome[check], kind, conformance.Passed)
				}
			}
		})
	}
}

// levels turns check names "a/b" into a -run pattern "(^a$)/(^b$)" that
// matches exactly those checks (with each level an alternation).
func levels(checks []string) string {
	var first, second []string
	seen := map[string]bool{}
	for _, c := range checks {
		a, b, _ := strings.Cut(c, "/")
		if !seen["1"+a] {
			first = append(first, "^"+regexp.QuoteMeta(a)+"$")
			seen["1"+a] = true
		}
		if !seen["2"+b] {
			second = append(second, "^"+regexp.QuoteMeta(b)+"$")
			seen["2"+b] = true
		}
	}
	return "(" + strings.Join(first, "|") + ")/(" + strings.Join(second, "|") + ")"
}
