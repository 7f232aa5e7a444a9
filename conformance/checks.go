package conformance

import "github.com/golocker/locker/backend"

// Capability names used in reports and the feature matrix.
const (
	CapExclusion    = "exclusion"
	CapReentrancy   = "reentrancy"
	CapFencing      = "fencing"
	CapNotify       = "notify"
	CapFIFO         = "fifo"
	CapLostSignal   = "lost-signal"
	CapExpiry       = "expiry"
	CapRenewal      = "renewal"
	CapSessionLease = "session-lease"
	CapInspect      = "inspect"
	CapCancellation = "cancellation"
	CapScale        = "scale"
	CapInput        = "input"
	CapDeclaration  = "declaration"
	CapOwnership    = "ownership"
	CapFaults       = "faults"
	CapSemaphore    = "semaphore"
	CapRWMutex      = "rwmutex"
	CapMultiLock    = "multilock"
	CapElection     = "election"
)

// checks is the whole suite, in the order it runs.
var checks = concat(
	declarationChecks,
	inputChecks,
	exclusionChecks,
	waitingChecks,
	ownershipChecks,
	expiryChecks,
	lostChecks,
	fencingChecks,
	notifyChecks,
	scaleChecks,
	closeChecks,
	faultChecks,
	semaphoreChecks,
	rwmutexChecks,
	multilockChecks,
	electionChecks,
)

func concat(lists ...[]check) []check {
	var all []check
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}

// Checks lists the suite's checks with the capabilities each proves, for
// documentation.
func Checks() []CheckResult {
	out := make([]CheckResult, len(checks))
	for i, c := range checks {
		out[i] = CheckResult{Name: c.name, Proves: c.proves}
	}
	return out
}

// Skip conditions shared by checks.

// declared is the skip condition of a capability the driver must declare:
// what names it, has reads it.
func declared(what string, has func(backend.Capabilities) bool) func(*suite) string {
	return func(s *suite) string {
		if !has(s.caps) {
			return "the driver does not declare " + what
		}
		return ""
	}
}

// all is the skip condition of every one of conds: the first reason found.
func all(conds ...func(*suite) string) func(*suite) string {
	return func(s *suite) string {
		for _, c := range conds {
			if why := c(s); why != "" {
				return why
			}
		}
		return ""
	}
}

var (
	needFencing = declared("Fencing", func(c backend.Capabilities) bool { return c.Fencing })
	needExpiry  = declared("Expiry", func(c backend.Capabilities) bool { return c.Expiry })
	needNotify  = declared("Notify", func(c backend.Capabilities) bool { return c.Notify })
	needFIFO    = declared("FIFO", func(c backend.Capabilities) bool { return c.FIFO })

	// needCrash: expiry and a way to crash a client.
	needCrash = all(needExpiry, func(s *suite) string {
		if s.h.Crash == nil && s.caps.SessionLease {
			return "the driver declares SessionLease and the harness has no Crash hook"
		}
		return ""
	})

	// needCut: expiry, and a connection the suite can cut (a session's
	// traffic included, for a SessionLease driver).
	needCut = all(needExpiry, needFaults)
)

// needFaults: a connection the suite can pause, delay and cut. Any driver
// can be wrapped (FaultyDriver), but a SessionLease driver's session
// traffic bypasses the wrapper: it needs Harness.NewFaultyDriver.
func needFaults(s *suite) string {
	if s.caps.SessionLease && s.h.NewFaultyDriver == nil {
		return "the driver keeps holds alive through a session whose traffic only Harness.NewFaultyDriver can stall"
	}
	return ""
}

func needDrop(s *suite) string {
	if s.h.Drop == nil && !s.ifs.Inspector {
		return "the harness has no Drop hook and the driver cannot force-release (backend.Inspector)"
	}
	return ""
}

// needInspector: the driver implements backend.Inspector.
func needInspector(s *suite) string {
	if !s.ifs.Inspector {
		return "the driver does not implement backend.Inspector"
	}
	return ""
}
