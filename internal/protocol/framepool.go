package protocol

import (
	"io"
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
// Classes are powers of two from minPooledFrame to maxPooledFrame. Frames of
// more than minPooledFrame/2 bytes and at most maxPooledFrame are pooled;
// others are allocated as before. A frame of more than eagerFrameBytes (a
// franz-go Produce to several partitions carries up to a megabyte for each)
// takes a free pooled buffer as it is; when its class has none, its first
// eagerFrameBytes are read before a buffer of the class is allocated, so a
// size prefix alone never makes the broker allocate more than that. Before,
// such frames grew a fresh buffer by doubling as bytes arrived: a 4 MB
// request allocated and zeroed 7 MB and copied 3 MB, 54% more broker CPU per
// GB than the same bytes in 1 MB requests (session 29).
//
// The smallest class holds a Produce request of one 1 KiB record: at linger 0
// (latency-bound producers, an e2e run at 10,000 records/s) nearly every
// request is that small, and those frames were most of the broker's
// allocations while the pools started at 16 KiB.
const (
	minPooledFrame = 1 << 10
	maxPooledFrame = 64 << 20
	frameClasses   = 17 // minPooledFrame << (frameClasses-1) == maxPooledFrame
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
	if b := freeFrame(size); b != nil {
		return b
	}
	return newFrame(size)
}

// freeFrame returns a free pooled buffer of at least size bytes, or nil when
// its class has none (or frames of that size are not pooled).
func freeFrame(size int) *[]byte {
	c := frameClass(size)
	if c < 0 {
		return nil
	}
	b, _ := framePools[c].Get().(*[]byte)
	return b
}

// newFrame allocates a buffer of size's class, or returns nil when frames of
// that size are not pooled.
func newFrame(size int) *[]byte {
	c := frameClass(size)
	if c < 0 {
		return nil
	}
	b := make([]byte, minPooledFrame<<c)
	return &b
}

// readPooledFrame reads a frame body of size bytes (pooled: frameClass(size)
// >= 0) into a pooled buffer, allocating one past eagerFrameBytes only once
// that many bytes have arrived.
func readPooledFrame(r io.Reader, size int) (frame []byte, pooled *[]byte, err error) {
	got := 0
	if pooled = freeFrame(size); pooled == nil && size > eagerFrameBytes {
		head := getFrame(eagerFrameBytes)
		got, err = io.ReadFull(r, (*head)[:eagerFrameBytes])
		if err == nil {
			pooled = newFrame(size)
			copy(*pooled, (*head)[:got])
		}
		putFrame(head)
		if err != nil {
			return nil, nil, truncatedFrame(err, got, size)
		}
	} else if pooled == nil {
		pooled = newFrame(size)
	}
	frame = (*pooled)[:size:size] // no slice of it reaches the stale bytes past size
	if n, err := io.ReadFull(r, frame[got:]); err != nil {
		putFrame(pooled)
		return nil, nil, truncatedFrame(err, got+n, size)
	}
	return frame, pooled, nil
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
