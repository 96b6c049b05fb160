package storage

import (
	"fmt"
	"slices"
)

// Truncate removes every batch at or after offset: a follower cutting a tail that
// diverges from its leader. If offset falls inside a batch, that whole batch goes
// too, so the log end offset may end below offset. The leader-epoch cache is
// truncated with the log and both checkpoints are rewritten; WaitDurable callers
// for removed offsets get ErrTruncated. A Chunk already read past the cut may see
// io.EOF. Truncating at or below the first segment's base empties the log and
// restarts it at offset (as TruncateFullyAndStartAt). At or past the log end only
// the epoch cache is truncated, at the log end.
func (l *Log) Truncate(offset int64) error {
	l.checkCut(offset)
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, offset)
	}
	if offset >= l.mu.leo.Load() {
		// Nothing to cut from the log, but an epoch may start at its end with no
		// records yet (a leader deposed before it appended): it goes, as in Kafka.
		if l.dropEpochsFrom(l.mu.leo.Load()) {
			if err := l.writeCheckpoints(false); err != nil {
				return l.fail(err)
			}
		}
		return nil
	}
	var err error
	if offset <= l.mu.segments[0].base {
		err = l.truncateFullyLocked(offset)
	} else {
		err = l.truncateLocked(offset)
	}
	if err == nil {
		err = l.removeSnapshotsAbove(l.mu.leo.Load())
	}
	if err != nil {
		return l.fail(err)
	}
	return nil
}

// TruncateFullyAndStartAt deletes every segment and restarts the log, empty, at
// offset: a follower whose log lies wholly outside its leader's.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: start at %d", ErrOffsetOutOfRange, offset)
	}
	if err := l.truncateFullyLocked(offset); err != nil {
		return l.fail(err)
	}
	return nil
}

// truncations returns how many truncations the log has had (each bumps it).
func (l *Log) truncations() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.truncGen
}

// truncateLocked cuts the log inside its segments; appendMu is held and
// first base < offset < leo.
func (l *Log) truncateLocked(offset int64) error {
	// The cut truncates and fsyncs the file (or deletes it): no trim needed.
	l.haltPrealloc()
	s := l.segmentFor(offset)
	// The cut changes s's file, and s then takes appends: a file a tier linked
	// into its store must keep its bytes.
	s, err := l.unshareLocked(s)
	if err != nil {
		return err
	}
	segs := l.mu.segments
	i := slices.Index(segs, s)
	cutPos, newLEO, err := s.cutPoint(offset, s.size, &l.stats)
	if err != nil {
		return err
	}

	// Publish first, so no new reader goes past the cut, then change the files.
	drop := segs[i+1:]
	oldSize := s.size
	l.publishCut(segs[:i+1], cutPos, newLEO)

	if err := l.truncateIndexes(s, cutPos, newLEO); err != nil {
		return err
	}
	if err := s.truncateAbortIndex(oldSize, cutPos, newLEO); err != nil {
		return err
	}
	// The later segments go first, durably: were s cut first, a crash between
	// the two would leave them past a hole, which recovery keeps (a gap is
	// legal), bringing the cut tail back.
	if err := l.deleteTail(drop); err != nil {
		return err
	}
	if err := s.log.Truncate(cutPos); err != nil {
		return err
	}
	s.wrote()
	if err := l.syncSegment(s); err != nil {
		return err
	}
	// s's index files on disk no longer match it: recovery must scan it.
	l.recoveryPoint.Store(min(l.recoveryPoint.Load(), s.base))
	if err := l.writeCheckpoints(true); err != nil {
		return err
	}
	if err := l.clampCleanerLocked(newLEO); err != nil {
		return err
	}
	l.kickFlusher()
	return nil
}

// checkCut makes, before appendMu is taken, the first-use checks of the
// segment a truncation at offset cuts: its indexes loaded and its max
// timestamp checked (cutPoint), and the index entries the cut starts from.
// The first use of a segment opened from disk reads its index files and the
// log, and may rebuild its indexes; made under appendMu, it held up appends.
// The truncation then finds them made and makes again only what a change
// meanwhile undid (a roll, a compaction, a rebuild). An error is left to the
// truncation, which meets it again and fails the log as before.
func (l *Log) checkCut(offset int64) {
	v, ok := l.acquireCut(offset)
	if !ok {
		return
	}
	defer v.s.release()
	if _, newLEO, err := v.s.cutPoint(offset, v.size, &l.stats); err == nil {
		rel, _ := relOffset(newLEO, v.s.base)
		v.s.timeAnchor(rel)
	}
}

// acquireCut returns, acquired, the segment holding offset with its extent,
// unless the log is closed or failed or a truncation at offset would not cut
// inside its segments (truncateLocked).
func (l *Log) acquireCut(offset int64) (segmentView, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed || l.mu.failed != nil || offset <= l.mu.segments[0].base || offset >= l.mu.leo.Load() {
		return segmentView{}, false
	}
	return acquireViewLocked(l.segmentForLocked(offset)), true
}

// cutPoint returns where a truncation at offset cuts s, of size bytes: at the
// batch holding offset, or at the first batch after it if compaction removed
// offset; then the offsets from offset up to that batch are empty and the log
// ends at offset. Without such a batch in s, s keeps all its batches and ends
// at offset. s's max timestamp is checked first, which loads its indexes:
// truncateIndexes starts from the time index's last entry below the cut,
// which may be that one.
func (s *segment) cutPoint(offset, size int64, stats *statCounters) (cutPos, newLEO int64, err error) {
	if err := s.checkMaxTimestamp(stats); err != nil {
		return 0, 0, err
	}
	sc := headerScanner(s.log, s.lookup(offset), size)
	defer sc.done()
	if sc.seek(offset) {
		return sc.bpos, min(sc.h.BaseOffset, offset), nil
	}
	if sc.err != nil {
		return 0, 0, corrupt(s.log.Name(), sc.pos, sc.err)
	}
	return size, offset, nil
}

// timeAnchor returns the time index's last entry for an offset below base+rel,
// whether there is one, and the position of the batch it names, found (and
// checked, if read from the file) through the offset index.
func (s *segment) timeAnchor(rel uint32) (anchor timeEntry, pos int64, ok bool) {
	if anchor, ok = s.lastTimeEntryBelow(rel); ok {
		pos = int64(s.entry(func(x *offsetIndex) int { return x.find(anchor.rel) }).pos)
	}
	return anchor, pos, ok
}

// truncateIndexes drops s's index entries at or above newLEO and recomputes its
// timestamps from the remaining batches after the last time-index entry, as Kafka
// does. s becomes the active segment.
func (l *Log) truncateIndexes(s *segment, cutPos, newLEO int64) error {
	rel, _ := relOffset(newLEO, s.base)
	// The batch of the last time-index entry left, found before s.mu is
	// taken: a check reads the log.
	anchor, anchorPos, anchored := s.timeAnchor(rel)
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &s.mu
	m.written, m.end, m.modified = true, cutPos, l.conf().Now()
	m.index.truncate(rel)
	m.index.fileLogSize = min(m.index.fileLogSize, cutPos)
	m.tindex.truncate(rel)
	m.bytesSinceIndex = 0
	m.maxTS, m.maxTSOff = -1, -1
	from := int64(0)
	if last, ok := m.tindex.last(); ok {
		m.maxTS, m.maxTSOff = last.ts, s.base+int64(last.rel)
		if anchored && last == anchor {
			from = anchorPos // else the check rebuilt the indexes: scan them all
		}
	}
	if cutPos == 0 {
		m.firstTS, m.created = -1, l.conf().Now()
		return nil
	}
	sc := headerScanner(s.log, from, cutPos)
	defer sc.done()
	for sc.next() {
		if sc.bpos == 0 {
			m.firstTS = sc.h.MaxTimestamp
		}
		if sc.h.MaxTimestamp > m.maxTS {
			m.maxTS, m.maxTSOff = sc.h.MaxTimestamp, sc.h.BaseOffset
		}
	}
	if sc.err != nil {
		return corrupt(s.log.Name(), sc.pos, sc.err)
	}
	if from > 0 {
		// The scan did not see the first batch; roll by age needs it.
		fs := headerScanner(s.log, 0, cutPos)
		defer fs.done()
		if !fs.next() {
			return corrupt(s.log.Name(), 0, fs.err)
		}
		m.firstTS = fs.h.MaxTimestamp
	}
	return nil
}

// dropEpochsFrom drops the epoch cache's entries starting at or after offset
// and reports whether there were any. appendMu is held.
func (l *Log) dropEpochsFrom(offset int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := l.mu.epochs.truncateFromEnd(offset)
	l.publishEpochLocked()
	return changed
}

// publishCut shows readers the log cut at newLEO: segs, the last of them
// (the new active segment) cut to cutPos bytes. appendMu is held.
func (l *Log) publishCut(segs []*segment, cutPos, newLEO int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.segments = slices.Clone(segs)
	active := segs[len(segs)-1]
	active.size, active.next = cutPos, newLEO
	l.mu.leo.Store(newLEO)
	l.mu.durable.Store(min(l.mu.durable.Load(), newLEO))
	l.mu.logStart.Store(min(l.mu.logStart.Load(), newLEO))
	l.mu.truncGen++
	l.mu.epochs.truncateFromEnd(newLEO)
	l.publishEpochLocked()
	l.notifyLocked()
}

// publishEmpty shows readers the log emptied at offset, s its only segment,
// with no epochs. appendMu is held.
func (l *Log) publishEmpty(s *segment, offset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.segments = []*segment{s}
	l.mu.leo.Store(offset)
	l.mu.logStart.Store(offset)
	l.mu.durable.Store(offset)
	l.mu.truncGen++
	l.mu.epochs.entries = nil
	l.publishEpochLocked()
	l.notifyLocked()
}

// truncateFullyLocked deletes every segment and starts an empty one at offset;
// appendMu is held. The epoch cache is cleared, as in Kafka.
func (l *Log) truncateFullyLocked(offset int64) error {
	l.haltPrealloc() // its segment is deleted
	old := l.mu.segments
	// The producer snapshots describe a log that goes.
	if err := l.removeSnapshotsAbove(-1); err != nil {
		return err
	}
	// Rename the old files away first: the new segment may reuse a base offset.
	if err := l.renameDeleted(old); err != nil {
		return err
	}
	s, err := createSegment(l.fsys, l.dir, offset, l.conf(), l.conf().Now())
	if err != nil {
		return err
	}
	l.publishEmpty(s, offset)
	l.releaseDeleted(old)
	l.stats.segmentsDeleted.Add(int64(len(old)))
	l.recoveryPoint.Store(offset)
	if err := l.writeCheckpoints(true); err != nil {
		return err
	}
	return l.clampCleanerLocked(offset)
}

// deleteSegments removes segments no longer in the published list: their logs are
// renamed to .deleted (durably, so a crash cannot bring them back) and removed
// once FileDeleteDelay has passed and the last Chunk on them is released
// (releaseDeleted); their indexes are removed at once.
func (l *Log) deleteSegments(segs []*segment) error {
	if len(segs) == 0 {
		return nil
	}
	if err := l.renameDeleted(segs); err != nil {
		return err
	}
	l.releaseDeleted(segs)
	l.stats.segmentsDeleted.Add(int64(len(segs)))
	return nil
}

// deleteTail is deleteSegments for the segments after a cut, renamed last
// first: where a crash keeps only some of the renames of a directory applied
// in order, what is left is still a contiguous log.
func (l *Log) deleteTail(segs []*segment) error {
	last := slices.Clone(segs)
	slices.Reverse(last)
	return l.deleteSegments(last)
}

// renameDeleted renames segs' logs to .deleted, removes their index files and
// fsyncs the directory.
func (l *Log) renameDeleted(segs []*segment) error {
	if err := l.renameDeletedUnsynced(segs); err != nil {
		return err
	}
	return l.fsys.SyncDir(l.dir)
}

// renameDeletedUnsynced is renameDeleted without the directory fsync: for
// segments wholly below a log start offset already made durable, which a
// recovery that finds them again deletes (deleteBelowStart).
func (l *Log) renameDeletedUnsynced(segs []*segment) error {
	for _, s := range segs {
		if err := l.fsys.Rename(s.path(logSuffix), s.path(logSuffix+deletedSuffix)); err != nil {
			return err
		}
		s.deleted.Store(true)
		for _, suffix := range []string{indexSuffix, timeIndexSuffix, abortIndexSuffix} {
			if err := l.fsys.Remove(s.path(suffix)); err != nil && !isNotExist(err) {
				return err
			}
		}
	}
	return nil
}
