package main

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// ms is a time in the synthetic histories: milliseconds as Unix ns.
func ms(n int64) int64 { return n * int64(time.Millisecond) }

// holdEvents is one worker's complete round on name.
func holdEvents(w int, name string, token uint64, call, ret, rel, relRet int64, relEv string) []event {
	return []event{
		{T: ms(call), W: w, Ev: evAcqCall, Name: name},
		{T: ms(ret), W: w, Ev: evAcqOK, Name: name, Token: token},
		{T: ms(ret + 1), W: w, Ev: evWrite, Name: name, Token: token, Msg: "ok"},
		{T: ms(rel), W: w, Ev: evRelCall, Name: name, Token: token},
		{T: ms(relRet), W: w, Ev: relEv, Name: name, Token: token},
	}
}

func concat(evs ...[]event) []event {
	var out []event
	for _, e := range evs {
		out = append(out, e...)
	}
	return out
}

func TestCheck(t *testing.T) {
	ttl := 2 * time.Second
	tests := []struct {
		name        string
		events      []event
		faults      []faultRecord
		fence       fenceStats
		unexplained int
		explained   int
		lin         porcupine.CheckResult
	}{{
		name: "holds one after another are fine",
		events: concat(
			holdEvents(0, "a", 1, 0, 10, 50, 55, evRelOK),
			holdEvents(1, "a", 2, 5, 56, 90, 95, evRelOK),
		),
		lin: porcupine.Ok,
	}, {
		name: "an overlap without a fault is a violation",
		events: concat(
			holdEvents(0, "a", 1, 0, 10, 500, 505, evRelOK),
			holdEvents(1, "a", 2, 5, 100, 200, 205, evRelOK),
		),
		unexplained: 2, // the overlap and the linearizability check
		lin:         porcupine.Illegal,
	}, {
		name: "an overlap after a frozen holder's lease may have ended is explained",
		events: concat(
			holdEvents(0, "a", 1, 0, 10, 5000, 5005, evRelLost),
			holdEvents(1, "a", 2, 5, 2500, 2600, 2605, evRelOK),
		),
		faults:    []faultRecord{{Kind: fPause, W: 0, Start: ms(100), End: ms(4500)}},
		explained: 1,
		lin:       porcupine.Ok,
	}, {
		name: "an overlap before the frozen holder's lease could end is a violation",
		events: concat(
			holdEvents(0, "a", 1, 0, 10, 5000, 5005, evRelLost),
			holdEvents(1, "a", 2, 5, 900, 1000, 1005, evRelOK),
		),
		faults:      []faultRecord{{Kind: fPause, W: 0, Start: ms(100), End: ms(4500)}},
		unexplained: 2,
		lin:         porcupine.Illegal,
	}, {
		name: "a release that succeeds after another acquired is a violation",
		events: concat(
			holdEvents(0, "a", 1, 0, 10, 5000, 5005, evRelOK),
			holdEvents(1, "a", 2, 5, 2500, 2600, 2605, evRelOK),
		),
		faults:      []faultRecord{{Kind: fPause, W: 0, Start: ms(100), End: ms(4500)}},
		explained:   1,
		unexplained: 1, // linearizability: w0's release cannot succeed
		lin:         porcupine.Illegal,
	}, {
		name: "tokens must increase in real-time order",
		events: concat(
			holdEvents(0, "a", 5, 0, 10, 50, 55, evRelOK),
			holdEvents(1, "a", 4, 60, 70, 90, 95, evRelOK),
		),
		unexplained: 1,
		lin:         porcupine.Ok,
	}, {
		name: "tokens that step back while a failover settles are explained",
		events: concat(
			holdEvents(0, "a", 129, 3000, 3010, 3050, 3055, evRelOK),
			holdEvents(1, "a", 104, 7000, 7100, 7200, 7205, evRelOK),
		),
		faults:    []faultRecord{{Kind: fFailover, W: -1, Start: ms(500), End: ms(2700)}},
		explained: 1,
		lin:       porcupine.Ok,
	}, {
		name: "tokens that step back long after a failover are a violation",
		events: concat(
			holdEvents(0, "a", 129, 30000, 30010, 30050, 30055, evRelOK),
			holdEvents(1, "a", 104, 31000, 31100, 31200, 31205, evRelOK),
		),
		faults:      []faultRecord{{Kind: fFailover, W: -1, Start: ms(500), End: ms(2700)}},
		unexplained: 1,
		lin:         porcupine.Ok,
	}, {
		name: "a killed holder's lock is free once its lease may have ended",
		events: concat(
			[]event{{T: ms(0), W: 0, Ev: evAcqCall, Name: "a"}, {T: ms(10), W: 0, Ev: evAcqOK, Name: "a", Token: 1}},
			holdEvents(1, "a", 2, 5, 2100, 2200, 2205, evRelOK),
		),
		faults: []faultRecord{{Kind: fKill, W: 0, Start: ms(50), End: ms(50)}},
		lin:    porcupine.Ok,
	}, {
		name: "names are independent",
		events: concat(
			holdEvents(0, "a", 1, 0, 10, 500, 505, evRelOK),
			holdEvents(1, "b", 1, 5, 100, 200, 205, evRelOK),
		),
		lin: porcupine.Ok,
	}, {
		name:        "a lost update is a violation",
		events:      holdEvents(0, "a", 1, 0, 10, 50, 55, evRelOK),
		fence:       fenceStats{Accepted: 1, LostUpdates: 1},
		unexplained: 1,
		lin:         porcupine.Ok,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := check(tt.events, tt.faults, ttl, tt.fence, 10*time.Second)
			explained := len(r.Violations) - r.unexplained()
			if r.unexplained() != tt.unexplained || explained != tt.explained || r.Linearizable != tt.lin {
				t.Errorf("got %d unexplained, %d explained, %s; want %d, %d, %s; violations: %+v",
					r.unexplained(), explained, r.Linearizable, tt.unexplained, tt.explained, tt.lin, r.Violations)
			}
		})
	}
}

func TestFreeAfterDeath(t *testing.T) {
	events := concat(
		[]event{{T: ms(0), W: 0, Ev: evAcqCall, Name: "a"}, {T: ms(10), W: 0, Ev: evAcqOK, Name: "a", Token: 1}},
		holdEvents(1, "a", 2, 5, 2100, 2200, 2205, evRelOK),
	)
	r := check(events, []faultRecord{{Kind: fKill, W: 0, Start: ms(50), End: ms(50)}}, 2*time.Second, fenceStats{}, 10*time.Second)
	if len(r.FreeAfterDeath) != 1 || r.FreeAfterDeath[0] != 2050*time.Millisecond {
		t.Fatalf("free after death = %v, want [2.05s]", r.FreeAfterDeath)
	}
}
