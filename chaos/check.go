package main

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// faultRecord is one fault the coordinator injected. W is the worker it hit,
// or -1 for a fault of the servers (a restart, a leader kill, a failover)
// that every worker sees.
type faultRecord struct {
	Kind  string `json:"kind"`
	W     int    `json:"w"`
	Start int64  `json:"start"`          // Unix ns
	End   int64  `json:"end"`            // Unix ns; = Start for a kill
	Name  string `json:"name,omitempty"` // kill: the name the worker held; server fault: the name it hits, "" for all
	Note  string `json:"note,omitempty"`
}

// Fault kinds.
const (
	fPause    = "pause"    // SIGSTOP the worker past its lease, then SIGCONT
	fKill     = "kill"     // SIGKILL the worker (a new one is started)
	fStall    = "stall"    // stall the worker's connections (FaultNet.Pause)
	fLatency  = "latency"  // delay every reply to the worker
	fCut      = "cut"      // close the worker's connections, refuse new ones
	fRestart  = "restart"  // kill and restart the server
	fLeader   = "leader"   // kill the cluster's leader, restart it later
	fFailover = "failover" // kill the Redis primary: replicas take over
)

// failoverSettle is how long after a failover's end a step back of the
// tokens, or a lost update, is still put down to the failover (see
// failoverAt in check).
const failoverSettle = 10 * time.Second

// serverFault reports whether a fault kind hits every worker.
func serverFault(kind string) bool {
	return kind == fRestart || kind == fLeader || kind == fFailover
}

// hold is one acquisition of a name by a worker, from its events.
type hold struct {
	W        int
	Name     string
	Token    uint64
	AcqCall  int64
	AcqRet   int64
	RelCall  int64  // 0: never released (the worker was killed or the run ended)
	RelRet   int64  // 0 with RelCall: the release did not return
	RelKind  string // evRelOK, evRelLost, evRelError, or ""
	Told     bool   // the worker saw Lost() close or Unlock said the hold had ended
	Write    string // "ok", "refused" or ""
	Bound    int64  // earliest time the hold may have ended on its own (lease); MaxInt64 if none
	BoundWhy string // the fault or reason behind Bound
}

// violation is one finding of the check.
type violation struct {
	Kind      string `json:"kind"` // overlap, token-order, lost-update, fence-order, linearizability
	Explained string `json:"explained,omitempty"`
	Detail    string `json:"detail"`
}

// checkResult is what the check found in one run's history.
type checkResult struct {
	Holds          []hold
	Violations     []violation // unexplained and explained
	Linearizable   porcupine.CheckResult
	FreeAfterDeath []time.Duration
	FreeDetail     []string // what each FreeAfterDeath measured
	Unavailable    []time.Duration
}

// unexplained counts the violations without an explanation.
func (r *checkResult) unexplained() int {
	n := 0
	for _, v := range r.Violations {
		if v.Explained == "" {
			n++
		}
	}
	return n
}

// buildHolds turns the workers' events into holds. Events of one worker are
// in its own order (one stdout).
func buildHolds(events []event) []hold {
	byW := make(map[int][]event)
	var ws []int
	for _, e := range events {
		if _, ok := byW[e.W]; !ok {
			ws = append(ws, e.W)
		}
		byW[e.W] = append(byW[e.W], e)
	}
	sort.Ints(ws)
	var holds []hold
	for _, w := range ws {
		var cur *hold
		var call int64
		for _, e := range byW[w] {
			switch e.Ev {
			case evAcqCall:
				call = e.T
			case evAcqOK:
				holds = append(holds, hold{W: w, Name: e.Name, Token: e.Token, AcqCall: call, AcqRet: e.T, Bound: math.MaxInt64})
				cur = &holds[len(holds)-1]
			case evWrite:
				if cur != nil {
					cur.Write = e.Msg
				}
			case evLost:
				if cur != nil {
					cur.Told = true
				}
			case evRelCall:
				if cur != nil {
					cur.RelCall = e.T
				}
			case evRelOK, evRelLost, evRelError:
				if cur != nil {
					cur.RelRet, cur.RelKind = e.T, e.Ev
					cur.Told = cur.Told || e.Ev == evRelLost
					cur = nil
				}
			}
		}
	}
	return holds
}

// setBounds computes each hold's Bound: the earliest time at which its
// lease may have ended without a bug. A fault that stops renewals (the
// holder frozen, killed, its connections stalled or cut, the server
// restarted or its leader killed) at time f lets the lease end at
// f + ttl/2 at the earliest: the last renewal (every ttl/3) was after
// f - ttl/3 and the lease lasts ttl after it, so ttl/2 is a safe lower
// bound that leaves the drivers' own margins out of the question. A Redis
// failover may lose the hold at once (replication is asynchronous: the
// new primary may never have seen it), so its bound is the failover's
// start. A holder that was told its hold was lost, with no fault, had its
// lease end for want of renewal (a starved process); a lease lasts at
// least a TTL from its grant, so AcqCall + ttl/2 is a lower bound too.
func setBounds(holds []hold, faults []faultRecord, ttl time.Duration) {
	half := int64(ttl / 2)
	for i := range holds {
		h := &holds[i]
		end := h.RelCall
		if end == 0 {
			end = math.MaxInt64
		}
		for _, f := range faults {
			if f.Kind == fLatency || (f.W != h.W && !serverFault(f.Kind)) {
				continue
			}
			if f.Start >= end || f.End < h.AcqCall {
				continue
			}
			b := max(f.Start, h.AcqCall) + half
			if f.Kind == fFailover {
				b = max(f.Start, h.AcqCall)
			}
			if b < h.Bound {
				h.Bound, h.BoundWhy = b, f.Kind
			}
		}
		if h.Told && h.BoundWhy == "" {
			h.Bound, h.BoundWhy = h.AcqCall+half, "expired-unfaulted"
		}
	}
}

// check runs every check on one run's history.
func check(events []event, faults []faultRecord, ttl time.Duration, fs fenceStats, porcupineTimeout time.Duration) *checkResult {
	holds := buildHolds(events)
	setBounds(holds, faults, ttl)
	r := &checkResult{Holds: holds}
	byName := make(map[string][]hold)
	for _, h := range holds {
		byName[h.Name] = append(byName[h.Name], h)
	}
	// failoverAt reports whether a failover, or the settling after it, met
	// [from, to]. After the fault's end (the old master restarted) the
	// topology goes on converging for seconds — the restarted master is
	// made a replica, replicas resync — and a 60 s run saw the fence
	// counter step back by 25 four seconds after a failover had ended:
	// asynchronous replication loses acknowledged writes (Redis's
	// documentation says so), and the fence refused the stale writes.
	failoverAt := func(from, to int64) bool {
		for _, f := range faults {
			if f.Kind == fFailover && f.Start <= to && f.End+int64(failoverSettle) >= from {
				return true
			}
		}
		return false
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		hs := byName[n]
		sort.Slice(hs, func(i, j int) bool { return hs[i].AcqRet < hs[j].AcqRet })
		for i := range hs {
			a := &hs[i]
			var explained []*hold
			for j := i + 1; j < len(hs); j++ {
				b := &hs[j]
				// Mutual exclusion: b's acquisition returned while a had not
				// begun to release (or never did: killed).
				if a.RelCall == 0 || b.AcqRet < a.RelCall {
					switch {
					case b.AcqRet > a.Bound:
						explained = append(explained, b)
					default:
						r.Violations = append(r.Violations, violation{Kind: "overlap", Detail: fmt.Sprintf("%s: w%d acquired token %d at +%s while w%d held token %d (acquired at +%s, release called at %s); w%d's lease could end at the earliest at %s (%s); w%d's write: %q",
							n, b.W, b.Token, rel(b.AcqRet, holds), a.W, a.Token, rel(a.AcqRet, holds), relOr(a.RelCall, holds), a.W, relOr(a.Bound, holds), orNone(a.BoundWhy), a.W, a.Write)})
					}
				}
			}
			// One explained overlap per stale hold, however many holds
			// came after its lease may have ended.
			if len(explained) > 0 && a.RelCall != 0 {
				r.Violations = append(r.Violations, violation{Kind: "overlap", Explained: a.BoundWhy, Detail: fmt.Sprintf("%s: w%d (token %d; %s: its lease could end from +%s) still believed it held when %d later holds began, the first w%d token %d at +%s; its write: %q; its release: %s",
					n, a.W, a.Token, a.BoundWhy, rel(a.Bound, holds), len(explained), explained[0].W, explained[0].Token, rel(explained[0].AcqRet, holds), a.Write, a.RelKind)})
			}
		}
		// Fencing: in real-time order, tokens strictly increase. One
		// finding per hold whose token is not above that of every hold
		// that returned before it was called.
		for j := range hs {
			b := &hs[j]
			for i := range hs[:j] {
				a := &hs[i]
				if a.AcqRet < b.AcqCall && a.Token >= b.Token {
					v := violation{Kind: "token-order", Detail: fmt.Sprintf("%s: w%d got token %d at +%s after w%d got token %d at +%s",
						n, b.W, b.Token, rel(b.AcqRet, holds), a.W, a.Token, rel(a.AcqRet, holds))}
					if failoverAt(a.AcqCall, b.AcqRet) {
						v.Explained = fFailover
					}
					r.Violations = append(r.Violations, v)
					break
				}
			}
		}
	}
	if fs.LostUpdates > 0 {
		v := violation{Kind: "lost-update", Detail: fmt.Sprintf("%d accepted writes overwrote a value their writer had not read", fs.LostUpdates)}
		if failoverAt(0, math.MaxInt64) {
			v.Explained = fFailover
		}
		r.Violations = append(r.Violations, v)
	}
	if fs.OutOfOrder > 0 {
		r.Violations = append(r.Violations, violation{Kind: "fence-order", Detail: fmt.Sprintf("the fence accepted %d writes below an accepted token", fs.OutOfOrder)})
	}
	r.Linearizable = porcupine.CheckOperationsTimeout(lockModel, operations(holds), porcupineTimeout)
	if r.Linearizable == porcupine.Illegal {
		r.Violations = append(r.Violations, violation{Kind: "linearizability", Detail: "the history is not linearizable against the lock-with-leases model"})
	}
	r.FreeAfterDeath, r.Unavailable, r.FreeDetail = measures(holds, faults)
	return r
}

// measures computes the time from each kill of a holding worker to the next
// acquisition of its name by another worker, and from each server fault to
// the first acquisition invoked after it began, of the fault's name if it
// has one (a Cluster master's slot), else of any name.
func measures(holds []hold, faults []faultRecord) (free, unavail []time.Duration, detail []string) {
	for _, f := range faults {
		switch {
		case f.Kind == fKill && f.Note == "":
			// Only a kill of a worker that held a lock, had not begun to
			// release it and was not frozen at the time counts.
			var victim *hold
			for i := range holds {
				h := &holds[i]
				if h.W == f.W && h.AcqRet < f.Start && h.RelCall == 0 {
					victim = h
				}
			}
			if victim == nil || victim.BoundWhy != fKill {
				continue
			}
			if d, ok := nextAcq(holds, f.Start, victim.Name, f.W); ok {
				free = append(free, d)
				detail = append(detail, fmt.Sprintf("w%d killed at +%s holding %s token %d (acquired at +%s); next acquisition %s later",
					f.W, rel(f.Start, holds), victim.Name, victim.Token, rel(victim.AcqRet, holds), d.Round(time.Millisecond)))
			}
		case serverFault(f.Kind):
			// The first acquisition invoked after the fault began: one
			// already in flight may have been granted before it.
			best := int64(math.MaxInt64)
			for _, h := range holds {
				if h.AcqCall >= f.Start && h.AcqRet < best && (f.Name == "" || h.Name == f.Name) {
					best = h.AcqRet
				}
			}
			if best != math.MaxInt64 {
				unavail = append(unavail, time.Duration(best-f.Start))
			}
		}
	}
	return free, unavail, detail
}

func nextAcq(holds []hold, after int64, name string, notW int) (time.Duration, bool) {
	best := int64(math.MaxInt64)
	for _, h := range holds {
		if h.AcqRet > after && h.AcqRet < best && h.W != notW && (name == "" || h.Name == name) {
			best = h.AcqRet
		}
	}
	if best == math.MaxInt64 {
		return 0, false
	}
	return time.Duration(best - after), true
}

func rel(t int64, holds []hold) string {
	var t0 int64 = math.MaxInt64
	for _, h := range holds {
		t0 = min(t0, h.AcqCall)
	}
	return time.Duration(t - t0).Round(time.Millisecond).String()
}

func relOr(t int64, holds []hold) string {
	if t == math.MaxInt64 {
		return "never"
	}
	return rel(t, holds)
}

func orNone(s string) string {
	if s == "" {
		return "no fault"
	}
	return s
}

// The porcupine model: a lock with leases. An acquisition is legal when
// the lock is free or when its holder's lease may have ended (the holder's
// Bound) before the acquisition returned; a release that succeeded is
// legal only by the holder; a release that reported the hold already gone,
// or whose outcome is unknown, is legal in any state and frees the lock if
// the releaser held it.
type lockInput struct {
	acquire bool
	w       int
	name    string
	bound   int64 // acquire: the hold's Bound
	ret     int64 // acquire: when it returned
	sure    bool  // release: it returned nil
}

type lockState struct {
	holder int // -1: free
	bound  int64
}

var lockModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := make(map[string][]porcupine.Operation)
		var order []string
		for _, op := range history {
			n := op.Input.(lockInput).name
			if _, ok := by[n]; !ok {
				order = append(order, n)
			}
			by[n] = append(by[n], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, n := range order {
			out = append(out, by[n])
		}
		return out
	},
	Init: func() any { return lockState{holder: -1} },
	Step: func(state, input, _ any) (bool, any) {
		s, in := state.(lockState), input.(lockInput)
		if in.acquire {
			if s.holder == -1 || s.bound < in.ret {
				return true, lockState{holder: in.w, bound: in.bound}
			}
			return false, s
		}
		if s.holder == in.w {
			return true, lockState{holder: -1}
		}
		return !in.sure, s
	},
	Equal: func(a, b any) bool { return a.(lockState) == b.(lockState) },
	DescribeOperation: func(input, _ any) string {
		in := input.(lockInput)
		if in.acquire {
			return fmt.Sprintf("w%d acquire %s", in.w, in.name)
		}
		return fmt.Sprintf("w%d release %s", in.w, in.name)
	},
}

// operations turns holds into porcupine operations: an acquisition per
// hold and a release per hold that was released. A release that did not
// return (the worker was killed meanwhile) gets the end of the history as
// its return.
func operations(holds []hold) []porcupine.Operation {
	var last int64
	for _, h := range holds {
		last = max(last, h.AcqRet, h.RelRet)
	}
	var ops []porcupine.Operation
	for _, h := range holds {
		ops = append(ops, porcupine.Operation{ClientId: h.W, Input: lockInput{acquire: true, w: h.W, name: h.Name, bound: h.Bound, ret: h.AcqRet}, Call: h.AcqCall, Return: h.AcqRet})
		if h.RelCall != 0 {
			ret := h.RelRet
			if ret == 0 {
				ret = last + 1
			}
			// A release of a hold that a Redis failover may have lost is
			// not sure either: it may have acted on a primary that had
			// not seen the hold, or on one that had lost the next.
			sure := h.RelKind == evRelOK && h.BoundWhy != fFailover
			ops = append(ops, porcupine.Operation{ClientId: h.W, Input: lockInput{w: h.W, name: h.Name, sure: sure}, Call: h.RelCall, Return: ret})
		}
	}
	return ops
}
