// Package locallock is the in-process driver: locks shared by the goroutines
// of one process, with the same API, leases, fencing and lost signal as the
// remote drivers. Use it in tests, in single-process programs, and as the
// reference that package conformance is checked against.
//
// # URLs
//
//	mem://            the process-wide default namespace
//	mem://NAME        a separate namespace; every Open of the same NAME shares it
//
// A URL takes no query parameters.
//
// # Capabilities
//
// Fencing (one atomic counter for the whole Store, so tokens of a name keep
// growing even after its state was freed), Notify and FIFO (waiters are
// queued on channels and the lock is handed to the first), LostSignal (a
// lease that runs out or is forced off closes Lost at once), Expiry,
// Inspect, Weighted (semaphores and read-write locks, queued on channels in
// arrival order). Not CrossProcess.
//
// Per-name state exists only while the name is held or waited for, so a
// program that uses millions of distinct names over time does not grow.
package locallock
