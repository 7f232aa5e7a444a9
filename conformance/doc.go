// Package conformance is the exported test suite that every golocker driver
// must pass — ours and yours. It drives a driver through package locker's
// public API (and the backend SPI where the API cannot reach), runs the
// checks that each declared capability needs, and fails a driver whose
// declaration does not match what it does.
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{
//			Name: "mydriver",
//			NewDriver: func(ctx context.Context) (backend.Driver, error) {
//				return mydriver.New(addr)
//			},
//		})
//	}
//
// Each check is a subtest named as a sentence (TestConformance/exclusion/...)
// with a time bound, so a hang fails instead of stalling the run. Timing
// checks use bounds generous enough for a loaded CI machine; like nettest,
// they can give false negatives on an overloaded machine, never false
// positives. Run the suite under the race detector.
//
// The suite imports package testing: production code must not import it.
package conformance
