package bench

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fineTimer sleeps on a timerfd read through Go's netpoller, which wakes as the
// kernel's high-resolution timer fires instead of on the netpoller's millisecond
// ticks, without holding a thread or spinning.
type fineTimer struct {
	fd  int
	f   *os.File
	buf [8]byte
}

// newFineTimer returns nil if the kernel refuses a timerfd.
func newFineTimer() *fineTimer {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil
	}
	return &fineTimer{fd: fd, f: os.NewFile(uintptr(fd), "timerfd")}
}

// sleepUntil returns once t has passed; false if the timer failed, t unreached.
func (t *fineTimer) sleepUntil(until time.Time) bool {
	d := time.Until(until)
	if d <= 0 {
		return true
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds())}
	if unix.TimerfdSettime(t.fd, 0, &spec, nil) != nil {
		return false
	}
	_, err := t.f.Read(t.buf[:])
	return err == nil
}

func (t *fineTimer) close() { t.f.Close() }
