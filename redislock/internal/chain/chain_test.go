package chain

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The chain's state machine, without Redis: each case is a start and a
// table of events, each with what the chain must answer; the invariants of
// chain.go are checked after every event.

// step is one event of a chain's life and what must follow.
type step struct {
	ev string // "pass", "q", "reconnect", "renewed", "renew-refused", "reserved N", "reserve-refused", "forced", "end", "wait D"
	// For "pass": whether it may pass, and if so the token and whether to
	// reserve.
	passable bool
	token    uint64
	reserve  bool
	ttl      time.Duration // of the hold asking (default the chain's)
}

type chainCase struct {
	name   string
	token  uint64 // of the grant
	last   uint64 // last reserved with it
	listen bool
	early  bool // a "q" came before the chain began
	batch  int
	steps  []step
}

const ct = 3 * time.Second // the chains' TTL

func TestChain(t *testing.T) {
	cases := []chainCase{
		{
			name:  "a grant with a block of tokens passes them in order, and asks for more at half",
			token: 100, last: 163, listen: true,
			steps: []step{
				{ev: "pass", passable: true, token: 101},
				{ev: "pass", passable: true, token: 102},
				{ev: "pass many", passable: true}, // 103 to 130: 32 or more tokens left after each
				{ev: "pass", passable: true, token: 131, reserve: true},
				{ev: "pass", passable: true, token: 132}, // the call is on its way: no second
				{ev: "reserved 227"},
				{ev: "pass", passable: true, token: 133},
			},
		},
		{
			name:  "a grant without reserved tokens passes nothing",
			token: 7, last: 7, listen: false,
			steps: []step{{ev: "pass", passable: false}},
		},
		{
			name:  "a grant that reserved nothing while it listened starts remote: another process waits",
			token: 7, last: 7, listen: true,
			steps: []step{{ev: "pass", passable: false}},
		},
		{
			name:  "a q stops the passing: the other process's waiter is next",
			token: 1, last: 64, listen: true,
			steps: []step{
				{ev: "pass", passable: true, token: 2},
				{ev: "q"},
				{ev: "pass", passable: false},
			},
		},
		{
			name:  "a q that came before the chain began counts",
			token: 1, last: 64, listen: true, early: true,
			steps: []step{{ev: "pass", passable: false}},
		},
		{
			name:  "a pub/sub reconnect may have lost a q: the chain stops passing",
			token: 1, last: 64, listen: true,
			steps: []step{
				{ev: "reconnect"},
				{ev: "pass", passable: false},
			},
		},
		{
			name:  "with batch 2, two passes go ahead of the other process's waiter, then none",
			token: 1, last: 64, listen: true, batch: 2,
			steps: []step{
				{ev: "q"},
				{ev: "pass", passable: true, token: 2},
				{ev: "pass", passable: true, token: 3},
				{ev: "pass", passable: false},
			},
		},
		{
			name:  "a lease set more than TTL/10 ago is not passed; a renewal makes it fresh again",
			token: 1, last: 64, listen: true,
			steps: []step{
				{ev: "wait 301ms"},
				{ev: "pass", passable: false},
				{ev: "renewed"},
				{ev: "pass", passable: true, token: 2},
			},
		},
		{
			name:  "a renewal that finds the hold gone ends the passing",
			token: 1, last: 64, listen: true,
			steps: []step{
				{ev: "renew-refused"},
				{ev: "pass", passable: false},
			},
		},
		{
			name:  "a forced release ends the passing",
			token: 1, last: 64, listen: true,
			steps: []step{
				{ev: "forced"},
				{ev: "pass", passable: false},
			},
		},
		{
			name:  "a hold of another TTL is not passed the lock",
			token: 1, last: 64, listen: true,
			steps: []step{
				{ev: "pass", passable: false, ttl: 2 * ct},
				{ev: "pass", passable: true, token: 2},
			},
		},
		{
			name:  "the reserved tokens run out",
			token: 1, last: 3, listen: true,
			steps: []step{
				{ev: "pass", passable: true, token: 2, reserve: true},
				{ev: "pass", passable: true, token: 3},
				{ev: "reserve-refused"},
				{ev: "pass", passable: false},
			},
		},
		{
			name:  "a reservation answered after the last token moved is not kept",
			token: 1, last: 3, listen: true,
			steps: []step{
				{ev: "pass", passable: true, token: 2, reserve: true},
				{ev: "reserved-stale 99"},
				{ev: "pass", passable: true, token: 3, reserve: true}, // asks again
				{ev: "pass", passable: false},
			},
		},
		{
			name:  "an ended chain passes nothing",
			token: 1, last: 64, listen: true,
			steps: []step{
				{ev: "end"},
				{ev: "pass", passable: false},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			c := newChain("n", "k", "o1", ct, tc.listen, tc.token, tc.last, now, tc.early)
			check := func(at string) {
				t.Helper()
				if err := c.invariants(); err != nil {
					t.Fatalf("after %s: %v", at, err)
				}
			}
			check("the grant")
			prevToken := tc.token
			for i, s := range tc.steps {
				at := fmt.Sprintf("step %d (%s)", i, s.ev)
				var arg int64
				ev := s.ev
				if _, err := fmt.Sscanf(s.ev, "reserved %d", &arg); err == nil {
					ev = "reserved"
				} else if _, err := fmt.Sscanf(s.ev, "reserved-stale %d", &arg); err == nil {
					ev = "reserved-stale"
				}
				switch ev {
				case "pass", "pass many":
					ttl := s.ttl
					if ttl == 0 {
						ttl = ct
					}
					rounds := 1
					if ev == "pass many" {
						rounds = int(c.last - c.next - Block/2)
					}
					for range rounds {
						got := c.passable(now, ttl, tc.batch)
						if got != s.passable {
							t.Fatalf("%s: passable = %v, want %v (%+v)", at, got, s.passable, *c)
						}
						if !got {
							break
						}
						token, reserve := c.pass(fmt.Sprint("owner-", i))
						if token <= prevToken {
							t.Fatalf("%s: token %d is not above the previous %d", at, token, prevToken)
						}
						prevToken = token
						if ev == "pass" && (token != s.token || reserve != s.reserve) {
							t.Fatalf("%s: pass = %d, reserve %v; want %d, %v", at, token, reserve, s.token, s.reserve)
						}
						if ev == "pass many" && reserve {
							t.Fatalf("%s: asked to reserve at token %d, last %d", at, token, c.last)
						}
					}
				case "q":
					c.queued()
				case "reconnect":
					c.reconnected()
				case "renewed":
					c.renewed(now, true)
				case "renew-refused":
					c.renewed(now, false)
				case "reserved":
					c.reserved(c.last, uint64(arg), nil)
				case "reserved-stale":
					c.reserved(c.last-1, uint64(arg), nil)
				case "reserve-refused":
					c.reserved(c.last, 0, errors.New("refused"))
				case "forced":
					c.forcedOff()
				case "end":
					c.end()
				default:
					d, err := time.ParseDuration(strings.TrimPrefix(s.ev, "wait "))
					if err != nil || !strings.HasPrefix(s.ev, "wait ") {
						t.Fatalf("unknown event %q", s.ev)
					}
					now = now.Add(d)
				}
				check(at)
			}
		})
	}
}

// invariants checks what chain.go promises of a chain's state.
func (c *Chain) invariants() error {
	switch {
	case c.cur == 0 && c.curOwner != "":
		return fmt.Errorf("an ended chain has an owner %q", c.curOwner)
	case c.cur != 0 && c.cur >= c.next:
		return fmt.Errorf("the current token %d is not below the next %d", c.cur, c.next)
	case c.next > c.last+1:
		return fmt.Errorf("the next token %d is beyond the last reserved %d", c.next, c.last)
	}
	return nil
}
