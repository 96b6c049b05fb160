package storage

import (
	"sync"

	"github.com/strata-stream/strata/internal/vfs"
)

// Preallocation (Config.Preallocate, Kafka's preallocate). On ext4 an fsync of
// a file that grew commits the journal (the new size and extents); an fsync
// that only overwrote blocks already written and synced does not, and takes
// about half as long (docs/benchmarks.md, session 10). So with Preallocate a
// zeroer goroutine keeps zeroed, fsynced bytes ahead of the active segment's
// write position, and the appender's writes, and the flusher's fsyncs, land on
// blocks already on disk. The cost: every byte of the log is written twice
// (the zeros, then the data), and up to a window of zeros per active segment.
//
// Rules:
//  1. The zeroer works in bursts: once less than the refill mark (half the
//     window) is zeroed ahead of the appender, it writes zeros up to a window
//     ahead in chunks and fsyncs them once. A burst's writes dirty the file's
//     metadata until its fsync, and every fsync of the file in that time
//     commits the journal; between bursts the appender's fsyncs find it clean.
//     Each chunk's pages are written back to the disk as soon as the chunk is
//     written (vfs.WriteBacker), not left for the burst's fsync: an fsync
//     writes every dirty page of the file, so a flusher's fsync during a
//     burst wrote up to the whole burst's zeros (32 MiB) while its producers
//     waited, 20-90 ms at 10,000 records/s (docs/benchmarks.md, session 24).
//  2. The appender never waits for a zero write or its fsync, with one
//     exception: a write that would overlap the one chunk the zeroer is
//     writing at that moment (the appender caught up with the whole window)
//     waits for that page-cache write to finish, never for an fsync. Past the
//     zeroed bytes it writes on the plain growing file.
//  3. The zeroer never writes below the appender's end: it claims each chunk
//     under mu, starting at or above appendEnd, which the appender moves under
//     mu before it writes.
//  4. The file is longer than the log while the segment is active. Every reader
//     uses the segment's size (the logical end), never the file's. A roll,
//     Close and truncation stop the zeroer first; roll and Close then cut the
//     file to its logical size before their fsync, so sealed segments, the
//     clean-shutdown marker and older binaries see exact files.
//  5. After a crash the active segment may end in zeros: recovery reads a zero
//     length as a torn batch and cuts the file there (recover.go), as Strata
//     without preallocation does too.
//  6. A failed fsync of the zeroer fails the log (it shares the file with the
//     flusher: the error must not be lost to it). A failed zero write only
//     stops preallocation for the segment.
//  7. The zeroer runs only during a burst, so an idle log holds no goroutine.

// Preallocation window and chunk: a burst zeroes up to the window
// (preallocWindowFor) ahead of the write position, defaultPreallocChunk per claim (what the
// appender may wait for), in writes the size of the appender's last write
// (a power of two in [minZeroWrite, defaultPreallocChunk]). The page cache
// keeps the folio size a write created, and an fsync writes every dirty
// folio whole: zeros written 1 MiB at a time under 16 KiB appends made every
// fsync write 1 MiB folios (disk bytes 24x the data's, Linux 6.18), and zeros
// written 16 KiB at a time under 1 MiB appends made their fsyncs slower than
// on a growing file (docs/benchmarks.md). Sized like the appends, the folios
// are what the growing file would have had.
const (
	defaultPreallocWindow = 64 << 20
	defaultPreallocChunk  = 1 << 20
	minZeroWrite          = 16 << 10
)

// preallocWindowFor is the window of a log whose segments hold segmentBytes:
// at most a sixteenth of a segment, and at least one chunk. The coordinators'
// topics (100 MiB segments, appends of a few hundred bytes, preallocated by
// default) so keep 6.25 MiB of zeros ahead of each active partition, not 64.
func preallocWindowFor(segmentBytes int64) int64 {
	return max(min(defaultPreallocWindow, segmentBytes/16), defaultPreallocChunk)
}

// zeroChunk is the largest write's zero bytes, only ever read.
var zeroChunk = make([]byte, defaultPreallocChunk)

// zeroWriteSize is the write size the zeroer uses after an append of n bytes.
func zeroWriteSize(n int) int64 {
	size := int64(minZeroWrite)
	for size < defaultPreallocChunk && size*2 <= int64(n) {
		size *= 2
	}
	return size
}

// zeroer keeps the window ahead of one active segment; the Log owns it under
// appendMu (Log.pre) and stops it before the segment stops being active.
type zeroer struct {
	l                     *Log
	seg                   *segment
	limit                 int64 // the segment's largest size: nothing is zeroed past it
	window, refill, chunk int64
	mu                    struct {
		sync.Mutex
		appendEnd    int64 // the appender's end: no zero write starts below it
		writeSize    int64 // the zeroer's write size (zeroWriteSize of the last append)
		zeroEnd      int64 // zeros written up to here
		writing      bool  // a chunk [wStart, wEnd) is being written
		wStart, wEnd int64
		running      bool // the goroutine runs
		stopped      bool
		failed       bool       // a zero write or fsync failed: preallocation is off for the segment
		idle         *sync.Cond // signalled when a chunk write ends or the goroutine exits
	}
}

func newZeroer(l *Log, seg *segment) *zeroer {
	z := &zeroer{l: l, seg: seg, limit: l.conf().SegmentBytes,
		window: l.conf().preallocWindow, refill: l.conf().preallocWindow / 2,
		chunk: min(l.conf().preallocChunk, defaultPreallocChunk)}
	z.mu.appendEnd, z.mu.zeroEnd = seg.size, seg.size
	z.mu.idle = sync.NewCond(&z.mu.Mutex)
	return z
}

// beforeWrite is called by the appender, under appendMu, before it writes n
// bytes at pos: it waits only if the write overlaps the chunk being written
// (rule 1), then moves appendEnd and starts a burst of the zeroer once less
// than the refill mark is zeroed ahead.
func (z *zeroer) beforeWrite(pos int64, n int) {
	end := pos + int64(n)
	z.mu.Lock()
	defer z.mu.Unlock()
	for z.mu.writing && end > z.mu.wStart && pos < z.mu.wEnd {
		z.l.stats.preallocWaits.Add(1)
		z.mu.idle.Wait()
	}
	z.mu.appendEnd = end
	z.mu.writeSize = zeroWriteSize(n)
	if !z.mu.running && z.refillLocked() {
		z.mu.running = true
		z.seg.acquire()
		go z.run()
	}
}

// refillLocked reports whether a burst should start: less than the refill
// mark is zeroed ahead of the appender and the segment has room.
func (z *zeroer) refillLocked() bool {
	return !z.mu.stopped && !z.mu.failed && z.mu.zeroEnd < z.limit &&
		z.mu.zeroEnd-z.mu.appendEnd < z.refill
}

// nextChunkLocked returns the next chunk of the burst, or ok false when the
// window is full (or the segment's end reached) or the zeroer must stop.
func (z *zeroer) nextChunkLocked() (start, end int64, ok bool) {
	if z.mu.stopped || z.mu.failed {
		return 0, 0, false
	}
	start = max(z.mu.zeroEnd, z.mu.appendEnd)
	end = min(start+z.chunk, z.limit)
	return start, end, start < end && end <= z.mu.appendEnd+z.window
}

// run zeroes chunks until the window is full and fsyncs them once: one burst
// dirties the file's metadata (size, extents) for one journal commit, and
// the appender's fsyncs between bursts find it clean. It goes on with another
// burst if the appender already used the refill mark up, and exits otherwise.
func (z *zeroer) run() {
	defer z.seg.release()
	wrote := false
	for {
		z.mu.Lock()
		start, end, ok := z.nextChunkLocked()
		if !ok && (!wrote || z.mu.stopped || z.mu.failed) {
			z.mu.running = false
			z.mu.idle.Broadcast()
			z.mu.Unlock()
			return
		}
		if !ok {
			// The burst is written: make it durable.
			z.mu.Unlock()
			wrote = false
			if err := z.seg.log.Sync(); err != nil {
				z.l.fail(err)
				z.mu.Lock()
				z.mu.failed = true
				z.mu.Unlock()
				continue
			}
			z.mu.Lock()
			again := z.refillLocked()
			if !again {
				z.mu.running = false
				z.mu.idle.Broadcast()
			}
			z.mu.Unlock()
			if !again {
				return
			}
			continue
		}
		z.mu.writing, z.mu.wStart, z.mu.wEnd = true, start, end
		ws := z.mu.writeSize
		z.mu.Unlock()

		var err error
		for p := start; p < end && err == nil; p += ws {
			_, err = z.seg.log.WriteAt(zeroChunk[:min(ws, end-p)], p)
		}

		z.mu.Lock()
		z.mu.writing = false
		if err == nil {
			z.mu.zeroEnd = end
			wrote = true
		} else {
			z.mu.failed = true
		}
		z.mu.idle.Broadcast()
		z.mu.Unlock()
		if err != nil {
			z.l.stats.preallocFailures.Add(1)
			continue
		}
		z.l.stats.preallocBytes.Add(end - start)
		if w, ok := z.seg.log.(vfs.WriteBacker); ok {
			// An error is no failure of the zeros: the burst's fsync writes
			// what this did not, and reports its own.
			_ = w.WriteBack(start, end-start)
		}
	}
}

// stop stops the zeroer and waits until it writes no more (at most the end
// of one chunk's write and fsync). appendMu is held.
func (z *zeroer) stop() {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.mu.stopped = true
	for z.mu.running {
		z.mu.idle.Wait()
	}
}

// haltPrealloc stops the active segment's zeroer, if one runs. The file may
// still be longer than the segment: a truncation cuts or deletes it itself.
// appendMu is held.
func (l *Log) haltPrealloc() {
	if z := l.pre; z != nil {
		l.pre = nil
		z.stop()
	}
}

// trimPrealloc stops the zeroer and cuts the active segment's file back to
// the segment's size, before a roll or Close fsyncs it: zeros may lie past
// it. appendMu is held.
func (l *Log) trimPrealloc() error {
	l.haltPrealloc()
	if !l.conf().Preallocate {
		return nil
	}
	s := l.active()
	// The file's own size, not the zeroer's count: a failed write may have
	// grown it part way.
	size, err := s.log.Size()
	if err != nil {
		return err
	}
	if size > s.size {
		if err := s.log.Truncate(s.size); err != nil {
			return err
		}
		s.wrote()
	}
	return nil
}

// preallocBeforeWrite lets the zeroer of the active segment s know of a write
// of n bytes at pos, creating it on the segment's first write.
func (l *Log) preallocBeforeWrite(s *segment, pos int64, n int) {
	if !l.conf().Preallocate {
		return
	}
	if l.pre == nil || l.pre.seg != s {
		l.pre = newZeroer(l, s)
	}
	l.pre.beforeWrite(pos, n)
}
