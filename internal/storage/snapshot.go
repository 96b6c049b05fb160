package storage

import (
	"fmt"
	"path/filepath"
	"slices"
)

// Producer-state snapshots. A snapshot file holds state its writer (the
// replica's idempotent-producer and transaction state) derives from the batches
// below an offset, so that reopening the log scans only the batches from that
// offset on instead of the whole log (Kafka's <offset>.snapshot files). The log
// treats the payload as opaque and keeps the files consistent with itself:
//
//   - a snapshot is written only at an offset within [log start, log end];
//   - Open removes every snapshot above the recovered log end (a crash lost the
//     tail it covered);
//   - Truncate removes every snapshot above the new log end, and
//     TruncateFullyAndStartAt every snapshot, durably, before returning: a later
//     append must not make an old snapshot look valid again;
//   - writing one removes all but the newest snapshotsKept.
//
// A snapshot is written without fsync (tmp, rename): it is only ever a
// shortcut. A torn or damaged one fails its frame's CRC and the reader falls
// back to an older one or to a full scan, and a lost one costs a scan. The
// frame is the side-file frame; the payload carries its writer's own version.
const (
	snapshotSuffix = ".snapshot"
	snapshotsKept  = 2
)

func snapshotName(offset int64) string { return segmentName(offset, snapshotSuffix) }

// parseSnapshotName returns the offset of a "<20 digits>.snapshot" name.
func parseSnapshotName(name string) (int64, bool) { return parseOffsetName(name, snapshotSuffix) }

// WriteProducerSnapshot stores payload as the snapshot of the state of every
// batch below offset, which must lie within [LogStartOffset, LogEndOffset]. The
// caller must keep appends and truncations from running until it returns (the
// replica holds its append lock), so that offset still means what the payload
// was built from.
func (l *Log) WriteProducerSnapshot(offset int64, payload []byte) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	start, leo := l.offsetRange()
	if offset < start || offset > leo {
		return fmt.Errorf("%w: snapshot at %d, log is [%d, %d]", ErrOffsetOutOfRange, offset, start, leo)
	}
	if err := replaceSideFile(l.fsys, l.dir, snapshotName(offset), payload, false); err != nil {
		return err
	}
	if !slices.Contains(l.snapshots, offset) {
		l.snapshots = append(l.snapshots, offset)
		slices.Sort(l.snapshots)
		slices.Reverse(l.snapshots)
	}
	for len(l.snapshots) > snapshotsKept {
		o := l.snapshots[len(l.snapshots)-1]
		if err := l.fsys.Remove(filepath.Join(l.dir, snapshotName(o))); err != nil && !isNotExist(err) {
			return err
		}
		l.snapshots = l.snapshots[:len(l.snapshots)-1]
	}
	return nil
}

// Rolls counts the segment rolls since Open (a snapshot writer's cue).
func (l *Log) Rolls() int64 { return l.stats.rolls.Load() }

// ProducerSnapshots returns the offsets of the snapshots on disk, newest first.
func (l *Log) ProducerSnapshots() []int64 {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return slices.Clone(l.snapshots)
}

// ReadProducerSnapshot returns the payload of the snapshot at offset. A missing
// one gives an error matching fs.ErrNotExist, a torn or damaged one
// ErrCorruptSideFile.
func (l *Log) ReadProducerSnapshot(offset int64) ([]byte, error) {
	return readSideFile(l.fsys, l.dir, snapshotName(offset))
}

// removeSnapshotsAbove removes every snapshot at an offset above end, durably.
// appendMu must be held (or the log not yet published).
func (l *Log) removeSnapshotsAbove(end int64) error {
	removed := false
	for len(l.snapshots) > 0 && l.snapshots[0] > end {
		if err := l.fsys.Remove(filepath.Join(l.dir, snapshotName(l.snapshots[0]))); err != nil && !isNotExist(err) {
			return err
		}
		l.snapshots = l.snapshots[1:]
		removed = true
	}
	if !removed {
		return nil
	}
	return l.fsys.SyncDir(l.dir)
}
