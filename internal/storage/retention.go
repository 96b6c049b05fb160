package storage

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// DeleteRecords advances the log start offset to offset (Kafka's DeleteRecords;
// the caller checks offset <= the high-water mark) and deletes the segments that
// lie wholly below it. The new start is checkpointed before any file goes, so a
// crash never exposes records below it, and before DeleteRecords returns.
// Moving the start backwards is a no-op.
func (l *Log) DeleteRecords(offset int64) error {
	gone, err := l.deleteRecords(offset)
	if err != nil {
		return err
	}
	return l.finishStartAdvance(gone)
}

func (l *Log) deleteRecords(offset int64) ([]*segment, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return nil, err
	}
	if offset > l.mu.leo.Load() || offset < 0 {
		return nil, fmt.Errorf("%w: delete records below %d, log is [%d, %d]", ErrOffsetOutOfRange, offset, l.mu.logStart.Load(), l.mu.leo.Load())
	}
	if offset <= l.mu.logStart.Load() {
		return nil, nil
	}
	gone, err := l.advanceStartLocked(offset, 0)
	if err != nil {
		return nil, l.fail(err)
	}
	return gone, nil
}

// advanceStartLocked moves the log start offset to start and takes the first
// dropFirst segments plus any others wholly below start out of the segment
// list, which it returns. If that would take the active segment, a new empty
// one is rolled first (as Kafka does). appendMu held.
//
// Nothing else is done under appendMu: the caller lets it go and then calls
// finishStartAdvance, which makes the new start durable and only then deletes
// the segments. Each step's fsyncs (the recovery checkpoint's file and
// directory) used to hold up appends, as did closing and removing the files (a
// pass over 95 segments of 1 MiB: about 0.5 s). Until the start is durable a
// crash brings the old start back with every segment still there, as a crash
// before the pass would have.
func (l *Log) advanceStartLocked(start int64, dropFirst int) ([]*segment, error) {
	segs := l.mu.segments
	k := dropFirst
	for k+1 < len(segs) && segs[k+1].base <= start {
		k++
	}
	if k == len(segs) {
		if _, err := l.rollLocked(l.conf().Now()); err != nil {
			return nil, err
		}
		segs = l.mu.segments
	}
	l.publishStart(segs, k, start)
	l.startMoved.Store(true)
	return segs[:k], nil
}

// publishStart shows readers the log without the first k of its segments segs,
// starting at start or, if higher, at the first segment left. appendMu is held.
func (l *Log) publishStart(segs []*segment, k int, start int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k > 0 {
		l.mu.segments = slices.Clone(segs[k:])
		start = max(start, segs[k].base)
	}
	l.mu.logStart.Store(max(l.mu.logStart.Load(), start))
	// The epoch checkpoint is not rewritten for this: Open cuts the cache at
	// the checkpointed log start (writeCheckpoints).
	l.mu.epochs.truncateFromStart(l.mu.logStart.Load())
}

// finishStartAdvance is the second half of a move of the log start
// (advanceStartLocked), run after appendMu is let go: it makes the recovery
// checkpoint, with the new start, durable, then renames the segments that left
// the list to .deleted and removes their indexes, and releases them (each file
// is closed and removed once FileDeleteDelay has passed and no Chunk holds
// it; releaseDeleted). The renames need no directory fsync: a recovery that
// finds a segment wholly below the durable start again deletes it.
func (l *Log) finishStartAdvance(gone []*segment) error {
	if err := l.renameBelowStart(gone); err != nil {
		releaseSegments(gone)
		return err
	}
	l.releaseDeleted(gone)
	return nil
}

// renameBelowStart makes the recovery checkpoint durable and renames gone to
// .deleted for finishStartAdvance. Moves of the start that overlap share a
// checkpoint write (ckptMu: each reads the log start after the previous
// write).
func (l *Log) renameBelowStart(gone []*segment) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	if err := l.writable(); err != nil {
		// Closed: Close wrote the checkpoint, and the next Open deletes what
		// lies below its start. Failed: nothing more is written.
		return err
	}
	if l.startMoved.Swap(false) {
		if err := l.writeRecoveryCheckpointLocked(true); err != nil {
			return l.fail(err)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	if err := l.renameDeletedUnsynced(gone); err != nil {
		return l.fail(err)
	}
	l.stats.segmentsDeleted.Add(int64(len(gone)))
	return nil
}

// releaseSegments drops the log's reference to segments that left it: each
// file is closed and removed once no Chunk holds it any more.
func releaseSegments(segs []*segment) {
	for _, s := range segs {
		s.release()
	}
}

// EnforceRetention deletes the oldest segments that break the retention rules,
// never touching data at or above highWatermark, and returns how many it deleted.
// As in Kafka, three rules each delete a prefix of the segments, in this order:
// segments wholly below the log start offset; segments whose newest timestamp
// (or, without timestamps, last modification) is older than RetentionAge by Now; and the
// oldest segments while the log exceeds RetentionBytes by at least their size.
// When every segment is deletable the active one is rolled first, so the log keeps
// its end offset. The broker calls this periodically for every log
// (log.retention.check.interval.ms).
func (l *Log) EnforceRetention(highWatermark int64) (int, error) {
	return l.enforceRetention(highWatermark, l.conf().RetentionAge, l.conf().RetentionBytes)
}

// EnforceRetentionLimits is EnforceRetention with the age and size limits
// given in place of the log's, as they are: negative is no limit and zero
// deletes every segment it may (a topic's retention.ms=0 or retention.bytes=0,
// which Config would read as its defaults).
func (l *Log) EnforceRetentionLimits(highWatermark int64, retentionAge time.Duration, retentionBytes int64) (int, error) {
	return l.enforceRetention(highWatermark, retentionAge, retentionBytes)
}

// enforceRetention is EnforceRetention with the age and size limits given
// (negative: none); a tier passes its local ones.
func (l *Log) enforceRetention(highWatermark int64, retentionAge time.Duration, retentionBytes int64) (int, error) {
	now := l.conf().Now()
	if retentionAge >= 0 {
		if err := l.checkTimestamps(highWatermark, now.Add(-retentionAge).UnixMilli()); err != nil {
			return 0, err
		}
	}
	gone, err := l.retainLocked(highWatermark, now, retentionAge, retentionBytes)
	if err != nil || len(gone) == 0 {
		return 0, err
	}
	return len(gone), l.finishStartAdvance(gone)
}

// retainLocked picks the segments enforceRetention deletes at now and takes
// them out of the list (advanceStartLocked).
func (l *Log) retainLocked(highWatermark int64, now time.Time, retentionAge time.Duration, retentionBytes int64) ([]*segment, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return nil, err
	}
	segs := l.mu.segments
	leo, logStart := l.mu.leo.Load(), l.mu.logStart.Load()

	// deletable reports whether segment i may go at all: wholly below the
	// high-water mark, and not an empty active segment.
	deletable := func(i int) bool {
		upper := leo
		if i+1 < len(segs) {
			upper = segs[i+1].base
		}
		return upper <= highWatermark && (i+1 < len(segs) || segs[i].size > 0)
	}
	k := 0 // segs[:k] will be deleted
	for k+1 < len(segs) && segs[k+1].base <= logStart && deletable(k) {
		k++
	}
	if retentionAge >= 0 {
		limit := now.Add(-retentionAge).UnixMilli()
		for k < len(segs) && deletable(k) {
			newest, err := segs[k].newestTimestamp(&l.stats)
			if err != nil {
				return nil, err
			}
			if newest >= limit {
				break
			}
			k++
		}
	}
	if retentionBytes >= 0 {
		var total int64
		for _, s := range segs[k:] {
			total += s.size
		}
		diff := total - retentionBytes
		for k < len(segs) && deletable(k) && diff >= segs[k].size {
			diff -= segs[k].size
			k++
		}
	}
	if k == 0 {
		return nil, nil
	}
	start := leo
	if k < len(segs) {
		start = segs[k].base
	}
	gone, err := l.advanceStartLocked(start, k)
	if err != nil {
		return nil, l.fail(err)
	}
	return gone, nil
}

// newestTimestamp is the segment's largest timestamp in milliseconds
// (maxTimestamp), or, when no batch carries a timestamp, its last modification
// (lastModified), as Kafka's LogSegment.largestTimestamp.
func (s *segment) newestTimestamp(stats *statCounters) (int64, error) {
	ts, _, err := s.maxTimestamp(stats)
	if err != nil || ts >= 0 {
		return ts, err
	}
	return s.lastModified().UnixMilli(), nil
}

// checkTimestamps checks, before appendMu is taken, the max timestamps that a
// pass deciding by age reads under it: those of the sealed segments wholly
// below highWatermark, oldest first, up to the first whose newest timestamp
// is at least stop. The first check of a segment opened from disk reads its
// index files and the log, and may rebuild its indexes (checkMaxTimestamp);
// made under appendMu, it held up appends. The pass then finds the values
// checked, and checks only a segment that is not (one installed meanwhile).
func (l *Log) checkTimestamps(highWatermark, stop int64) error {
	views := l.sealedViews()
	defer releaseViews(views)
	for _, v := range views {
		if v.next > highWatermark {
			return nil
		}
		newest, err := v.s.newestTimestamp(&l.stats)
		if err != nil || newest >= stop {
			return err
		}
	}
	return nil
}

// sealedViews returns, acquired, the sealed segments of a writable log with
// their extents.
func (l *Log) sealedViews() []segmentView {
	views, _ := l.sealedViewsAndSize()
	return views
}

// RunRetention calls EnforceRetention with the high-water mark hwm returns every
// interval until ctx ends (returning its error) or retention fails (returning that
// error). A broker with many logs may instead schedule EnforceRetention itself.
func (l *Log) RunRetention(ctx context.Context, interval time.Duration, hwm func() int64) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if _, err := l.EnforceRetention(hwm()); err != nil {
				return err
			}
		}
	}
}
