package storage

import (
	"errors"
	"path/filepath"

	"github.com/strata-stream/strata/internal/vfs"
)

// Recycling (with Config.Preallocate). A segment file that retention or
// DeleteRecords removes has every block written and fsynced, which is what
// preallocation's zeros buy (prealloc.go); so rather than removing it, the log
// keeps one such file and the next roll makes it the new active segment's
// file, with no zeros written. Its old bytes stay behind the write position
// until the appends overwrite them, and they must never pass for the log's:
//
//  1. Only a file that retention or DeleteRecords released is kept (never one
//     a truncation or compaction removed: a truncated segment holds offsets
//     above the new end), and only one with no second name (a tier's link
//     would see the new bytes).
//  2. It is reused only for a segment whose base is at or above the released
//     segment's end, and only when no reader holds it (refs == 1, the pool's):
//     every stale batch in it then has a base offset below the new segment's
//     base. Recovery already cuts a segment at the first batch whose base
//     offset is below the expected next offset (segment.rebuildLocked), so
//     after a crash the log ends at the last batch written, even when the
//     stale bytes behind it are whole batches with valid CRCs.
//  3. Readers use the segment's size, never the file's; a roll and Close cut
//     the file to that size (trimPrealloc), as for a preallocated file.
//  4. While kept, the file is named <base>.log.deleted, which every Open
//     removes (this version's and older ones'): a crash forgets the pool.
//     Close releases it.

// keepForRecycling keeps the last of gone (segments retention or
// DeleteRecords took out of the log and renamed .deleted) for the next roll,
// in place of the file kept before, if preallocation is on and the file has a
// single name. It takes its own reference, so the caller still releases every
// segment of gone.
func (l *Log) keepForRecycling(gone []*segment) {
	if !l.conf().Preallocate || len(gone) == 0 {
		return
	}
	s := gone[len(gone)-1]
	if linker, ok := l.fsys.(vfs.Linker); ok {
		n, err := linker.Links(s.path(logSuffix + deletedSuffix))
		if err != nil && !errors.Is(err, errors.ErrUnsupported) || n > 1 {
			return
		}
	}
	s.acquire()
	if old := l.swapRecycled(s); old != nil {
		old.release()
	}
}

// swapRecycled makes s the kept file and returns the one kept before.
func (l *Log) swapRecycled(s *segment) *segment {
	l.recycle.Lock()
	defer l.recycle.Unlock()
	old := l.recycle.seg
	l.recycle.seg = s
	return old
}

// takeRecycled returns the kept file, renamed to the new segment's name, for
// a segment at base, with the size it had (all written and synced); nil if
// there is none it may use (rule 2). appendMu is held; the caller fsyncs the
// directory.
func (l *Log) takeRecycled(base int64) (vfs.File, int64) {
	s := l.swapRecycled(nil)
	if s == nil {
		return nil, 0
	}
	if s.next > base || s.refs.Load() != 1 {
		s.release()
		return nil, 0
	}
	size, err := s.log.Size()
	if err == nil {
		err = l.fsys.Rename(s.path(logSuffix+deletedSuffix), filepath.Join(l.dir, segmentName(base, logSuffix)))
	}
	if err != nil {
		s.release() // removes the .deleted file
		return nil, 0
	}
	l.stats.segmentsRecycled.Add(1)
	// The file is the new segment's now: s is dropped without a release.
	return s.log, size
}

// dropRecycled releases the kept file, if any (Close).
func (l *Log) dropRecycled() {
	if s := l.swapRecycled(nil); s != nil {
		s.release()
	}
}
