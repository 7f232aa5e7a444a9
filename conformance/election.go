package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golocker/locker"
	"github.com/golocker/locker/backend"
)

// needElection: elections need weighted holds and a driver that lists
// them (to read the leader).
func needElection(s *suite) string {
	if why := needWeighted(s); why != "" {
		return why
	}
	return needInspector(s)
}

// mustCampaign wins a term of e or fails the check.
func mustCampaign(t *testing.T, ctx context.Context, e *locker.Election, value string) *locker.Term {
	t.Helper()
	term, err := e.Campaign(ctx, value)
	if err != nil {
		t.Fatalf("Campaign(%q) of %s: %v", value, e.Name(), err)
	}
	return term
}

// mustResign resigns term or fails the check.
func mustResign(t *testing.T, ctx context.Context, term *locker.Term) {
	t.Helper()
	if err := term.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
}

// awaitLeader reads ch until it sends a view for which ok is true, within
// quick.
func awaitLeader(t *testing.T, ch <-chan locker.Leader, what string, ok func(locker.Leader) bool) locker.Leader {
	t.Helper()
	deadline := time.After(quick)
	for {
		select {
		case l, open := <-ch:
			if !open {
				t.Fatalf("Observe's channel closed while waiting for %s", what)
			}
			if ok(l) {
				return l
			}
		case <-deadline:
			t.Fatalf("Observe did not show %s within %v", what, quick)
		}
	}
}

var electionChecks = []check{
	{
		name:   "election/one_leader_at_a_time_and_each_term_outranks_the_last",
		proves: []string{CapElection, CapFencing},
		skip:   needElection,
		run: func(t *testing.T, s *suite) {
			const clients, perClient, rounds = 3, 2, 6
			ctx := s.ctx(t)
			name := s.name(t, "e")
			res := &resource{fencing: s.caps.Fencing}
			var wg sync.WaitGroup
			errs := make(chan error, clients*perClient)
			for ci := range clients {
				e := s.client(t).NewElection(name)
				for g := range perClient {
					who := fmt.Sprintf("client %d candidate %d", ci, g)
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range rounds {
							var term *locker.Term
							var err error
							for term == nil && err == nil {
								switch i % 3 {
								case 0:
									term, err = e.Campaign(ctx, who)
								case 1:
									term, err = e.CampaignTimeout(ctx, who, 50*time.Millisecond)
								default:
									if term, err = e.TryCampaign(ctx, who); term == nil && err == nil {
										time.Sleep(time.Millisecond)
									}
								}
							}
							if err != nil {
								errs <- fmt.Errorf("%s: %w", who, err)
								return
							}
							res.enter(who, term.Token())
							res.exit()
							if err := term.Resign(ctx); err != nil {
								errs <- fmt.Errorf("%s: Resign: %w", who, err)
								return
							}
						}
					}()
				}
			}
			within(t, s.h.Timeout, "the campaigning candidates", wg.Wait)
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			res.check(t, clients*perClient*rounds)
		},
	},
	{
		name:   "election/leader_and_observe_show_each_term_its_value_and_no_leader_between",
		proves: []string{CapElection},
		skip:   needElection,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			watcher := s.client(t).NewElection(name)
			octx, cancel := context.WithCancel(ctx)
			defer cancel()
			views, err := watcher.Observe(octx)
			if err != nil {
				t.Fatalf("Observe: %v", err)
			}
			awaitLeader(t, views, "no leader at first", func(l locker.Leader) bool { return !l.Leading() })
			if _, err := watcher.Leader(ctx); !errors.Is(err, locker.ErrNoLeader) {
				t.Errorf("Leader before any campaign = %v, want ErrNoLeader", err)
			}
			a := mustCampaign(t, ctx, s.client(t).NewElection(name), "candidate a")
			awaitLeader(t, views, "the first term", func(l locker.Leader) bool { return l.Value == "candidate a" })
			if l, err := watcher.Leader(ctx); err != nil || l.Value != "candidate a" || (s.caps.Fencing && l.Token != a.Token()) {
				t.Errorf("Leader = %+v, %v; want candidate a with token %d", l, err, a.Token())
			}
			if err := a.Proclaim(ctx, "candidate a, again"); err != nil {
				t.Fatalf("Proclaim: %v", err)
			}
			awaitLeader(t, views, "the proclaimed value", func(l locker.Leader) bool { return l.Value == "candidate a, again" })
			mustResign(t, ctx, a)
			if cause := context.Cause(a.Context()); !errors.Is(cause, locker.ErrResigned) {
				t.Errorf("the resigned term's context ended with %v, want ErrResigned", cause)
			}
			awaitLeader(t, views, "no leader after the resignation", func(l locker.Leader) bool { return !l.Leading() })
			b := mustCampaign(t, ctx, s.client(t).NewElection(name), "candidate b")
			l := awaitLeader(t, views, "the second term", func(l locker.Leader) bool { return l.Value == "candidate b" })
			if s.caps.Fencing && l.Token <= a.Token() {
				t.Errorf("the second term's token %d is not above the first's %d", l.Token, a.Token())
			}
			mustResign(t, ctx, b)
		},
	},
	{
		name:   "election/a_cut_off_leader_learns_its_term_ended_before_another_wins",
		proves: []string{CapElection, CapExpiry, CapFaults},
		skip:   all(needElection, needCut),
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			c, f := s.faultyClient(t)
			a := mustCampaign(t, ctx, c.NewElection(name), "a")
			f.Cut()
			b, err := s.client(t).NewElection(name).CampaignTimeout(ctx, "b", 10*s.ttl+quick)
			if err != nil || b == nil {
				t.Fatalf("CampaignTimeout while the leader is cut off = %v, %v; want a term once the leader's ran out", b, err)
			}
			defer b.Resign(ctx)
			select {
			case <-a.Context().Done():
			default:
				t.Fatal("another candidate won while the cut-off leader's term context was still live")
			}
			if !errors.Is(context.Cause(a.Context()), locker.ErrLost) {
				t.Errorf("the cut-off term's context ended with %v, want ErrLost", context.Cause(a.Context()))
			}
			if s.caps.Fencing && b.Token() <= a.Token() {
				t.Errorf("the new term's token %d is not above the lost term's %d", b.Token(), a.Token())
			}
			// Back on the network, the deposed leader can neither speak
			// for the election nor end the new term.
			f.Restore()
			if err := a.Proclaim(ctx, "a, stale"); !errors.Is(err, locker.ErrLost) {
				t.Errorf("the deposed leader's Proclaim = %v, want ErrLost", err)
			}
			if err := a.Resign(ctx); err != nil && !errors.Is(err, locker.ErrLost) {
				t.Errorf("the deposed leader's Resign = %v, want nil or ErrLost", err)
			}
			if l, err := s.client(t).NewElection(name).Leader(ctx); err != nil || l.Value != "b" {
				t.Errorf("Leader after the deposed leader's calls = %+v, %v; want b", l, err)
			}
		},
	},
	{
		name:   "election/resign_is_idempotent_and_never_ends_a_newer_term",
		proves: []string{CapElection, CapExclusion},
		skip:   needElection,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			c := s.client(t)
			a := mustCampaign(t, ctx, c.NewElection(name), "a")
			mustResign(t, ctx, a)
			b := mustCampaign(t, ctx, c.NewElection(name), "b")
			if err := a.Resign(ctx); err != nil {
				t.Errorf("a second Resign = %v, want nil", err)
			}
			if err := a.Proclaim(ctx, "a"); !errors.Is(err, locker.ErrNotHeld) {
				t.Errorf("Proclaim after Resign = %v, want ErrNotHeld", err)
			}
			if l, err := s.client(t).NewElection(name).Leader(ctx); err != nil || l.Value != "b" {
				t.Errorf("Leader after the old term's second Resign = %+v, %v; want b", l, err)
			}
			mustResign(t, ctx, b)
		},
	},
	{
		name:   "election/a_cancelled_campaign_leaves_nothing_behind",
		proves: []string{CapElection, CapCancellation},
		skip:   needElection,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			a := mustCampaign(t, ctx, s.client(t).NewElection(name), "a")
			// A long lease: a place left behind would outlast the check.
			waiting := s.client(t).NewElection(name, locker.WithTTL(30*time.Second))
			wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			term, err := waiting.Campaign(wctx, "b")
			cancel()
			if term != nil || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a Campaign while another leads, with a deadline = %v, %v; want DeadlineExceeded", term, err)
			}
			mustResign(t, ctx, a)
			c, err := s.client(t).NewElection(name).TryCampaign(ctx, "c")
			if err != nil || c == nil {
				t.Fatalf("TryCampaign after the leader resigned = %v, %v; want a term: the cancelled campaign left a place", c, err)
			}
			mustResign(t, ctx, c)
		},
	},
	{
		name:   "election/two_campaigns_with_one_value_are_two_candidates",
		proves: []string{CapElection, CapExclusion},
		skip:   needElection,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			e := s.client(t).NewElection(name)
			a := mustCampaign(t, ctx, e, "host-1")
			for _, other := range []*locker.Election{e, s.client(t).NewElection(name)} {
				if b, err := other.TryCampaign(ctx, "host-1"); b != nil || err != nil {
					t.Errorf("a second campaign with the leader's value = %v, %v; want no term", b, err)
					if b != nil {
						_ = b.Resign(ctx)
					}
				}
			}
			mustResign(t, ctx, a)
		},
	},
	{
		name:   "election/run_keeps_the_term_until_its_work_returns_and_never_runs_it_without_one",
		proves: []string{CapElection},
		skip:   needElection,
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			leader := mustCampaign(t, ctx, s.client(t).NewElection(name), "leader")
			// A candidate that never wins never runs its work.
			rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			ran := false
			err := s.client(t).NewElection(name).Run(rctx, "never", func(context.Context) error { ran = true; return nil })
			cancel()
			if ran || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Run of a candidate that never led = ran %v, %v; want no run, DeadlineExceeded", ran, err)
			}
			mustResign(t, ctx, leader)
			// The work outlives Run's ctx: the term lasts until it returns.
			rctx, cancel = context.WithCancel(ctx)
			release := make(chan struct{})
			started := make(chan struct{})
			done := make(chan error, 1)
			runner := s.client(t).NewElection(name)
			go func() {
				done <- runner.Run(rctx, "runner", func(ctx context.Context) error {
					close(started)
					<-ctx.Done()
					<-release
					return nil
				})
			}()
			select {
			case <-started:
			case <-time.After(quick):
				t.Fatal("Run's work did not start within quick on a free election")
			}
			cancel()
			other := s.client(t).NewElection(name)
			if b, err := other.TryCampaign(ctx, "other"); b != nil || err != nil {
				t.Fatalf("TryCampaign while Run's work still runs after its ctx ended = %v, %v; want no term", b, err)
			}
			close(release)
			if err := returns(t, done, quick, "Run after its work returned"); !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
			b, err := other.TryCampaign(ctx, "other")
			if err != nil || b == nil {
				t.Fatalf("TryCampaign after Run returned = %v, %v; want a term", b, err)
			}
			mustResign(t, ctx, b)
		},
	},
	{
		name:   "election/run_campaigns_again_after_its_term_is_lost",
		proves: []string{CapElection, CapFaults},
		skip:   all(needElection, needCut),
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			c, f := s.faultyClient(t)
			terms := make(chan uint64, 4)
			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- c.NewElection(name).Run(rctx, "runner", func(ctx context.Context) error {
					h, _ := locker.HoldFromContext(ctx)
					terms <- h.Token()
					<-ctx.Done()
					return nil
				})
			}()
			var first uint64
			select {
			case first = <-terms:
			case <-time.After(quick):
				t.Fatal("Run's work did not start within quick on a free election")
			}
			f.Cut()
			b, err := s.client(t).NewElection(name).CampaignTimeout(ctx, "b", 10*s.ttl+quick)
			if err != nil || b == nil {
				t.Fatalf("CampaignTimeout while the runner is cut off = %v, %v", b, err)
			}
			f.Restore()
			mustResign(t, ctx, b)
			select {
			case second := <-terms:
				if s.caps.Fencing && second <= b.Token() {
					t.Errorf("Run's second term has token %d, not above the term between (%d)", second, b.Token())
				}
				_ = first
			case err := <-done:
				t.Fatalf("Run returned %v after its term was lost, instead of campaigning again", err)
			case <-time.After(s.settle() + 10*s.ttl + quick):
				t.Fatal("Run did not win a second term after its first was lost and the election was free again")
			}
			cancel()
			if err := returns(t, done, quick, "Run after its ctx ended"); !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
		},
	},
	{
		name:   "election/spi_a_stale_terms_proclaim_renew_and_release_are_refused",
		proves: []string{CapElection, CapExpiry},
		skip: all(needElection, needExpiry, func(s *suite) string {
			if s.caps.SessionLease {
				return "the driver's holds live as long as its session"
			}
			return ""
		}),
		run: func(t *testing.T, s *suite) {
			ctx, name := s.start(t)
			d, other := s.driver(t), s.driver(t)
			defer d.Close()
			defer other.Close()
			r := backend.Request{Name: name, Owner: s.id + "-a", TTL: s.ttl, Kind: backend.Election, Limit: 1, Weight: 1, Value: "a"}
			la, err := d.Acquire(ctx, r)
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			wctx, cancel := context.WithTimeout(ctx, 10*s.ttl+quick)
			rb := r
			rb.Owner, rb.TTL, rb.Value = s.id+"-b", 30*time.Second, "b"
			lb, err := acquireWaitingWeighted(wctx, other, rb)
			cancel()
			if err != nil {
				t.Fatalf("the next term's wait for the expired one: %v", err)
			}
			defer lb.Release(ctx)
			p, ok := la.(backend.Proclaimer)
			if !ok {
				t.Fatal("the driver declares Weighted, and its lease is no backend.Proclaimer")
			}
			if err := p.Proclaim(ctx, "a, stale"); !errors.Is(err, backend.ErrLost) {
				t.Errorf("Proclaim of an expired term while a newer one leads = %v, want ErrLost", err)
			}
			if err := la.Renew(ctx, 30*time.Second); !errors.Is(err, backend.ErrLost) {
				t.Errorf("Renew of an expired term = %v, want ErrLost", err)
			}
			if err := la.Release(ctx); !errors.Is(err, backend.ErrLost) {
				t.Errorf("Release of an expired term = %v, want ErrLost", err)
			}
			hs, _ := s.holds(t, ctx, name)
			var values []string
			for _, h := range hs {
				if h.Kind == backend.Election {
					values = append(values, h.Value)
				}
			}
			if len(values) != 1 || values[0] != "b" {
				t.Errorf("the election's holds after the stale calls have values %q, want [b]", values)
			}
		},
	},
}
