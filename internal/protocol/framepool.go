package protocol

import (
	"math/bits"
	"sync"
)

// Request frames of the keys in Server.ReuseFrameKeys are read into buffers from
// size-classed pools and go back to their pool once the request is done (its
// response written, or nothing to write). A Produce frame is mostly record
// batches that the handler writes to the log and then forgets, so reusing its
// buffer saves allocating and zeroing about a megabyte per request, and the
// garbage collection that follows. Frames of other keys are allocated fresh,
// because their handlers may keep slices of them (a group member's metadata).
//
// Classes are powers of two from minPooledFrame to maxPooledFrame (the largest
// frame allocated in full up front). Frames of more than minPooledFrame/2 bytes
// and at most maxPooledFrame are pooled; others are allocated as before.
//
// The smallest class holds a Produce request of one 1 KiB record: at linger 0
// (latency-bound producers, an e2e run at 10,000 records/s) nearly every
// request is that small, and those frames were most of the broker's
// allocations while the pools started at 16 KiB.
const (
	minPooledFrame = 1 << 10
	maxPooledFrame = eagerFrameBytes
	frameClasses   = 11 // minPooledFrame << (frameClasses-1) == maxPooledFrame
)

// framePools[i] holds *[]byte buffers of length minPooledFrame<<i. Pointers, so
// that putting one back does not allocate.
var framePools [frameClasses]sync.Pool

// frameClass returns the pool class of a frame of size bytes, or -1 when frames
// of that size are not pooled.
func frameClass(size int) int {
	if size <= minPooledFrame/2 || size > maxPooledFrame {
		return -1
	}
	if size <= minPooledFrame {
		return 0
	}
	return bits.Len(uint(size-1)) - bits.Len(uint(minPooledFrame-1))
}

// getFrame returns a pooled buffer of at least size bytes, or nil when frames of
// that size are not pooled. Its bytes are whatever the last user left.
func getFrame(size int) *[]byte {
	c := frameClass(size)
	if c < 0 {
		return nil
	}
	if b, ok := framePools[c].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, minPooledFrame<<c)
	return &b
}

// putFrame returns a buffer from getFrame to its pool. Nothing may use it after.
func putFrame(b *[]byte) {
	if b == nil {
		return
	}
	if c := frameClass(len(*b)); c >= 0 && len(*b) == minPooledFrame<<c {
		framePools[c].Put(b)
	}
}
