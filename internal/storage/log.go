package storage

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
)

// Log is one partition's log. See the package doc for the calling protocol and the
// locking rules.
type Log struct {
	fsys vfs.FS
	dir  string
	// cfg is the log's configuration with defaults applied. The Config it
	// points to is never modified: Reconfigure stores a new one (under
	// appendMu), so a reader that loads it once sees one consistent setting.
	cfg atomic.Pointer[Config]
	// logDir, when the log was opened through one, keeps its recovery checkpoint
	// and clean-shutdown marker under name; nil: both are files in dir.
	logDir      *LogDir
	name        string
	filesSynced bool // load: the LogDir's syncfs covered everything in dir

	// appendMu serialises every mutation (appends, roll, truncation, retention,
	// epoch assignment, Close) and is held across their I/O. Fields only mutators
	// touch live here too.
	appendMu sync.Mutex
	// recoveryPoint: every segment wholly below it is synced with its indexes.
	// Written under appendMu; atomic because a durable recovery checkpoint is
	// written off appendMu (ckptMu).
	recoveryPoint atomic.Int64
	// The checkpoints as last written, so that unchanged ones are not written
	// again; the ok flags say whether the file is known to hold them.
	// savedEpochs is guarded by appendMu, savedRC by ckptMu.
	savedEpochs   []EpochEntry
	savedEpochsOK bool
	savedRC       recoveryCheckpoint
	savedRCOK     bool
	// ckptMu serialises the writes of the recovery checkpoint that must reach
	// the disk before they return (and, without a LogDir, every write of its
	// file), so that each reads the log's state after the one before it
	// wrote: a retention pass makes its new log start durable off appendMu.
	// appendMu, when held, is taken first.
	ckptMu sync.Mutex
	// startMoved is set when the log start moved and the recovery checkpoint
	// has not been made durable since (finishStartAdvance).
	startMoved atomic.Bool
	cleaner    cleanerState   // appendMu: compaction progress (cleaner checkpoint)
	snapshots  []int64        // appendMu: producer snapshot offsets on disk, newest first (snapshot.go)
	deletes    delayedDeletes // deleted segments waiting FileDeleteDelay (delete.go)

	// cleanMu serialises compaction passes. It is taken before appendMu, which a
	// pass holds only to plan and to swap.
	cleanMu sync.Mutex

	// mu guards the published view readers use. It is never held across I/O.
	// Fields written by mutators are written with appendMu held as well.
	// logStart, leo, durable, latestEpoch and hasFailed are written only with
	// mu held for writing, but are atomics so that the accessors
	// (LogStartOffset, LogEndOffset, DurableOffset, LatestEpoch, Err) read
	// them without locking: an idle follower's fetch session has its leader
	// look at thousands of logs per long poll, and the follower's fetcher
	// walks as many each round.
	mu struct {
		sync.RWMutex
		segments    []*segment // ascending base offsets; the last is active. Never modified in place.
		logStart    atomic.Int64
		leo         atomic.Int64 // log end offset: next offset to assign
		durable     atomic.Int64 // every offset below is fsynced
		latestEpoch atomic.Int32 // epochs' newest epoch, or UndefinedEpoch
		truncGen    uint64
		epochs      epochCache
		failed      error
		hasFailed   atomic.Bool // failed != nil
		closed      bool
		// changed is closed whenever durable, failed or closed change, waking
		// WaitDurable callers. It is made by the first caller to wait (nil
		// while nobody waits: most logs never have a waiter, and a closed
		// channel replaced at every fsync would be garbage per fsync).
		changed chan struct{}
	}

	kick chan struct{} // a pending wake-up of the flusher; capacity 1
	// gatherTarget is the append count a gathering flusher waits for (0 when it
	// is not gathering); the append that reaches it sends on gathered
	// (capacity 1). See flush.go.
	gatherTarget atomic.Int64
	gathered     chan struct{}
	// expectTarget is the append count the flusher's next fsync may wait for
	// (0: none), set by an append with AppendHints.Followed. See flush.go.
	expectTarget atomic.Int64
	stop         chan struct{}
	// flushMu orders starting the flusher against its exit (flush.go).
	flushMu struct {
		sync.Mutex
		running bool           // a flusher goroutine runs
		stopped bool           // Close began: no flusher starts any more
		done    sync.WaitGroup // the running flusher
	}
	unflushedRecords atomic.Int64 // Interval mode: records appended since the last sync
	// pre zeroes ahead of the active segment (Config.Preallocate); appendMu.
	pre     *zeroer
	appends atomic.Int64 // Append calls so far, for the flusher's gathering
	// deferredAppends counts those of them with AppendHints.FlushWithin:
	// nobody waits for them, so gathering does not wait for their like.
	deferredAppends atomic.Int64
	// The flusher's own (one runs at a time; each start happens after the
	// previous one's exit under flushMu): appends and deferred appends covered
	// by the last fsync, and what that fsync did, for gathering.
	flushedAppends  int64
	flushedDeferred int64
	flushedSeg      *segment // the segment the last fsync synced, and its size then
	flushedSize     int64
	lastFlush       flushResult
	gatherSkip      gatherBackoff
	listener        atomic.Pointer[func(int64)]
	failureListener atomic.Pointer[func(error)]
	stats           statCounters
}

// AppendInfo describes a successful append.
type AppendInfo struct {
	// FirstOffset is the first batch's base offset and LastOffset the last batch's
	// last offset. Records counts the records; a follower append of compacted
	// batches may hold fewer records than offsets.
	FirstOffset int64
	LastOffset  int64
	// LogAppendTime is the broker timestamp stamped on the batches, or -1 when the
	// log uses CreateTime (or the append was as follower).
	LogAppendTime int64
	// MaxTimestamp is the largest max timestamp of the appended batches and
	// OffsetOfMaxTimestamp the base offset of the batch holding it.
	MaxTimestamp         int64
	OffsetOfMaxTimestamp int64
	Batches              int
	Records              int64
	Bytes                int
	LogStartOffset       int64
}

// Open opens the log in dir, creating it if needed, and recovers it: after a clean
// shutdown (Close) it trusts the files; otherwise it validates every batch from the
// last recovery checkpoint and truncates at the first torn or corrupt one. Its
// flusher goroutine runs while there is data to fsync (flush.go); Close stops it.
func Open(fsys vfs.FS, dir string, cfg Config) (*Log, error) {
	return open(fsys, dir, cfg, nil, "")
}

func open(fsys vfs.FS, dir string, cfg Config, logDir *LogDir, name string) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Log{
		fsys:     fsys,
		dir:      dir,
		logDir:   logDir,
		name:     name,
		kick:     make(chan struct{}, 1),
		gathered: make(chan struct{}, 1),
		stop:     make(chan struct{}),
	}
	cfg = cfg.withDefaults()
	l.cfg.Store(&cfg)
	if err := l.ensureDir(); err != nil {
		return nil, err
	}
	if err := l.load(); err != nil {
		for _, s := range l.mu.segments {
			s.release()
		}
		l.deletes.close()
		return nil, fmt.Errorf("storage: open %s: %w", dir, err)
	}
	l.publishEpochLocked() // no reader yet: the lock is not needed
	if l.conf().Flush.tick() > 0 {
		l.startFlusher() // for its ticker
	}
	if l.DurableOffset() < l.LogEndOffset() {
		l.kickFlusher() // recovery left the active segment's tail to the flusher
	}
	return l, nil
}

// conf returns the log's current configuration; see cfg.
func (l *Log) conf() *Config { return l.cfg.Load() }

// ensureDir creates dir and any missing parents durably.
func (l *Log) ensureDir() error { return vfs.MkdirAllDurable(l.fsys, l.dir, 0o755) }

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// Append validates every batch in batches (concatenated v2 record batches, as in a
// Produce request), then assigns them consecutive offsets starting at the log end
// offset and stamps leaderEpoch, rewriting those header fields in the caller's
// buffer (and, for LogAppendTime logs, the timestamp type, max timestamp and CRC).
// The bytes go to the page cache: Append does not wait for an fsync; use
// WaitDurable for that. A validation error leaves the log unchanged and is one of
// the batch package's errors. Append does not allocate.
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendInfo, error) {
	return l.append(batches, leaderEpoch, true, false, AppendHints{})
}

// AppendHinted is Append with hints for the flusher (AppendHints).
func (l *Log) AppendHinted(batches []byte, leaderEpoch int32, hints AppendHints) (AppendInfo, error) {
	return l.append(batches, leaderEpoch, true, false, hints)
}

// AppendValidated is Append for batches the caller has already walked with
// batch.NewIter to the end without error (a partition leader checks a produced
// batch's producer and size rules first): it makes every check but the CRCs
// again (batch.NewValidatedIter), so each produced byte is checksummed once.
// hints tell the flusher when to fsync the append (AppendHints).
func (l *Log) AppendValidated(batches []byte, leaderEpoch int32, hints AppendHints) (AppendInfo, error) {
	return l.append(batches, leaderEpoch, true, true, hints)
}

// AppendAsFollower appends batches that already carry offsets and leader epochs
// (replicated from the leader), validated as stored batches (batch.ValidateStored:
// a compacted leader serves batches thinned by compaction). Offsets must not go
// back: the first batch must start at or after the log end offset and each batch
// after the previous one's end, or ErrUnexpectedOffset. Forward gaps are kept, as
// Kafka keeps them: they are offsets the leader's compaction removed.
func (l *Log) AppendAsFollower(batches []byte) (AppendInfo, error) {
	return l.append(batches, -1, false, false, AppendHints{})
}

func (l *Log) append(b []byte, leaderEpoch int32, asLeader, validated bool, hints AppendHints) (AppendInfo, error) {
	info := AppendInfo{LogAppendTime: -1, MaxTimestamp: -1, OffsetOfMaxTimestamp: -1}
	// Validate everything before touching the log (CRCs are the costly part).
	var firstBase, nextBase, span int64
	it := batch.NewIter(b)
	switch {
	case !asLeader:
		it = batch.NewStoredIter(b)
	case validated:
		it = batch.NewValidatedIter(b)
	}
	for it.Next() {
		h := it.Header()
		if info.Batches == 0 {
			firstBase = h.BaseOffset
		} else if !asLeader && h.BaseOffset < nextBase {
			return info, fmt.Errorf("%w: batch at offset %d overlaps one ending at %d", ErrUnexpectedOffset, h.BaseOffset, nextBase)
		}
		nextBase = h.NextOffset()
		span += int64(h.LastOffsetDelta) + 1
		info.Batches++
		info.Records += int64(h.NumRecords)
	}
	if err := it.Err(); err != nil {
		return info, err
	}
	if info.Batches == 0 {
		return info, ErrEmptyAppend
	}
	if int64(len(b)) > l.conf().SegmentBytes {
		return info, fmt.Errorf("%w: %d bytes, segment size %d", ErrBatchTooLarge, len(b), l.conf().SegmentBytes)
	}
	info.Bytes = len(b)

	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return info, err
	}
	leo := l.mu.leo.Load()
	now := l.conf().Now()
	if asLeader {
		if latest, ok := l.mu.epochs.latest(); ok && leaderEpoch < latest.Epoch {
			return info, fmt.Errorf("%w: %d < %d", ErrFencedLeaderEpoch, leaderEpoch, latest.Epoch)
		}
		appendTime := int64(-1)
		if l.conf().LogAppendTime {
			appendTime = now.UnixMilli()
			info.LogAppendTime = appendTime
		}
		stampBatches(b, leo, leaderEpoch, appendTime)
		info.FirstOffset, info.LastOffset = leo, leo+span-1
	} else if firstBase < leo {
		return info, fmt.Errorf("%w: first offset %d, log end offset %d", ErrUnexpectedOffset, firstBase, leo)
	} else {
		info.FirstOffset, info.LastOffset = firstBase, nextBase-1
	}
	info.MaxTimestamp, info.OffsetOfMaxTimestamp = maxTimestamp(b)

	seg := l.active()
	if l.shouldRoll(seg, len(b), info.LastOffset, info.MaxTimestamp, now) {
		var err error
		if seg, err = l.rollLocked(now); err != nil {
			return info, err
		}
	}
	pos := seg.size
	l.preallocBeforeWrite(seg, pos, len(b))
	if _, err := seg.log.WriteAt(b, pos); err != nil {
		return info, l.fail(err)
	}
	seg.wrote()
	seg.indexBatches(b, pos, l.conf().IndexIntervalBytes, now)
	info.LogStartOffset = l.publishAppend(seg, b, pos, &info, asLeader, leaderEpoch)

	l.stats.appendedBatches.Add(int64(info.Batches))
	l.stats.appendedRecords.Add(info.Records)
	l.stats.appendedBytes.Add(int64(len(b)))
	l.afterAppend(info.Records, info.LastOffset+1, hints)
	return info, nil
}

// publishAppend shows readers the batches b just written at pos of the active
// segment seg, as info describes them, and records their epochs: the leader's
// epoch, or a follower's batches' own. It returns the log start offset.
// appendMu is held.
func (l *Log) publishAppend(seg *segment, b []byte, pos int64, info *AppendInfo, asLeader bool, leaderEpoch int32) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	seg.size = pos + int64(len(b))
	seg.next = info.LastOffset + 1
	l.mu.leo.Store(info.LastOffset + 1)
	if asLeader {
		l.mu.epochs.assign(leaderEpoch, info.FirstOffset)
	} else {
		for p := 0; p < len(b); {
			h, _ := batch.ParseHeader(b[p:])
			l.mu.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
			p += h.Size()
		}
	}
	l.publishEpochLocked()
	return l.mu.logStart.Load()
}

// stampBatches gives the validated batches in b consecutive offsets from base and
// the leader epoch, and LogAppendTime when appendTime >= 0.
func stampBatches(b []byte, base int64, epoch int32, appendTime int64) {
	for p := 0; p < len(b); {
		h, _ := batch.ParseHeader(b[p:])
		one := b[p : p+h.Size()]
		batch.SetBaseOffset(one, base)
		batch.SetPartitionLeaderEpoch(one, epoch)
		if appendTime >= 0 {
			batch.SetLogAppendTime(one, appendTime)
		}
		base += int64(h.LastOffsetDelta) + 1
		p += h.Size()
	}
}

// maxTimestamp returns the largest max timestamp in validated batches b and the
// base offset of the first batch holding it.
func maxTimestamp(b []byte) (ts, offset int64) {
	ts, offset = -1, -1
	for p := 0; p < len(b); {
		h, _ := batch.ParseHeader(b[p:])
		if h.MaxTimestamp > ts {
			ts, offset = h.MaxTimestamp, h.BaseOffset
		}
		p += h.Size()
	}
	return ts, offset
}

// writable reports why the log refuses mutations, if it does.
func (l *Log) writable() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	switch {
	case l.mu.closed:
		return ErrClosed
	case l.mu.failed != nil:
		return l.mu.failed
	}
	return nil
}

// Err returns the error that made the log fail-stop (wrapping ErrLogFailed), or
// nil while it is healthy.
func (l *Log) Err() error {
	if !l.mu.hasFailed.Load() {
		return nil
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.failed
}

// active returns the active segment; appendMu or mu must be held.
func (l *Log) active() *segment { return l.mu.segments[len(l.mu.segments)-1] }

// fail makes the log fail-stop after a write or sync error and returns the error
// every later mutation and WaitDurable will return.
func (l *Log) fail(cause error) error {
	failed, first := l.recordFailure(cause)
	if fn := l.failureListener.Load(); first && fn != nil {
		(*fn)(failed)
	}
	return failed
}

// recordFailure makes the log fail-stop with cause unless it failed before, and
// returns the error it failed with and whether that is cause's.
func (l *Log) recordFailure(cause error) (failed error, first bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first = l.mu.failed == nil
	if first {
		l.mu.failed = fmt.Errorf("%w: %w", ErrLogFailed, cause)
		l.mu.hasFailed.Store(true)
		l.notifyLocked()
	}
	return l.mu.failed, first
}

// notifyLocked wakes every WaitDurable caller; mu must be held for writing.
func (l *Log) notifyLocked() {
	if l.mu.changed != nil {
		close(l.mu.changed)
		l.mu.changed = nil
	}
}

// shouldRoll follows Kafka's LogSegment.shouldRoll: a non-empty active segment rolls
// when the append would overflow it, when an index is full, when the offsets no
// longer fit an index entry, or when it is older than SegmentAge less its roll
// jitter. Age is measured between the segment's first batch and the incoming
// batches' timestamps, or, without timestamps, by the clock since the segment
// was created.
func (l *Log) shouldRoll(s *segment, size int, lastOffset, maxTS int64, now time.Time) bool {
	if s.size == 0 {
		return false
	}
	if s.size+int64(size) > l.conf().SegmentBytes {
		return true
	}
	if _, ok := relOffset(lastOffset, s.base); !ok {
		return true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.index.full() || s.mu.tindex.full() {
		return true
	}
	age := now.Sub(s.mu.created)
	if s.mu.firstTS >= 0 {
		age = time.Duration(maxTS-s.mu.firstTS) * time.Millisecond
	}
	return age > l.conf().SegmentAge-s.rollJitter
}

// rollLocked seals the active segment (indexes written and trimmed, log fsynced),
// creates a new one at the log end offset, and moves the recovery point to it.
// appendMu must be held.
func (l *Log) rollLocked(now time.Time) (*segment, error) {
	if l.conf().OnRoll != nil {
		start := time.Now()
		defer func() { l.conf().OnRoll(time.Since(start)) }()
	}
	old := l.active()
	if err := l.trimPrealloc(); err != nil {
		return nil, l.fail(err)
	}
	if err := old.writeIndexes(true); err != nil {
		return nil, l.fail(err)
	}
	if err := old.sealAbortIndex(old.size, true, true); err != nil {
		return nil, l.fail(err)
	}
	if err := l.syncSegment(old); err != nil {
		return nil, l.fail(err)
	}
	s, err := createSegment(l.fsys, l.dir, l.mu.leo.Load(), l.conf(), now)
	if err != nil {
		return nil, l.fail(err)
	}
	l.publishSegment(s)
	l.recoveryPoint.Store(s.base)
	if err := l.writeCheckpoints(false); err != nil {
		return nil, l.fail(err)
	}
	l.stats.rolls.Add(1)
	l.kickFlusher() // the old segment's data is durable now
	return s, nil
}

// syncSegment fsyncs a segment's log file, recording the time taken.
func (l *Log) syncSegment(s *segment) error {
	_, err := l.timedSync(s)
	return err
}

// syncSlots bounds the segment fsyncs in flight in the process (timedSync). A
// goroutine blocked in fsync holds an OS thread, and the Go runtime starts
// another for the rest and keeps every thread it started for the life of the
// process, with its stacks (about 33 KiB each). Unbounded, 5,000 partitions
// that each take a record at once left a broker with over 1,000 threads and
// about 40 MiB of thread stacks for good (docs/benchmarks.md, session 16);
// fsyncs beyond the slots wait on the channel, holding a goroutine, not a
// thread.
var syncSlots = make(chan struct{}, maxSyncsInFlight)

// maxSyncsInFlight is syncSlots' size: enough concurrent fsyncs to keep a
// disk's queue and the file system's journal commits full. In
// BenchmarkManyLogsDurable (1,000 logs taking a record at once) 256 slots kept
// the appends/s of unbounded fsyncs and 64 did not (docs/benchmarks.md,
// session 16).
const maxSyncsInFlight = 256

// timedSync fsyncs a segment's log file, in one of syncSlots, and returns how
// long the fsync took (the wait for a slot not counted). Through a LogDir that
// syncs its filesystem it makes a syncfs instead, shared with the other logs
// syncing then (no slot: the waiters hold no thread).
func (l *Log) timedSync(s *segment) (time.Duration, error) {
	writes := s.writes.Load()
	var err error
	start := time.Now()
	if l.logDir != nil && l.logDir.fsSync != nil {
		err = l.logDir.fsSync.sync()
	} else {
		slots := syncSlots // read once: benchmarks swap it between cases
		slots <- struct{}{}
		start = time.Now()
		err = s.log.Sync()
		<-slots
	}
	took := time.Since(start)
	if err == nil {
		s.markSynced(writes)
	}
	l.stats.observeSync(took)
	if l.conf().OnSync != nil {
		l.conf().OnSync(took, err)
	}
	return took, err
}

// writeCheckpoints persists the leader-epoch cache, then the recovery checkpoint
// (recovery point and log start offset), each only if it changed; the epoch
// checkpoint not for a change below the log start alone (a retention pass's:
// Open cuts the cache at the log start anyway). Through a
// LogDir the recovery checkpoint goes to disk with the LogDir's next write, or
// before this returns with durable (a change a crash must not undo: a recovery
// point or log start that moved back, a log start that moved within a segment).
// appendMu must be held.
func (l *Log) writeCheckpoints(durable bool) error {
	if err := l.writeEpochCheckpoint(true); err != nil {
		return err
	}
	return l.writeRecoveryCheckpoint(durable)
}

// writeEpochCheckpoint writes the leader-epoch cache if it changed, fsynced
// unless sync is false (a LogDir's syncfs at Close makes it durable).
// appendMu must be held.
func (l *Log) writeEpochCheckpoint(sync bool) error {
	epochs, logStart := l.epochsAndStart()
	if l.savedEpochsOK && epochsMatchFrom(l.savedEpochs, epochs, logStart) {
		return nil
	}
	if err := replaceSideFile(l.fsys, l.dir, epochCheckpointName, encodeEpochs(epochs), sync); err != nil {
		return err
	}
	l.savedEpochs, l.savedEpochsOK = epochs, true
	return nil
}

// offsetRange returns the log start and end offsets, read together.
func (l *Log) offsetRange() (logStart, leo int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.logStart.Load(), l.mu.leo.Load()
}

// epochsAndStart returns a copy of the epoch cache and the log start offset,
// read together.
func (l *Log) epochsAndStart() ([]EpochEntry, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.epochs.clone(), l.mu.logStart.Load()
}

// writeRecoveryCheckpoint persists the recovery point and log start offset as
// writeCheckpoints does. It may run without appendMu (after retention moved the
// log start, with durable), so it reads them itself, under ckptMu when it writes
// the file or waits for the disk.
func (l *Log) writeRecoveryCheckpoint(durable bool) error {
	if l.logDir != nil && !durable {
		return l.logDir.setRecovery(l.name, l.recoveryState(), false, false)
	}
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	return l.writeRecoveryCheckpointLocked(durable)
}

// writeRecoveryCheckpointLocked is writeRecoveryCheckpoint with ckptMu held.
func (l *Log) writeRecoveryCheckpointLocked(durable bool) error {
	rc := l.recoveryState()
	if l.logDir != nil {
		return l.logDir.setRecovery(l.name, rc, false, true)
	}
	if l.savedRCOK && rc == l.savedRC {
		return nil
	}
	if err := writeSideFile(l.fsys, l.dir, recoveryCheckpointName, rc.encode()); err != nil {
		return err
	}
	l.savedRC, l.savedRCOK = rc, true
	return nil
}

// recoveryState returns the recovery checkpoint of the log as it is now.
func (l *Log) recoveryState() recoveryCheckpoint {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return recoveryCheckpoint{RecoveryPoint: l.recoveryPoint.Load(), LogStartOffset: l.mu.logStart.Load()}
}

// WaitDurable returns nil once every offset up to and including offset is fsynced.
// It returns ErrLogFailed (wrapping the cause) if the log failed first,
// ErrTruncated if offset is not in the log (truncated away), ErrClosed if the log
// was closed without making it durable, or the context's error. Under the
// Interval policy it waits for the next scheduled sync and does not trigger one.
func (l *Log) WaitDurable(ctx context.Context, offset int64) error {
	for {
		w := l.durableState()
		switch {
		case offset < w.durable:
			return nil
		case w.failed != nil:
			return w.failed
		case offset >= w.leo:
			return fmt.Errorf("%w: offset %d, log end offset %d", ErrTruncated, offset, w.leo)
		case w.closed:
			return ErrClosed
		}
		if w.changed == nil {
			// The first waiter since the last change makes the channel, then
			// looks at the state again: a change after the read above and
			// before the channel existed woke nobody.
			l.makeChanged()
			continue
		}
		select {
		case <-w.changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// durableState is what WaitDurable decides on, read at once under mu.
type durableState struct {
	durable, leo int64
	failed       error
	closed       bool
	changed      chan struct{} // closed at the next change; nil while nobody waits
}

func (l *Log) durableState() durableState {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return durableState{l.mu.durable.Load(), l.mu.leo.Load(), l.mu.failed, l.mu.closed, l.mu.changed}
}

// makeChanged makes the channel the next change of the durable state closes,
// unless a waiter made it already.
func (l *Log) makeChanged() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.changed == nil {
		l.mu.changed = make(chan struct{})
	}
}

// DurableOffset returns the end of the fsynced prefix: every offset below it is
// durable.
func (l *Log) DurableOffset() int64 {
	return l.mu.durable.Load()
}

// SetDurableListener registers fn to be called with the new durable offset after
// each sync that advances it, on the flusher goroutine. fn must return quickly and
// must not call the Log's mutating methods. nil removes the listener.
func (l *Log) SetDurableListener(fn func(durableEnd int64)) {
	if fn == nil {
		l.listener.Store(nil)
		return
	}
	l.listener.Store(&fn)
}

// SetFailureListener registers fn to be called once, with the error that every
// later mutation will return, when the log becomes fail-stop. It runs on the
// goroutine whose write or sync failed, possibly inside Append; it must return
// quickly and must not call the Log's mutating methods.
func (l *Log) SetFailureListener(fn func(error)) { l.failureListener.Store(&fn) }

// LogStartOffset returns the first offset readers may fetch.
func (l *Log) LogStartOffset() int64 {
	return l.mu.logStart.Load()
}

// LogEndOffset returns the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 {
	return l.mu.leo.Load()
}

// Size returns the bytes held in all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.mu.segments {
		n += s.size
	}
	return n
}

// NumSegments returns the number of segments, the active one included.
func (l *Log) NumSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.mu.segments)
}

// Stats returns a snapshot of the log's counters.
func (l *Log) Stats() Stats { return l.stats.snapshot() }

// AssignEpoch records that leader epoch epoch starts at startOffset (a new leader
// calls it with its log end offset before accepting appends) and persists the
// leader-epoch checkpoint if that changed it (through a LogDir, later: see
// below). startOffset must be within [LogStartOffset, LogEndOffset].
func (l *Log) AssignEpoch(epoch int32, startOffset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if startOffset < l.mu.logStart.Load() || startOffset > l.mu.leo.Load() || epoch < 0 {
		return fmt.Errorf("%w: epoch %d at %d, log is [%d, %d]", ErrOffsetOutOfRange, epoch, startOffset, l.mu.logStart.Load(), l.mu.leo.Load())
	}
	if !l.assignEpoch(epoch, startOffset) || l.logDir != nil {
		// Through a LogDir the epoch checkpoint waits for the next roll,
		// truncation or Close, as Kafka's does: the new entry's batches are
		// above the recovery point until then, and recovery rebuilds it from
		// them. An epoch that got no batch before a crash is lost, as in Kafka;
		// the next leader epoch supersedes it.
		return nil
	}
	if err := l.writeCheckpoints(false); err != nil {
		return l.fail(err)
	}
	return nil
}

// assignEpoch records in the epoch cache that epoch starts at startOffset and
// reports whether that changed it. appendMu is held.
func (l *Log) assignEpoch(epoch int32, startOffset int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := l.mu.epochs.assign(epoch, startOffset)
	l.publishEpochLocked()
	return changed
}

// EndOffsetForEpoch answers OffsetsForLeaderEpoch (KIP-101/279): for the latest
// epoch, (epoch, log end offset); for an older one, the largest known epoch <= it
// and the start offset of the next epoch; for an epoch below every known one,
// (epoch, start of the first known epoch); otherwise (UndefinedEpoch,
// UndefinedOffset).
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.epochs.endOffsetFor(epoch, l.mu.leo.Load())
}

// publishEpochLocked publishes the epoch cache's newest epoch for
// LatestEpoch; mu must be held for writing.
func (l *Log) publishEpochLocked() {
	e := UndefinedEpoch
	if latest, ok := l.mu.epochs.latest(); ok {
		e = latest.Epoch
	}
	l.mu.latestEpoch.Store(e)
}

// LatestEpoch returns the newest leader epoch in the log's epoch cache, or
// UndefinedEpoch.
func (l *Log) LatestEpoch() int32 { return l.mu.latestEpoch.Load() }

// EpochAt is the leader epoch that wrote offset, by the epoch cache (a
// ListOffsets answer's epoch, as Kafka's), or UndefinedEpoch.
func (l *Log) EpochAt(offset int64) int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.epochs.epochAt(offset)
}

// Epochs returns a copy of the leader-epoch cache, oldest first.
func (l *Log) Epochs() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.epochs.clone()
}

// Close stops the flusher and, unless the log has failed, seals the active
// segment, fsyncs it, writes the checkpoints and finally the clean-shutdown marker
// that lets the next Open skip recovery. Segment files stay open until the last
// outstanding Chunk is released. Close on a failed log leaves no marker, so the
// next Open recovers.
func (l *Log) Close() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	closed, failed := l.status()
	if closed {
		return ErrClosed
	}
	l.stopFlusher()
	failed = l.endPrealloc(failed)

	var err error
	if failed == nil {
		if err = l.shutdownCleanly(); err != nil {
			err = l.fail(err)
		}
	}
	segs := l.markClosed(err == nil && failed == nil)
	l.awaitStartAdvance()
	for _, s := range segs {
		s.release()
	}
	l.deletes.close()
	return err
}

// markClosed closes the log to readers and mutators and returns its segments,
// which it no longer lists; with durable (a clean close) everything in them is
// durable. appendMu is held.
func (l *Log) markClosed(durable bool) []*segment {
	l.mu.Lock()
	defer l.mu.Unlock()
	if durable {
		l.mu.durable.Store(l.mu.leo.Load())
	}
	l.mu.closed = true
	segs := l.mu.segments
	l.mu.segments = nil
	l.notifyLocked()
	return segs
}

// publishSegment adds s, the new active segment, to the segment list.
func (l *Log) publishSegment(s *segment) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.segments = append(slices.Clip(l.mu.segments), s)
}

// awaitStartAdvance waits for a retention pass still making its log start
// durable and deleting its segments (finishStartAdvance, under ckptMu): Close
// returns after it; one that had not begun finds the log closed and leaves
// them to the next Open.
func (l *Log) awaitStartAdvance() {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
}

// status reports whether the log is closed and the error that failed it.
func (l *Log) status() (closed bool, failed error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.closed, l.mu.failed
}

// endPrealloc stops the zeroer and, unless the log failed (failed, which it
// returns, is not nil: the file stays as it is for the next Open to recover),
// cuts the active segment's file back to its size (trimPrealloc); a failed
// cut makes the log fail-stop and is returned. appendMu is held.
func (l *Log) endPrealloc(failed error) error {
	if failed != nil {
		l.haltPrealloc()
		return failed
	}
	if err := l.trimPrealloc(); err != nil {
		return l.fail(err)
	}
	return nil
}

// shutdownCleanly makes the active segment and its indexes durable and records
// the clean-shutdown marker. Through a LogDir that can syncfs, the fsyncs are
// left to the one syncfs of LogDir.Close, which precedes every marker: a
// broker of thousands of partitions would otherwise stop one disk round trip
// per file after another. Otherwise only a segment file with changes no fsync
// covered is synced.
func (l *Log) shutdownCleanly() error {
	s := l.active()
	deferred := l.logDir != nil && l.logDir.syncsAtClose
	if err := s.writeIndexes(!deferred); err != nil {
		return err
	}
	if err := s.sealAbortIndex(s.size, !deferred, false); err != nil {
		return err
	}
	if s.dirty() && !deferred {
		if err := l.syncSegment(s); err != nil {
			return err
		}
	}
	l.recoveryPoint.Store(l.mu.leo.Load())
	marker := cleanShutdown{LogEndOffset: l.mu.leo.Load(), ActiveBase: s.base, ActiveSize: s.size}
	if deferred {
		if err := l.writeEpochCheckpoint(false); err != nil {
			return err
		}
		rc := l.recoveryState()
		l.logDir.closedCleanly(l.name, marker, &rc)
		return nil
	}
	if err := l.writeCheckpoints(false); err != nil {
		return err
	}
	if l.logDir != nil {
		l.logDir.closedCleanly(l.name, marker, nil)
		return nil
	}
	return writeSideFile(l.fsys, l.dir, cleanShutdownName, marker.encode())
}
