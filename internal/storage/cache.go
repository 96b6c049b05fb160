package storage

import (
	"os"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
)

// The page cache behind the active segment.
//
// An append copies its bytes into the page cache, and every page the file grows
// by is one the kernel takes from free memory while there is any: a log's data
// would stay cached until memory runs out. Where free memory is handed back to a
// hypervisor (a VM's free page reporting, as on the machine docs/benchmarks.md
// measures on), a page the machine has not used lately faults on the host when
// it is first written, and that copy became most of the broker's CPU on
// produce: 59% of a one-node acks=all produce's profile, its CPU per GB varying
// 0.8-3.7 s between runs with how much of the written memory was fresh. A page
// just freed costs nothing of the kind.
//
// So after each fsync the flusher drops from the page cache what the fsync made
// durable, but the newest CacheTailBytes of the segment: the next appends reuse
// the pages just freed, and the cache keeps each log's tail, which followers and
// the consumers keeping up read. A reader further behind reads from the disk
// (with the kernel's readahead) instead of memory. A reader a little behind
// keeps what it has yet to read: the drop stops at the lowest position read
// from the segment in the last one to two readWindows, if that is within
// readerTailFactor tails of the end (a fan-out's readers under load were 64-256
// MiB behind, and read half of what they were sent from the disk; see
// docs/benchmarks.md, session 14). The drop is advice
// (vfs.CacheDropper; a file system without it keeps everything): it never
// changes what a read returns, and it covers only bytes an fsync covered, so it
// starts no write-back. What a segment's last fsync before its roll left cached
// is left to the kernel.

// DefaultCacheTailBytes is how much of its newest durable data a log keeps in the
// page cache by default.
const DefaultCacheTailBytes = 64 << 20

// minCacheDrop is the least a drop covers: logs appending small batches advise
// the kernel once per this many bytes, not once per fsync.
const minCacheDrop = 1 << 20

// readerTailFactor bounds what readers keep cached: positions read up to this
// many times CacheTailBytes behind the durable end.
const readerTailFactor = 4

// readWindow is how long a read keeps the pages above it cached: a reader is
// honoured by the drops of the window it read in and of the next.
const readWindow = time.Second

// pageSize aligns drops: the kernel drops only whole pages inside the range, so
// a range ending mid-page would leave that page cached for good.
var pageSize = int64(os.Getpagesize())

// dropCache drops from the page cache the bytes of s below synced (the size an
// fsync just made durable) minus the log's cached tail, and below what recent
// readers have yet to read. Only the flusher calls it (s.cacheDropped and the
// read window are its own), holding a reference to s.
func (l *Log) dropCache(s *segment, synced int64) {
	keep := l.conf().CacheTailBytes
	d, ok := s.log.(vfs.CacheDropper)
	if keep < 0 || !ok {
		return
	}
	recent := s.readLow.Load()
	if now := time.Now(); now.Sub(s.readLowSince) >= readWindow {
		recent = s.readLow.Swap(0)
		s.readLowPrev, s.readLowSince = recent, now
	}
	end := dropEnd(synced, keep, lowestRead(recent, s.readLowPrev), s.cacheDropped)
	if end < s.cacheDropped { // truncated: bytes below end may be cached again
		s.cacheDropped = end
		return
	}
	if end-s.cacheDropped < minCacheDrop {
		return
	}
	if err := d.DropCache(s.cacheDropped, end-s.cacheDropped); err == nil {
		s.cacheDropped = end
	}
}

// dropEnd is where a drop may end (page-aligned): synced less the cached
// tail, but not past low, the lowest position recently read (-1: none), when
// that is within readerTailFactor tails of synced and at or above dropped (a
// read below what was dropped came from the disk and keeps nothing).
func dropEnd(synced, keep, low, dropped int64) int64 {
	end := synced - keep
	if low >= dropped && low < end {
		end = max(low, synced-readerTailFactor*keep)
	}
	return max(end, 0) / pageSize * pageSize
}

// noteRead records that a read of s started at pos, for dropCache.
func (s *segment) noteRead(pos int64) {
	v := pos + 1
	for {
		cur := s.readLow.Load()
		if (cur != 0 && cur <= v) || s.readLow.CompareAndSwap(cur, v) {
			return
		}
	}
}

// lowestRead is the lower of two readLow values as a position, -1 if neither
// holds one.
func lowestRead(a, b int64) int64 {
	switch {
	case a == 0:
		return b - 1
	case b == 0:
		return a - 1
	}
	return min(a, b) - 1
}
