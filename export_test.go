package locker

// SetInTest replaces the test for a test binary that the in-process guard
// of Open uses, and returns the function that restores it.
func SetInTest(f func() bool) (restore func()) {
	old := inTest
	inTest = f
	return func() { inTest = old }
}
