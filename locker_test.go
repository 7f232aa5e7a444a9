package locker

// This file holds the package's TestMain and the tests of unexported pieces
// (retry backoff, safety margin, opErr). Everything reachable through the
// public API is tested from package locker_test.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/golocker/locker/backend"
)

// Clients start a scheduler goroutine and, per hold, renewal and watcher
// goroutines: every test must leave none behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRetryDelay(t *testing.T) {
	tests := []struct {
		name  string
		ttl   time.Duration
		fails int
		want  time.Duration
	}{
		{"first_retry_waits_a_sixtieth_of_the_TTL", 600 * time.Millisecond, 1, 10 * time.Millisecond},
		{"second_retry_doubles", 600 * time.Millisecond, 2, 20 * time.Millisecond},
		{"third_retry_doubles_again", 600 * time.Millisecond, 3, 40 * time.Millisecond},
		{"backoff_is_capped_at_a_tenth_of_the_TTL", 600 * time.Millisecond, 4, 60 * time.Millisecond},
		{"many_failures_stay_at_the_cap", 600 * time.Millisecond, 1000, 60 * time.Millisecond},
		{"a_short_TTL_still_waits_a_millisecond", MinTTL, 1, time.Millisecond},
		{"the_default_TTL_starts_at_half_a_second", DefaultTTL, 1, 500 * time.Millisecond},
		{"the_default_TTL_caps_at_three_seconds", DefaultTTL, 50, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryDelay(tt.ttl, tt.fails); got != tt.want {
				t.Errorf("retryDelay(%v, %d) = %v, want %v", tt.ttl, tt.fails, got, tt.want)
			}
		})
	}
	t.Run("delays_never_shrink_and_leave_room_for_several_retries", func(t *testing.T) {
		for _, ttl := range []time.Duration{MinTTL, 300 * time.Millisecond, time.Second, DefaultTTL} {
			prev := time.Duration(0)
			for fails := 1; fails <= 20; fails++ {
				d := retryDelay(ttl, fails)
				if d < prev {
					t.Errorf("retryDelay(%v, %d) = %v, less than %v after one failure fewer", ttl, fails, d, prev)
				}
				if d > max(ttl/10, time.Millisecond) {
					t.Errorf("retryDelay(%v, %d) = %v, more than TTL/10", ttl, fails, d)
				}
				prev = d
			}
		}
	})
}

func TestMargin(t *testing.T) {
	for _, ttl := range []time.Duration{MinTTL, 300 * time.Millisecond, DefaultTTL, time.Hour} {
		t.Run(fmt.Sprintf("a_lease_of_%v_is_declared_lost_a_tenth_early_after_its_first_renewal_was_due", ttl), func(t *testing.T) {
			m := margin(ttl)
			if m != ttl/10 {
				t.Errorf("margin(%v) = %v, want %v", ttl, m, ttl/10)
			}
			// The first renewal (TTL/3) must come well before the
			// deadline (TTL - margin), leaving time for retries.
			if room := ttl - m - ttl/3; room < ttl/2 {
				t.Errorf("only %v between the first renewal and the deadline of a %v lease", room, ttl)
			}
		})
	}
}

func TestOpError(t *testing.T) {
	tests := []struct {
		name string
		err  *OpError
		want string
	}{
		{
			name: "a_bare_sentinel_is_not_prefixed_twice",
			err:  &OpError{Op: "unlock", Name: "name", Err: ErrNotHeld},
			want: `locker: unlock "name": not held`,
		},
		{
			name: "the_name_is_quoted",
			err:  &OpError{Op: "lock", Name: "a \"b\"\n", Err: ErrClosed},
			want: `locker: lock "a \"b\"\n": closed`,
		},
		{
			name: "a_driver_error_appears_as_it_is",
			err:  &OpError{Op: "lock", Name: "n", Err: errors.New("dial tcp 127.0.0.1:6379: connection refused")},
			want: `locker: lock "n": dial tcp 127.0.0.1:6379: connection refused`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
			if !errors.Is(tt.err, tt.err.Err) {
				t.Errorf("errors.Is(%v, its cause) = false", tt.err)
			}
		})
	}

	wrapped := &OpError{Op: "unlock", Name: "n", Err: fmt.Errorf("%w: connection reset", ErrLost)}
	t.Run("a_wrapped_sentinel_is_matched_through_it", func(t *testing.T) {
		if !errors.Is(wrapped, ErrLost) || !errors.Is(wrapped, backend.ErrLost) {
			t.Errorf("errors.Is(%v, ErrLost) = false", wrapped)
		}
		var oe *OpError
		if !errors.As(fmt.Errorf("context: %w", wrapped), &oe) || oe != wrapped {
			t.Error("errors.As does not find the OpError through a further wrap")
		}
	})
	t.Run("a_wrapped_sentinels_text_appears_once", func(t *testing.T) {
		msg := wrapped.Error()
		for _, part := range []string{"hold lost", "connection reset"} {
			if n := strings.Count(msg, part); n != 1 {
				t.Errorf("%q appears %d times in %q", part, n, msg)
			}
		}
	})
	// The bare-sentinel case strips the inner "locker: "; a sentinel
	// wrapped with detail (how package locker itself reports a lost hold or
	// a bad TTL) must not read "locker: unlock "n": locker: hold lost".
	t.Run("the_package_prefix_appears_once_for_a_wrapped_sentinel", func(t *testing.T) {
		if msg := wrapped.Error(); strings.Count(msg, "locker: ") != 1 {
			t.Errorf("Error() = %q, want one \"locker: \" prefix", msg)
		}
	})
}

func TestOpErr(t *testing.T) {
	t.Run("nil_stays_nil", func(t *testing.T) {
		if err := opErr("lock", "n", nil); err != nil {
			t.Errorf("opErr(nil) = %v", err)
		}
	})
	t.Run("an_error_is_wrapped_with_the_operation_and_name", func(t *testing.T) {
		cause := errors.New("boom")
		var oe *OpError
		if err := opErr("trylock", "n", cause); !errors.As(err, &oe) || oe.Op != "trylock" || oe.Name != "n" || oe.Err != cause {
			t.Errorf("opErr = %#v", err)
		}
	})
	t.Run("an_OpError_is_not_wrapped_again", func(t *testing.T) {
		inner := &OpError{Op: "lock", Name: "n", Err: ErrClosed}
		for _, err := range []error{inner, fmt.Errorf("more: %w", inner)} {
			if got := opErr("do", "n", err); got != err {
				t.Errorf("opErr(%v) = %v, want it unchanged", err, got)
			}
		}
		if got := opErr("do", "n", inner).Error(); strings.Count(got, `"n"`) != 1 {
			t.Errorf("message names the lock twice: %q", got)
		}
	})
}
