package storage

import (
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a log's counters, for a metrics adapter or a test. All
// counts are since Open.
type Stats struct {
	AppendedBatches int64
	AppendedRecords int64
	AppendedBytes   int64
	// Syncs counts fsyncs of segment files (flusher, roll, close); SyncTime is their
	// total duration and SyncMax the longest.
	Syncs    int64
	SyncTime time.Duration
	SyncMax  time.Duration
	Rolls    int64
	// SegmentsDeleted counts segments removed by retention, DeleteRecords and
	// truncation.
	SegmentsDeleted int64
	// SegmentsUnshared counts segments given a private copy of their file
	// before a truncation cut them, because a tier had linked the file into its
	// store.
	SegmentsUnshared int64
	// RecoveredSegments and RecoveredBytes count what Open validated batch by batch
	// after an unclean shutdown; both are 0 after a clean one.
	RecoveredSegments int64
	RecoveredBytes    int64
	// RecoveryTruncatedBytes counts bytes recovery dropped (torn or corrupt tails).
	RecoveryTruncatedBytes int64
	// IndexRebuilds counts sealed segments whose index files were missing or damaged
	// and were rebuilt from the log.
	IndexRebuilds int64
	// Compactions counts compaction passes that cleaned; CompactionBytesRead and
	// CompactionBytesWritten the segment bytes they rewrote and wrote.
	Compactions            int64
	CompactionBytesRead    int64
	CompactionBytesWritten int64
	// PreallocBytes counts the zeros written ahead of active segments
	// (Config.Preallocate); PreallocWaits the appends that overtook the zeroer
	// during a chunk's write and waited for it; PreallocFailures the zero
	// writes that failed (preallocation then stops for that segment).
	PreallocBytes    int64
	PreallocWaits    int64
	PreallocFailures int64
}

// statCounters are the live counters behind Stats.
type statCounters struct {
	appendedBatches, appendedRecords, appendedBytes atomic.Int64
	syncs, syncNanos, syncMaxNanos                  atomic.Int64
	rolls, segmentsDeleted, segmentsUnshared        atomic.Int64
	recoveredSegments, recoveredBytes               atomic.Int64
	recoveryTruncatedBytes, indexRebuilds           atomic.Int64
	compactions                                     atomic.Int64
	compactionBytesRead, compactionBytesWritten     atomic.Int64
	preallocBytes, preallocWaits, preallocFailures  atomic.Int64
	// The flusher's gathering waits, and its wake-ups during them that found
	// too few appends (not in Stats: a test counts them).
	gathers, earlyGatherWakeups atomic.Int64
}

func (c *statCounters) observeSync(d time.Duration) {
	c.syncs.Add(1)
	c.syncNanos.Add(int64(d))
	for {
		m := c.syncMaxNanos.Load()
		if int64(d) <= m || c.syncMaxNanos.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

func (c *statCounters) snapshot() Stats {
	return Stats{
		AppendedBatches:        c.appendedBatches.Load(),
		AppendedRecords:        c.appendedRecords.Load(),
		AppendedBytes:          c.appendedBytes.Load(),
		Syncs:                  c.syncs.Load(),
		SyncTime:               time.Duration(c.syncNanos.Load()),
		SyncMax:                time.Duration(c.syncMaxNanos.Load()),
		Rolls:                  c.rolls.Load(),
		SegmentsDeleted:        c.segmentsDeleted.Load(),
		SegmentsUnshared:       c.segmentsUnshared.Load(),
		RecoveredSegments:      c.recoveredSegments.Load(),
		RecoveredBytes:         c.recoveredBytes.Load(),
		RecoveryTruncatedBytes: c.recoveryTruncatedBytes.Load(),
		IndexRebuilds:          c.indexRebuilds.Load(),
		Compactions:            c.compactions.Load(),
		CompactionBytesRead:    c.compactionBytesRead.Load(),
		CompactionBytesWritten: c.compactionBytesWritten.Load(),
		PreallocBytes:          c.preallocBytes.Load(),
		PreallocWaits:          c.preallocWaits.Load(),
		PreallocFailures:       c.preallocFailures.Load(),
	}
}
