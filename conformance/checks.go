package conformance

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

func needFencing(s *suite) string {
	if !s.caps.Fencing {
		return "the driver does not declare Fencing"
	}
	return ""
}

func needExpiry(s *suite) string {
	if !s.caps.Expiry {
		return "the driver does not declare Expiry"
	}
	return ""
}

// needCrash: expiry and a way to crash a client.
func needCrash(s *suite) string {
	if why := needExpiry(s); why != "" {
		return why
	}
	if s.h.Crash == nil && s.caps.SessionLease {
		return "the driver declares SessionLease and the harness has no Crash hook"
	}
	return ""
}

// needCut: expiry, and a connection the suite can cut (a session's
// traffic included, for a SessionLease driver).
func needCut(s *suite) string {
	if why := needExpiry(s); why != "" {
		return why
	}
	return needFaults(s)
}

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

func needNotify(s *suite) string {
	if !s.caps.Notify {
		return "the driver does not declare Notify"
	}
	return ""
}

func needFIFO(s *suite) string {
	if !s.caps.FIFO {
		return "the driver does not declare FIFO"
	}
	return ""
}
