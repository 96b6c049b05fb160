package interop

import (
	"sync"
	"time"
)

// repeat runs a step every interval on a goroutine of its own (a writer that
// keeps a workload going while a test kills something) until stop, or until
// the step fails.
type repeat struct {
	stopc chan struct{}
	done  chan struct{}
	once  sync.Once
	err   error // the step's failure; read once done is closed
}

func startRepeat(interval time.Duration, step func() error) *repeat {
	r := &repeat{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-r.stopc:
				return
			case <-tick.C:
			}
			if r.err = step(); r.err != nil {
				return
			}
		}
	}()
	return r
}

// stop ends the loop, waits for it and returns the step's failure, if any. It
// may be called more than once.
func (r *repeat) stop() error {
	r.once.Do(func() { close(r.stopc) })
	<-r.done
	return r.err
}

// ended reports whether the loop has ended, and the step's failure if one
// ended it.
func (r *repeat) ended() (bool, error) {
	select {
	case <-r.done:
		return true, r.err
	default:
		return false, nil
	}
}
