package storage

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// load builds the log's state from its directory. After a clean shutdown it trusts
// the files (no batch is read); otherwise it recovers: segments wholly below the
// recovery point are trusted, every later one is read batch by batch, its indexes
// rebuilt, and the log cut at the first torn, corrupt or discontinuous batch.
func (l *Log) load() error {
	names, err := l.fsys.List(l.dir)
	if err != nil {
		return err
	}
	if changed, err := l.finishSwap(names); err != nil {
		return err
	} else if changed {
		if names, err = l.fsys.List(l.dir); err != nil {
			return err
		}
	}
	type indexFile struct {
		base int64
		name string
	}
	var bases []int64
	var indexes []indexFile
	for _, name := range names {
		suffix := segmentFileSuffix(name)
		switch {
		case strings.HasSuffix(name, deletedSuffix) || strings.HasSuffix(name, tmpSuffix):
			// Leftovers of a deletion or a side-file write cut short. (finishSwap
			// removed cleaned segments no swap installs.)
			if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil && !isNotExist(err) {
				return err
			}
		case strings.HasSuffix(name, swapSuffix):
			return fmt.Errorf("%w: %s: a Kafka swap file Strata does not install", ErrCorruptSegment, filepath.Join(l.dir, name))
		case suffix != "":
			base, ok := parseOffsetName(name, suffix)
			switch {
			case !ok && suffix == logSuffix:
				// Skipping a segment not named as Strata names it would lose its records.
				return fmt.Errorf("%w: %s: not named by a %d-digit base offset", ErrCorruptSegment, filepath.Join(l.dir, name), baseDigits)
			case !ok:
				// An index file holds no record, and a segment's missing index is
				// rebuilt: leave it, as Kafka leaves one beside its segment.
			case suffix == logSuffix:
				bases = append(bases, base)
			default:
				indexes = append(indexes, indexFile{base, name})
			}
		default:
			if off, ok := parseSnapshotName(name); ok {
				l.snapshots = append(l.snapshots, off)
			}
		}
	}
	slices.Sort(l.snapshots)
	slices.Reverse(l.snapshots)
	slices.Sort(bases)
	for _, x := range indexes {
		// An index whose segment is gone (an older build deleting a segment
		// left its aborted-transaction index) is removed, as Kafka removes it.
		if _, found := slices.BinarySearch(bases, x.base); !found {
			if err := l.fsys.Remove(filepath.Join(l.dir, x.name)); err != nil && !isNotExist(err) {
				return err
			}
		}
	}
	for _, base := range bases {
		s, err := openSegment(l.fsys, l.dir, base, l.conf())
		if err != nil {
			return err
		}
		l.mu.segments = append(l.mu.segments, s)
	}
	segs := l.mu.segments
	for i := 0; i+1 < len(segs); i++ {
		segs[i].next = segs[i+1].base
	}

	rc, rcErr, marker, mkErr, hadMarker, err := l.readRecoveryState()
	if err != nil {
		return err
	}
	epochs, epErr := readEpochCheckpoint(l)
	l.savedEpochs, l.savedEpochsOK = epochs, epErr == nil

	if len(segs) == 0 {
		start := int64(0)
		if rcErr == nil {
			start = rc.LogStartOffset
		}
		s, err := createSegment(l.fsys, l.dir, start, l.conf(), l.conf().Now())
		if err != nil {
			return err
		}
		l.mu.segments = []*segment{s}
		l.mu.logStart.Store(start)
		l.mu.leo.Store(start)
		l.mu.durable.Store(start)
		l.recoveryPoint.Store(start)
		if rcErr == nil && epErr == nil {
			l.mu.epochs.entries = slices.Clone(epochs)
			l.mu.epochs.truncateFromEnd(start)
			l.mu.epochs.truncateFromStart(start)
		}
		return l.finishLoad(hadMarker)
	}

	last := segs[len(segs)-1]
	clean := mkErr == nil && rcErr == nil && epErr == nil &&
		marker.ActiveBase == last.base && marker.ActiveSize == last.size &&
		marker.LogEndOffset >= last.base && rc.RecoveryPoint == marker.LogEndOffset
	if clean {
		last.next = marker.LogEndOffset
		l.mu.epochs.entries = slices.Clone(epochs)
		l.recoveryPoint.Store(rc.RecoveryPoint)
		if err := l.loadTrusted(segs); err != nil {
			return err
		}
	}
	rp := int64(0)
	unsynced := false // recovery left the active segment's fsync to the flusher
	if !clean {
		if rcErr == nil {
			rp = rc.RecoveryPoint
		}
		if epErr == nil {
			l.mu.epochs.entries = slices.Clone(epochs)
		}
		if unsynced, err = l.recover(rp, epErr); err != nil {
			return err
		}
	}

	segs = l.mu.segments
	last = segs[len(segs)-1]
	l.mu.leo.Store(last.next)
	l.mu.durable.Store(last.next)
	if unsynced && !l.filesSynced {
		l.mu.durable.Store(last.base)
		// What a crashed process wrote may be in the page cache only.
		last.wrote()
	}
	l.mu.logStart.Store(segs[0].base)
	if rcErr == nil {
		l.mu.logStart.Store(max(l.mu.logStart.Load(), rc.LogStartOffset))
	}
	if l.mu.logStart.Load() > l.mu.leo.Load() {
		// The checkpoint moved the start past data a crash then lost: start afresh there.
		if err := l.truncateFullyLocked(l.mu.logStart.Load()); err != nil {
			return err
		}
	}
	if err := l.deleteBelowStart(); err != nil {
		return err
	}
	l.mu.epochs.truncateFromEnd(l.mu.leo.Load())
	l.mu.epochs.truncateFromStart(l.mu.logStart.Load())
	if !clean {
		// Every sealed segment scanned is synced with its indexes; the active
		// segment's indexes are not on disk. Nothing needs writing unless that
		// moved the recovery point: the next recovery reads the same segments.
		l.recoveryPoint.Store(l.active().base)
		if l.recoveryPoint.Load() != rp || epErr != nil {
			if err := l.writeCheckpoints(false); err != nil {
				return err
			}
		}
	}
	return l.finishLoad(hadMarker)
}

// finishLoad loads the cleaner state, removes the producer snapshots above the
// log end and the clean-shutdown marker, durably, before the log can change.
func (l *Log) finishLoad(hadMarker bool) error {
	l.loadAbortIndexes()
	if err := l.loadCleaner(); err != nil {
		return err
	}
	// A crash may have lost the tail a producer snapshot covered.
	if err := l.removeSnapshotsAbove(l.mu.leo.Load()); err != nil {
		return err
	}
	if !hadMarker {
		return nil
	}
	return removeDurably(l.fsys, l.dir, cleanShutdownName)
}

// readRecoveryState returns the log's recovery checkpoint and clean-shutdown
// marker, each with nil or the error reading it, and whether a marker file is in
// the log's directory (finishLoad removes it). Through a LogDir, a log the LogDir
// has no entry for is read in the per-partition layout, and its checkpoint
// adopted by the LogDir.
func (l *Log) readRecoveryState() (rc recoveryCheckpoint, rcErr error, m cleanShutdown, mErr error, markerFile bool, err error) {
	if l.logDir != nil {
		rc, rcErr, m, mErr, l.filesSynced = l.logDir.lookup(l.name)
	}
	if l.logDir == nil || rcErr != nil {
		rc, rcErr = readRecoveryCheckpoint(l)
		if l.logDir == nil && isNotExist(rcErr) {
			// A log of a LogDir opened on its own (a tool reading a stopped
			// broker's data dir): its checkpoint is the LogDir's entry.
			rc, rcErr = readLogDirEntry(l.fsys, l.dir)
		}
		if l.logDir != nil && rcErr == nil {
			if err := l.logDir.setRecovery(l.name, rc, true, false); err != nil {
				return rc, rcErr, m, mErr, false, err
			}
		}
	}
	// A marker file is removed even when the LogDir's marker is used: left
	// behind, it could vouch for the log after a later crash.
	fm, fmErr := readCleanShutdown(l)
	markerFile = fmErr == nil || !isNotExist(fmErr)
	if l.logDir == nil || mErr != nil {
		m, mErr = fm, fmErr
	}
	if l.logDir == nil && rcErr == nil {
		l.savedRC, l.savedRCOK = rc, true
	}
	return rc, rcErr, m, mErr, markerFile, nil
}

func readRecoveryCheckpoint(l *Log) (recoveryCheckpoint, error) {
	b, err := readSideFile(l.fsys, l.dir, recoveryCheckpointName)
	if err != nil {
		return recoveryCheckpoint{}, err
	}
	return decodeRecoveryCheckpoint(b)
}

func readEpochCheckpoint(l *Log) ([]EpochEntry, error) {
	b, err := readSideFile(l.fsys, l.dir, epochCheckpointName)
	if err != nil {
		return nil, err
	}
	return decodeEpochs(b)
}

func readCleanShutdown(l *Log) (cleanShutdown, error) {
	b, err := readSideFile(l.fsys, l.dir, cleanShutdownName)
	if err != nil {
		return cleanShutdown{}, err
	}
	return decodeCleanShutdown(b)
}

// loadTrusted prepares segments after a clean shutdown: sealed segments' max
// timestamps come from their time indexes' last entries; the active segment's
// indexes are loaded now because appends extend them.
func (l *Log) loadTrusted(segs []*segment) error {
	for _, s := range segs[:len(segs)-1] {
		if !s.loadMaxTimestamp() && s.size > 0 {
			if err := s.ensureIndexes(s.size, s.next, l.conf().IndexIntervalBytes, &l.stats); err != nil {
				return err
			}
		}
	}
	// The active segment's max timestamp is checked now: appends compare
	// theirs with it.
	s := segs[len(segs)-1]
	if err := s.checkMaxTimestamp(&l.stats); err != nil {
		return err
	}
	return l.loadFirstTimestamp(s)
}

// loadFirstTimestamp reads the active segment's first batch header for roll by
// age. A header that does not parse leaves the segment aged by its creation
// time, as Kafka ages a segment whose first batch it cannot read: the log was
// closed cleanly, and Open reads no batch of it.
func (l *Log) loadFirstTimestamp(s *segment) error {
	if s.size == 0 {
		return nil
	}
	sc := headerScanner(s.log, 0, s.size)
	defer sc.done()
	if !sc.next() {
		if isDataError(sc.err) {
			return nil
		}
		return fmt.Errorf("%s: %w", s.log.Name(), sc.err)
	}
	s.setFirstTimestamp(sc.h.MaxTimestamp)
	return nil
}

// setFirstTimestamp records the max timestamp of the segment's first batch.
func (s *segment) setFirstTimestamp(ts int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.firstTS = ts
}

// recover validates every segment from the one holding recovery point rp onwards.
// Sealed segments it reads are fsynced with their indexes; the active segment's
// fsync is left to the flusher (unsynced), which runs before the durable offset
// passes its base, unless the LogDir's syncfs made it durable (filesSynced).
// epErr is why the epoch checkpoint could not be used, nil if it was. If it
// could not, the epoch cache is rebuilt from the batch headers of the segments
// below rp too; those are read, never cut. Where their headers stop parsing,
// a damaged checkpoint fails the recovery, as Kafka fails on a malformed one;
// a missing one leaves the epochs read before, as Kafka starts it empty.
func (l *Log) recover(rp int64, epErr error) (unsynced bool, err error) {
	segs := l.mu.segments
	// Segment i is trusted iff a later segment starts at or below rp.
	k := 0
	for k+1 < len(segs) && segs[k+1].base <= rp {
		k++
	}
	for _, s := range segs[:k] {
		if epErr != nil {
			err := l.assignEpochsFrom(s, s.size)
			if err != nil && !(isNotExist(epErr) && isDataError(err)) {
				return false, err
			}
		}
		if !s.loadMaxTimestamp() && s.size > 0 {
			if err := s.ensureIndexes(s.size, s.next, l.conf().IndexIntervalBytes, &l.stats); err != nil {
				return false, err
			}
		}
	}
	l.mu.epochs.truncateFromEnd(segs[k].base)
	expect := segs[k].base
	for i := k; i < len(segs); i++ {
		s := segs[i]
		if s.base < expect {
			// Not a torn write but a file whose name overlaps the segment before
			// it: refuse rather than guess which holds the log. (A gap is legal:
			// compaction may have removed a segment's last batches.)
			return false, fmt.Errorf("%w: %s: base offset %d is below the end of the segment before it (%d)", ErrCorruptSegment, s.log.Name(), s.base, expect)
		}
		if i > k {
			// A sealed segment's extent reaches the next one's base, past any gap.
			segs[i-1].next = s.base
		}
		res, err := s.rebuild(s.size, l.conf().IndexIntervalBytes)
		if err != nil {
			return false, err
		}
		l.stats.recoveredSegments.Add(1)
		l.stats.recoveredBytes.Add(res.validSize)
		if err := l.assignEpochsFrom(s, res.validSize); err != nil {
			return false, err
		}
		cut := res.validSize < s.size
		if cut && i < len(segs)-1 {
			// The later segments go first, durably: were s cut first, a crash
			// between the two would leave them past a hole, which the next
			// recovery keeps (a gap is legal). s becomes the active segment.
			drop := segs[i+1:]
			l.mu.segments = slices.Clone(segs[:i+1])
			if err := l.deleteTail(drop); err != nil {
				return false, err
			}
			segs = l.mu.segments
		}
		if cut {
			l.stats.recoveryTruncatedBytes.Add(s.size - res.validSize)
			// A file a tier linked into its store keeps its bytes there: cut
			// a private copy (no reader holds s yet).
			if f, err := l.privateCopy(s); err != nil {
				return false, err
			} else if f != nil {
				s.log.Close()
				s.log = f
			}
			if err := s.log.Truncate(res.validSize); err != nil {
				return false, err
			}
			s.wrote()
			s.size = res.validSize
			s.mu.modified = l.conf().Now()
		}
		s.next = res.next
		if i == len(segs)-1 {
			return s.size > 0, nil
		}
		if err := l.syncSegment(s); err != nil {
			return false, err
		}
		if err := s.writeIndexes(true); err != nil {
			return false, err
		}
		expect = s.next
	}
	return false, nil
}

// assignEpochsFrom feeds the epoch cache from the batch headers of a recovered
// segment, as Kafka does: an epoch is assigned when it is newer than the latest.
func (l *Log) assignEpochsFrom(s *segment, size int64) error {
	sc := headerScanner(s.log, 0, size)
	defer sc.done()
	for sc.next() {
		e := sc.h.PartitionLeaderEpoch
		if latest, ok := l.mu.epochs.latest(); e >= 0 && (!ok || e > latest.Epoch) {
			l.mu.epochs.assign(e, sc.h.BaseOffset)
		}
	}
	if sc.err != nil {
		return corrupt(s.log.Name(), sc.pos, sc.err)
	}
	return nil
}

// deleteBelowStart deletes segments wholly below the log start offset.
func (l *Log) deleteBelowStart() error {
	segs := l.mu.segments
	k := 0
	for k+1 < len(segs) && segs[k+1].base <= l.mu.logStart.Load() {
		k++
	}
	if k == 0 {
		return nil
	}
	l.mu.segments = slices.Clone(segs[k:])
	return l.deleteSegments(segs[:k])
}
