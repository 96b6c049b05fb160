// Package wait is how Strata's tests wait for state: poll a condition with a
// deadline, never a bare sleep. Every package's tests use it, so a deadline or a
// polling pace is changed in one place.
// Buffer is the log sink such a condition often reads.
package wait

import (
	"testing"
	"time"
)

// DefaultTimeout bounds For. It is generous: tests run with the race detector on
// two shared cores, where elections and rebalances take seconds.
const DefaultTimeout = 30 * time.Second

// For polls cond until it holds, failing the test with what after DefaultTimeout.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, DefaultTimeout, what, cond)
}

// Within is For with its own deadline.
func Within(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(time.Now().Add(timeout), cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Eventually polls cond until it returns nil, failing the test with what and
// cond's last error after timeout: For for conditions that can say what is
// still wrong.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	var last error
	if !Until(time.Now().Add(timeout), func() bool { last = cond(); return last == nil }) {
		t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, last)
	}
}

// Until polls cond until it holds (true) or the deadline passes (false). The
// pace starts at a millisecond and backs off to 20ms, so fast conditions cost
// little time and slow ones little CPU.
func Until(deadline time.Time, cond func() bool) bool {
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
	return true
}
