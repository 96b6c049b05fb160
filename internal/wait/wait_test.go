package wait

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	var calls atomic.Int32
	if !Until(time.Now().Add(time.Minute), func() bool { return calls.Add(1) == 3 }) {
		t.Fatal("Until gave up on a condition that came true")
	}
	if calls.Load() != 3 {
		t.Fatalf("cond called %d times, want 3", calls.Load())
	}
	start := time.Now()
	if Until(start.Add(30*time.Millisecond), func() bool { return false }) {
		t.Fatal("Until reported a condition that never held")
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Fatal("Until gave up before its deadline")
	}
}

// fatalRecorder records a Fatalf instead of ending the test.
type fatalRecorder struct {
	testing.TB
	failed string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.failed = format
}

func TestWithinFails(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	Within(rec, 10*time.Millisecond, "nothing", func() bool { return false })
	if rec.failed == "" {
		t.Fatal("Within did not fail the test")
	}
	rec = &fatalRecorder{TB: t}
	For(rec, "something", func() bool { return true })
	if rec.failed != "" {
		t.Fatal("For failed on a condition that held")
	}
}

// TestBuffer: goroutines write while the test reads (run with -race).
func TestBuffer(t *testing.T) {
	var b Buffer
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				fmt.Fprintln(&b, "line")
			}
		}()
	}
	For(t, "400 lines", func() bool { return strings.Count(b.String(), "line\n") == 400 })
	for range 4 {
		<-done
	}
}
