package storage

import (
	"os"
	"slices"

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
// (with the kernel's readahead) instead of memory. The drop is advice
// (vfs.CacheDropper; a file system without it keeps everything): it never
// changes what a read returns, and it covers only bytes an fsync covered, so it
// starts no write-back. A rolled segment keeps its cached end until the next
// segment's first drop: the log's tail is then wholly in the new segment.
//
// The kernel caches a file in folios of up to maxFolioBytes and drops only
// folios wholly inside a range, so a drop reaches back maxFolioBytes into the
// range before it: a folio that straddled the last drop's end goes with the
// next drop. Without that overlap every drop's boundary left its folio cached
// for good, about 8% of what one producer's 1 MB batches wrote.

// DefaultCacheTailBytes is how much of its newest durable data a log keeps in the
// page cache by default.
const DefaultCacheTailBytes = 64 << 20

// minCacheDrop is the least a drop covers: logs appending small batches advise
// the kernel once per this many bytes, not once per fsync.
const minCacheDrop = 1 << 20

// maxFolioBytes is the largest folio the page cache holds a file in: Linux's
// MAX_PAGECACHE_ORDER, a PMD (2 MiB) with 4 KiB pages.
const maxFolioBytes = 2 << 20

// pageSize aligns drops: the kernel drops only whole pages inside the range, so
// a range ending mid-page would leave that page cached for good.
var pageSize = int64(os.Getpagesize())

// dropCache drops from the page cache the bytes of s below synced (the size an
// fsync just made durable) minus the log's cached tail. Only the flusher calls it
// (cacheDropped is its own), holding a reference to s.
func (l *Log) dropCache(s *segment, synced int64) {
	keep := l.conf().CacheTailBytes
	d, ok := s.log.(vfs.CacheDropper)
	if keep < 0 || !ok {
		return
	}
	end := max(synced-keep, 0) / pageSize * pageSize
	if end < s.cacheDropped { // truncated: bytes below end may be cached again
		s.cacheDropped = end
		return
	}
	if end-s.cacheDropped < minCacheDrop {
		return
	}
	if s.cacheDropped == 0 {
		l.dropRolled(s)
	}
	s.dropCacheTo(d, end)
}

// dropCacheTo drops s's cached pages below end, from a folio before where
// its last drop reached; the flusher's alone, as cacheDropped.
func (s *segment) dropCacheTo(d vfs.CacheDropper, end int64) {
	from := max(s.cacheDropped-maxFolioBytes, 0)
	if err := d.DropCache(from, end-from); err == nil {
		s.cacheDropped = end
	}
}

// dropRolled drops what the segment before s left cached when it was rolled:
// s, the active segment, now holds the log's cached tail.
func (l *Log) dropRolled(s *segment) {
	l.mu.RLock()
	segs := l.mu.segments
	i := slices.Index(segs, s)
	if i < 1 || segs[i-1].cacheDropped >= segs[i-1].size {
		l.mu.RUnlock()
		return
	}
	// Up to the page past its end: the kernel drops only whole pages in a
	// range, and the file ends in that one.
	prev, end := segs[i-1], (segs[i-1].size+pageSize-1)/pageSize*pageSize
	prev.acquire()
	l.mu.RUnlock()
	defer prev.release()
	if d, ok := prev.log.(vfs.CacheDropper); ok {
		prev.dropCacheTo(d, end)
	}
}
