//go:build !linux

package bench

import "time"

// fineTimer has no fine clock off Linux: pacer.wait falls back to Go's timers.
type fineTimer struct{}

func newFineTimer() *fineTimer { return nil }

func (*fineTimer) sleepUntil(time.Time) bool { return false }

func (*fineTimer) close() {}
