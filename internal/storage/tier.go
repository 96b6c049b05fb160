package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-stream/strata/internal/remote"
)

// Tier errors.
var (
	// ErrRemoteUnavailable: the object store could not serve a remote read (down,
	// slow, or the object is missing). Retriable; Kafka's KAFKA_STORAGE_ERROR.
	ErrRemoteUnavailable = errors.New("storage: remote storage unavailable")
	// ErrRemoteCorrupt: a remote object failed its checksum or does not parse. The
	// bytes are never served; retriable once the object is repaired.
	ErrRemoteCorrupt = errors.New("storage: remote object corrupt")
	// ErrSnapshotDamaged (an ErrRemoteCorrupt): a producer-state snapshot the
	// manifest names is missing from the store or fails its checks.
	ErrSnapshotDamaged = fmt.Errorf("%w: producer snapshot damaged", ErrRemoteCorrupt)
	// errManifestChanged (wrapped in ErrRemoteUnavailable): the stored
	// manifest is no longer the tier's copy, though no newer leader wrote it
	// (a deposed one committed before its successor wrote anything); the copy
	// is reloaded, and the write can be made again over it.
	errManifestChanged = errors.New("remote manifest changed underneath")
)

// DefaultTierBlockBytes is the default size of a checksummed remote read block.
const DefaultTierBlockBytes = 1 << 20

// TierConfig configures a partition's tier.
type TierConfig struct {
	// Store is the object store; Prefix the partition's key prefix in it
	// (slash-separated, no trailing slash).
	Store  remote.Store
	Prefix string
	// Cache holds verified remote blocks; shared by every tier of a broker. nil
	// disables caching.
	Cache *BlockCache
	// BlockBytes is the size of a checksummed read block (default 1 MiB).
	BlockBytes int
	// Retention is the initial retention; SetRetention changes it.
	Retention TierRetention
	// Now is the clock for remote retention; nil means time.Now.
	Now func() time.Time
	// ProducerSnapshot, when set, gives the producer-state snapshot uploaded
	// with each segment (tier_snapshot.go).
	ProducerSnapshot SnapshotFunc
	// CopyLag is the initial copy lag; SetCopyLag changes it.
	CopyLag CopyLag
}

// TierRetention is a tiered log's retention. Negative values are unbounded.
type TierRetention struct {
	// Age and Bytes bound the whole log, remote part included (retention.ms,
	// retention.bytes).
	Age   time.Duration
	Bytes int64
	// LocalAge and LocalBytes bound the local log (local.retention.ms,
	// local.retention.bytes); they replace the Log's own limits.
	LocalAge   time.Duration
	LocalBytes int64
}

// Tier moves a Log's closed segments to an object store and serves reads below
// the log's local start from there (KIP-405's remote log).
//
// Upload protocol (Upload), for each closed segment wholly below the high-water
// mark and at or above the manifest's End, in order up to the first the copy
// lag holds back (CopyLag):
//
//  1. Read the segment once, cutting it into checksummed blocks of whole
//     batches: as the store reads it, for a store that reads bodies itself
//     (S3: segmentBody), else before the put.
//  2. Put P/<base>-<next>.seg: the bytes as stored, then the block index (a
//     streamed one padded with zeros to its room); or, to a store that can
//     link the whole segment file (remote.FileLinker), link it as
//     P/<base>-<next>.log and put the block index as P/<base>-<next>.index
//     (linkChunk says why that is safe). Then put the producer-state
//     snapshot as of <next>, P/<base>-<next>.snapshot (tier_snapshot.go).
//  3. Every uploadCommitSegments segments or uploadCommitBytes bytes, and at the
//     end of the pass, make the batch's objects durable (a store whose names
//     need it, remote.NameSyncer: one directory fsync for the batch), then put
//     P/manifest with the segments added and End = the last one's next: the
//     commit point.
//
// A crash before step 3 leaves objects no manifest names: they never count,
// and a re-upload of the same range writes the same names with the same bytes
// (every replica holds identical batches below the high-water mark), so nothing
// is uploaded twice as two different things. Only segments wholly below End may
// then be deleted locally (EnforceRetention); a new leader calls Load and
// carries on from End.
//
// Concurrency: Upload, EnforceRetention and Load are serialised by the tier;
// Read and the accessors may run concurrently with them.
type Tier struct {
	log *Log
	cfg TierConfig

	passMu sync.Mutex // serialises Load, Upload and EnforceRetention
	// sweep, guarded by passMu, asks the next EnforceRetention for an orphan
	// sweep: set by Load (a crash may have left objects behind) and by an
	// upload or a remote deletion that failed; cleared by a sweep that
	// finished. Listing the prefix every pass cost a pass time in proportion to
	// the objects stored.
	sweep bool
	// sweepAt, guarded by passMu, is when the next sweep is due although
	// sweep is not set: the last one kept leftovers of interrupted puts that
	// were too recent to tell from puts in progress (zero: none kept).
	sweepAt time.Time
	// lastSnapshot, guarded by passMu, is the producer-state snapshot the
	// last upload put: the next segment's builds on it.
	lastSnapshot uploadedSnapshot
	retention    atomic.Pointer[TierRetention]
	copyLag      atomic.Pointer[CopyLag]
	// copyDisabled (remote.log.copy.disable, KIP-950): Upload uploads
	// nothing, and local retention no longer waits for uploads.
	copyDisabled atomic.Bool

	mu struct {
		sync.RWMutex
		m      manifest
		loaded bool
		// blocks caches decoded block indexes by segment base.
		blocks map[int64][]block
	}
	stats tierCounters
}

// tierCounters are the live counters behind TierStats.
type tierCounters struct {
	uploads, uploadBytes, uploadErrors atomic.Int64
	remoteReads, remoteReadErrors      atomic.Int64
	deletedSegments, corruptBlocks     atomic.Int64
	lastUploadError                    atomic.Pointer[string]
}

// TierStats is a snapshot of a tier's state and counters.
type TierStats struct {
	RemoteStart, RemoteEnd int64 // manifest range
	RemoteBytes            int64
	RemoteSegments         int
	// UploadLagBytes is the size of the closed local segments not yet uploaded.
	UploadLagBytes  int64
	Uploads         int64
	UploadBytes     int64
	UploadErrors    int64
	LastUploadError string
	RemoteReads     int64
	RemoteReadErrs  int64
	CorruptBlocks   int64
	DeletedSegments int64
}

// NewTier returns the tier of log. Call Load before anything else.
func NewTier(log *Log, cfg TierConfig) *Tier {
	if cfg.BlockBytes <= 0 {
		cfg.BlockBytes = DefaultTierBlockBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	t := &Tier{log: log, cfg: cfg}
	t.mu.blocks = make(map[int64][]block)
	t.SetRetention(cfg.Retention)
	t.SetCopyLag(cfg.CopyLag)
	return t
}

// SetRetention changes the retention the next EnforceRetention applies.
func (t *Tier) SetRetention(r TierRetention) { t.retention.Store(&r) }

// SetCopyLag changes how long the next uploads hold closed segments back.
func (t *Tier) SetCopyLag(c CopyLag) { t.copyLag.Store(&c) }

// SetCopyDisabled stops (or resumes) uploads, as remote.log.copy.disable does:
// the remote part is still read and kept by the whole-log retention, and
// local retention deletes segments below the high-water mark whether or not
// they were uploaded (the topic's local retention is then its total).
func (t *Tier) SetCopyDisabled(disabled bool) { t.copyDisabled.Store(disabled) }

// Load reads the partition's manifest from the store (a partition without one
// has nothing remote) and moves the log's start up to the manifest's when it
// is below it. A new leader calls it before uploading; an error (store
// unreachable, corrupt manifest) leaves the tier unloaded, and Upload and
// EnforceRetention refuse to run until Load succeeds, so no local segment is
// deleted on a guess.
func (t *Tier) Load(ctx context.Context) error {
	t.passMu.Lock()
	defer t.passMu.Unlock()
	return t.loadLocked(ctx)
}

// EnsureLoaded loads the manifest unless a Load has succeeded. Until then the
// tier knows nothing of the remote part: its LogStartOffset is the local one
// and nothing below it is found. A leader that reads the remote part (a fetch
// below the local start, ListOffsets earliest or by timestamp, DeleteRecords)
// calls it first, so that a restart or a new leadership does not answer as if
// the store were empty until the first tiering pass loads it.
func (t *Tier) EnsureLoaded(ctx context.Context) error {
	if t.Loaded() {
		return nil
	}
	t.passMu.Lock()
	defer t.passMu.Unlock()
	if t.Loaded() {
		return nil
	}
	return t.loadLocked(ctx)
}

// Loaded reports whether Load has succeeded: until then the tier knows nothing
// of the remote part, and LogStartOffset answers the local start.
func (t *Tier) Loaded() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.mu.loaded
}

// loadLocked is Load; passMu is held.
func (t *Tier) loadLocked(ctx context.Context) error {
	b, err := t.cfg.Store.Get(ctx, t.key(manifestKey), 0, -1)
	var m manifest
	switch {
	case errors.Is(err, remote.ErrNotFound):
		start := t.log.LogStartOffset()
		m = manifest{Start: start, End: start}
	case err != nil:
		return fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	default:
		if m, err = decodeManifest(b); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrRemoteCorrupt, t.key(manifestKey), err)
		}
	}
	// DeleteRecords writes the manifest's start before it moves the local
	// one: after a crash in between, or on a replica that did not take the
	// DeleteRecords, the local log still holds records below the manifest's
	// start. They were deleted, so they go here too, before the manifest is
	// installed (as far as the log end: a lagging replica keeps nothing).
	if start := min(m.Start, t.log.LogEndOffset()); start > t.log.LogStartOffset() {
		if err := t.log.DeleteRecords(start); err != nil {
			return err
		}
	}
	t.resetManifest(m, true)
	t.sweep = true
	return nil
}

func (t *Tier) key(name string) string { return t.cfg.Prefix + "/" + name }

// resetManifest installs m (loaded says whether it is the store's) and
// forgets every block index.
func (t *Tier) resetManifest(m manifest, loaded bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.m, t.mu.loaded = m, loaded
	t.mu.blocks = make(map[int64][]block)
}

// setManifest installs m, which the store now holds, with the block indexes
// of the segments it uploaded, up, and without those of the segments it
// deleted, gone.
func (t *Tier) setManifest(m manifest, up []uploadedSegment, gone []remoteSegment) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.m = m
	for _, u := range up {
		t.mu.blocks[u.seg.Base] = u.blocks
	}
	for _, s := range gone {
		delete(t.mu.blocks, s.Base)
	}
}

// manifestCopy returns the manifest and whether Load has succeeded.
func (t *Tier) manifestCopy() (manifest, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	m := t.mu.m
	m.Segments = append([]remoteSegment(nil), m.Segments...)
	return m, t.mu.loaded
}

// LogStartOffset is the partition's log start offset: the remote start when the
// remote part holds data below the local start and reaches it, else the local
// one (what ListOffsets earliest answers; earliest-local is the Log's
// LogStartOffset). A remote part that ends below the local start (local
// retention deleted segments that were never uploaded, under
// remote.log.copy.disable) is below the log start, as in Kafka, whose log start
// follows such a deletion.
func (t *Tier) LogStartOffset() int64 {
	local := t.log.LogStartOffset()
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(t.mu.m.Segments) > 0 && t.mu.m.Segments[0].Base < local && t.mu.m.End >= local {
		return max(t.mu.m.Start, t.mu.m.Segments[0].Base)
	}
	return local
}

// AbortedIn returns the aborted transactions of the remote part that touch
// [from, to): marker at or after from, first batch before to.
func (t *Tier) AbortedIn(from, to int64) []AbortedTxn {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []AbortedTxn
	for _, a := range t.mu.m.Aborted {
		if a.LastOffset >= from && a.FirstOffset < to {
			out = append(out, a)
		}
	}
	return out
}

// UploadedEnd is the offset below which every offset of the log is in the
// object store (the manifest's End).
func (t *Tier) UploadedEnd() int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.mu.m.End
}

// LastUploaded is the highest offset the object store holds and the leader
// epoch that wrote it (KIP-1005's latest tiered offset), or -1 and -1 when it
// holds no segment (before the first upload, or once remote retention has
// deleted every uploaded one).
func (t *Tier) LastUploaded() (offset int64, epoch int32) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	segs := t.mu.m.Segments
	if len(segs) == 0 {
		return -1, -1
	}
	last := segs[len(segs)-1]
	epoch = -1
	if n := len(last.Epochs); n > 0 {
		epoch = last.Epochs[n-1].Epoch
	}
	return last.Next - 1, epoch
}

// EpochAt is the leader epoch that wrote offset: by the manifest's segments
// when one holds it, else by the local log's epoch cache (UndefinedEpoch when
// neither knows it).
func (t *Tier) EpochAt(offset int64) int32 {
	t.mu.RLock()
	for _, s := range t.mu.m.Segments {
		if offset >= s.Base && offset < s.Next {
			epoch := UndefinedEpoch
			for _, e := range s.Epochs {
				if e.StartOffset <= offset {
					epoch = e.Epoch
				}
			}
			t.mu.RUnlock()
			return epoch
		}
	}
	t.mu.RUnlock()
	return t.log.EpochAt(offset)
}

// EndOffsetForEpoch answers OffsetsForLeaderEpoch as Log.EndOffsetForEpoch
// does, over the whole log: the epochs of the remote part (the manifest's
// segments) below the local epoch cache's, from the partition's log start.
// Local retention cuts the local cache at the local start; Kafka's leader
// epoch cache reaches down to the remote log start.
func (t *Tier) EndOffsetForEpoch(epoch int32) (int32, int64) {
	start := t.LogStartOffset()
	var c epochCache
	t.mu.RLock()
	if start < t.log.LogStartOffset() {
		for _, s := range t.mu.m.Segments {
			for _, e := range s.Epochs {
				c.assign(e.Epoch, e.StartOffset)
			}
		}
	}
	t.mu.RUnlock()
	t.log.mu.RLock()
	for _, e := range t.log.mu.epochs.entries {
		c.assign(e.Epoch, e.StartOffset)
	}
	leo := t.log.mu.leo.Load()
	t.log.mu.RUnlock()
	c.truncateFromStart(start)
	return c.endOffsetFor(epoch, leo)
}

// closedEndAtOrBelow returns the end of the last closed segment that ends at or
// below limit (the log start offset when there is none): uploads take whole
// segments.
func (l *Log) closedEndAtOrBelow(limit int64) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	end := l.mu.logStart.Load()
	for _, s := range l.mu.segments[min(1, len(l.mu.segments)):] {
		if s.base > limit {
			break
		}
		end = s.base
	}
	return end
}

// closedBytesFrom returns the bytes of the closed segments that end after offset.
func (l *Log) closedBytesFrom(offset int64) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	segs := l.mu.segments
	for i := 0; i+1 < len(segs); i++ {
		if segs[i+1].base > offset {
			n += segs[i].size
		}
	}
	return n
}

// Upload uploads, in order, every closed segment (or the part of one) at or
// above the manifest's End and wholly below highWatermark, up to the first the
// copy lag holds back (CopyLag), committing each in the manifest under
// leaderEpoch; nothing while copying is disabled. It returns how many segments
// it committed; on an error the earlier ones stay committed and the next call
// carries on. Local retention keeps a segment held back until it is uploaded.
func (t *Tier) Upload(ctx context.Context, highWatermark int64, leaderEpoch int32) (int, error) {
	if t.copyDisabled.Load() {
		return 0, nil
	}
	t.passMu.Lock()
	defer t.passMu.Unlock()
	n, err := t.uploadLocked(ctx, highWatermark, leaderEpoch)
	if err != nil {
		t.sweep = true // it may have put objects it did not commit
		t.stats.uploadErrors.Add(1)
		msg := err.Error()
		t.stats.lastUploadError.Store(&msg)
	}
	return n, err
}

// Upload passes commit the segments they put in batches: one manifest write
// for up to uploadCommitSegments segments or uploadCommitBytes bytes, and one
// at the end of the pass. A crash loses no more than that (it is put again under
// the same names), and small segments do not each pay for a manifest write.
const (
	uploadCommitSegments = 64
	uploadCommitBytes    = 256 << 20
)

// uploadedSegment is a segment put in the store but not yet in the manifest.
type uploadedSegment struct {
	seg    remoteSegment
	blocks []block
}

func (t *Tier) uploadLocked(ctx context.Context, highWatermark int64, leaderEpoch int32) (int, error) {
	m, loaded := t.manifestCopy()
	if !loaded {
		return 0, fmt.Errorf("%w: manifest not loaded", ErrRemoteUnavailable)
	}
	if leaderEpoch < m.LeaderEpoch {
		return 0, fmt.Errorf("%w: leader epoch %d, manifest written by %d", ErrFencedLeaderEpoch, leaderEpoch, m.LeaderEpoch)
	}
	limit := t.log.copyEnd(max(m.End, t.log.LogStartOffset()), highWatermark, *t.copyLag.Load(), t.cfg.Now())
	n := 0
	var pending []uploadedSegment
	var pendingBytes int64
	commit := func() error {
		if len(pending) == 0 {
			return nil
		}
		next, err := t.commitLocked(ctx, m, pending, leaderEpoch)
		if err != nil {
			return err
		}
		m = next
		n += len(pending)
		pending, pendingBytes = pending[:0], 0
		return nil
	}
	end := m.End
	for {
		from := max(end, t.log.LogStartOffset())
		if from >= limit {
			break
		}
		gen := t.log.truncations()
		c, err := t.log.Read(from, math.MaxInt32, limit)
		if err != nil {
			err = errors.Join(err, commit())
			return n, err
		}
		if c.Size == 0 {
			break
		}
		seg, blocks, err := t.putChunk(ctx, &c, gen)
		c.Release()
		if err == nil {
			err = t.putSnapshot(ctx, m, &seg)
		}
		if err != nil {
			// What was put before the failure still counts if the manifest
			// can be written.
			err = errors.Join(err, commit())
			return n, err
		}
		pending = append(pending, uploadedSegment{seg, blocks})
		pendingBytes += seg.Size
		end = seg.Next
		if len(pending) >= uploadCommitSegments || pendingBytes >= uploadCommitBytes {
			if err := commit(); err != nil {
				return n, err
			}
		}
	}
	err := commit()
	return n, err
}

// commitLocked writes the manifest m with the uploaded segments added, under
// leaderEpoch: the commit point of an upload. It returns the new manifest.
func (t *Tier) commitLocked(ctx context.Context, m manifest, up []uploadedSegment, leaderEpoch int32) (manifest, error) {
	next := m
	next.LeaderEpoch = leaderEpoch
	next.Segments = slices.Grow(slices.Clone(m.Segments), len(up))
	next.Aborted = slices.Clone(m.Aborted)
	epochs := t.log.Epochs()
	for _, u := range up {
		u.seg.Epochs = epochsIn(epochs, u.seg.Base, u.seg.Next)
		next.Segments = append(next.Segments, u.seg)
		// The aborted transactions with a batch or their marker in the
		// segment, from the log's index, so that fetches served from the
		// store are still filtered after the local copy is gone. Uploads stop
		// at the last stable offset, so their markers are in the local log. A
		// transaction whose batches and marker lie in different segments is
		// recorded with the first of them uploaded, so a later leader that
		// never saw its batches (its local log starts after them) need not
		// know it.
		aborted, err := t.log.AbortedTxns(u.seg.Base, u.seg.Next)
		if err != nil {
			return m, err
		}
		next.Aborted = MergeAbortedTxns(next.Aborted, aborted)
	}
	next.End = up[len(up)-1].seg.Next
	if len(m.Segments) == 0 && m.End <= m.Start {
		// The first segment starts with the batch holding the local log
		// start, which may lie below the start (DeleteRecords).
		next.Start = max(m.Start, up[0].seg.Base)
	}
	if up[0].seg.Base > m.End {
		// The records between were deleted without being uploaded (while
		// copying was disabled): the partition starts here now.
		next.Start = max(next.Start, up[0].seg.Base)
	}
	if ns, ok := t.cfg.Store.(remote.NameSyncer); ok {
		keys := make([]string, 0, len(up))
		for _, u := range up {
			keys = append(keys, u.seg.objectKeys(t.cfg.Prefix)...)
		}
		if err := ns.SyncNames(ctx, keys...); err != nil {
			return m, fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
		}
	}
	if err := t.checkManifestUnchanged(ctx, m, leaderEpoch); err != nil {
		return m, err
	}
	b := next.encode()
	if err := t.cfg.Store.Put(ctx, t.key(manifestKey), bytes.NewReader(b), int64(len(b))); err != nil {
		return m, fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	}
	t.setManifest(next, up, nil)
	for _, u := range up {
		t.stats.uploads.Add(1)
		t.stats.uploadBytes.Add(u.seg.Size)
	}
	return next, nil
}

// checkManifestUnchanged re-reads the stored manifest before a new one replaces
// it: if a leader of a newer epoch wrote it, this one is deposed
// (ErrFencedLeaderEpoch); if it moved on otherwise, the tier reloads it and the
// caller retries (errManifestChanged: DeleteRecords and EnforceRetention at
// once, an upload at its next pass). This narrows, but cannot close, the window in which a deposed
// leader that has not yet learned of its successor overwrites its manifest: the
// object store offers no conditional write here.
func (t *Tier) checkManifestUnchanged(ctx context.Context, m manifest, leaderEpoch int32) error {
	b, err := t.cfg.Store.Get(ctx, t.key(manifestKey), 0, -1)
	if errors.Is(err, remote.ErrNotFound) {
		if len(m.Segments) == 0 && m.End == m.Start {
			return nil
		}
		return fmt.Errorf("%w: remote manifest vanished", ErrRemoteCorrupt)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	}
	stored, err := decodeManifest(b)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrRemoteCorrupt, t.key(manifestKey), err)
	}
	if stored.LeaderEpoch > leaderEpoch {
		return fmt.Errorf("%w: manifest written by leader epoch %d, this leader has %d", ErrFencedLeaderEpoch, stored.LeaderEpoch, leaderEpoch)
	}
	if stored.End != m.End || stored.Start != m.Start || len(stored.Segments) != len(m.Segments) {
		t.setManifest(stored, nil, nil)
		return fmt.Errorf("%w: %w (now ends at %d); reloaded", ErrRemoteUnavailable, errManifestChanged, stored.End)
	}
	return nil
}

// epochsIn returns the epoch entries covering [base, next), the first moved up to
// base.
func epochsIn(all []EpochEntry, base, next int64) []EpochEntry {
	var out []EpochEntry
	for i, e := range all {
		if e.StartOffset >= next {
			break
		}
		if i+1 < len(all) && all[i+1].StartOffset <= base {
			continue
		}
		out = append(out, EpochEntry{Epoch: e.Epoch, StartOffset: max(e.StartOffset, base)})
	}
	return out
}

// putChunk uploads a chunk of one closed segment as one object: its bytes, then
// its block index. A store that reads the body itself (S3) gets it as a stream
// that reads the segment once and cuts it into blocks on the way
// (segmentBody). A store that can link files (file://) gets a chunk that is a
// whole segment file as a link instead, with its block index in an object of
// its own (two objects, as before layout 2: index size 0), and any other chunk
// as a section it copies in the kernel: the scan for the blocks is then the
// only read of the bytes in user space.
// truncGen is the log's truncation count from before c was read.
func (t *Tier) putChunk(ctx context.Context, c *Chunk, truncGen uint64) (remoteSegment, []block, error) {
	put := t.put()
	if _, ok := t.cfg.Store.(remote.FileLinker); !ok {
		return t.streamChunk(ctx, c, put)
	}
	seg, blocks, err := t.scanBlocks(c)
	if err != nil {
		return seg, nil, err
	}
	idx := encodeBlocks(blocks)
	if linked, err := t.linkChunk(ctx, c, seg, truncGen); err != nil {
		return seg, nil, err
	} else if linked {
		if err := put(ctx, seg.key(t.cfg.Prefix, indexSuffix), bytes.NewReader(idx), int64(len(idx))); err != nil {
			return seg, nil, fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
		}
		return seg, blocks, nil
	}
	seg.IndexSize = int64(len(idx))
	body := remote.Concat(io.NewSectionReader(c.File, c.Pos, int64(c.Size)), io.NewSectionReader(bytes.NewReader(idx), 0, seg.IndexSize))
	if err := put(ctx, seg.dataKey(t.cfg.Prefix), body, body.Size()); err != nil {
		return seg, nil, fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	}
	return seg, blocks, nil
}

// put is how an upload puts a segment's objects: unsynced in a store that
// syncs names apart (commitLocked syncs the batch's names before the manifest).
func (t *Tier) put() func(context.Context, string, io.Reader, int64) error {
	if ns, ok := t.cfg.Store.(remote.NameSyncer); ok {
		return ns.PutUnsynced
	}
	return t.cfg.Store.Put
}

// streamChunk puts c as a segmentBody. A segment that does not scan fails the
// upload with its ErrCorruptSegment, whatever the store made of the body cut
// short.
func (t *Tier) streamChunk(ctx context.Context, c *Chunk, put func(context.Context, string, io.Reader, int64) error) (remoteSegment, []block, error) {
	body := newSegmentBody(c, t.cfg.BlockBytes)
	key := remoteSegment{Base: c.FirstOffset, Next: c.NextOffset}.key(t.cfg.Prefix, segObjectSuffix)
	err := put(ctx, key, body, body.Size())
	if body.err != nil {
		return remoteSegment{}, nil, body.err
	}
	if err != nil {
		return remoteSegment{}, nil, fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	}
	seg, blocks, ok := body.segment()
	if !ok {
		return remoteSegment{}, nil, fmt.Errorf("%w: put %s returned before reading the whole body", ErrRemoteUnavailable, key)
	}
	return seg, blocks, nil
}

// linkChunk links c's segment file as seg's data object when c is the whole
// file and the store can link it; false means put a copy.
//
// Why a link is safe: the segment is sealed (uploads stop at the last closed
// segment below the high-water mark), so its bytes were fsynced when it rolled
// and nothing appends to it; retention and DeleteRecords only remove its name;
// compaction writes new files (and a compacted topic has no tier); truncation is
// the one change made in place, and Truncate copies a segment whose file has
// another name before it cuts it (Log.unshareLocked). A truncation between the
// read of c and the link (the log's truncation count moved) cannot be told
// apart, so the object is removed again and the upload fails, to be retried.
func (t *Tier) linkChunk(ctx context.Context, c *Chunk, seg remoteSegment, truncGen uint64) (bool, error) {
	fl, ok := t.cfg.Store.(remote.FileLinker)
	if !ok || c.Pos != 0 {
		return false, nil
	}
	if size, err := c.File.Size(); err != nil || size != int64(c.Size) {
		return false, nil
	}
	key := seg.key(t.cfg.Prefix, logSuffix)
	linked, err := fl.LinkUnsynced(ctx, key, c.File)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	}
	if !linked {
		return false, nil
	}
	if t.log.truncations() != truncGen {
		err := fmt.Errorf("%w: the log was truncated while segment %d was linked", ErrRemoteUnavailable, seg.Base)
		return false, errors.Join(err, t.cfg.Store.Delete(ctx, key))
	}
	return true, nil
}

// EnforceRetention applies local retention (LocalAge, LocalBytes) to the log, never deleting a segment
// that is not wholly uploaded (nor at or above highWatermark), then the whole-log
// limits (Age, Bytes) to the remote part: remote segments below the local start whose newest
// record is older than RetentionAge, and the oldest while the whole log exceeds
// RetentionBytes by at least their size, leave the manifest (written first) and
// then the store. Objects no manifest names (a crashed upload's leftovers) wholly
// below End are deleted too, on the first pass after Load and after an upload or a
// deletion failed. It returns the local and remote segments deleted. The
// manifest is written as leader at leaderEpoch, fenced as an upload's commit
// is (putManifestLocked).
//
// A manifest another leader changed since this tier read it (and that does
// not fence this one) is reloaded and the pass made again over it.
func (t *Tier) EnforceRetention(ctx context.Context, highWatermark int64, leaderEpoch int32) (local, removed int, err error) {
	t.passMu.Lock()
	defer t.passMu.Unlock()
	local, removed, err = t.enforceRetentionLocked(ctx, highWatermark, leaderEpoch)
	if errors.Is(err, errManifestChanged) {
		var more int
		more, removed, err = t.enforceRetentionLocked(ctx, highWatermark, leaderEpoch)
		local += more
	}
	return local, removed, err
}

func (t *Tier) enforceRetentionLocked(ctx context.Context, highWatermark int64, leaderEpoch int32) (local, removed int, err error) {
	m, loaded := t.manifestCopy()
	if !loaded {
		return 0, 0, fmt.Errorf("%w: manifest not loaded", ErrRemoteUnavailable)
	}
	r := *t.retention.Load()
	if local, err = t.enforceLocalLocked(m, highWatermark); err != nil {
		return local, 0, err
	}
	localStart, localSize := t.log.LogStartOffset(), t.log.Size()
	var remoteOnly int64
	for _, s := range m.Segments {
		if s.Next <= localStart {
			remoteOnly += s.Size
		}
	}
	// The partition's start: DeleteRecords', or the local start once local
	// retention deleted with copying disabled (Kafka's incrementStartOffset
	// then moves the log start) or the remote part no longer reaches it.
	start := m.Start
	if (local > 0 && t.copyDisabled.Load()) || m.End < localStart {
		start = max(start, localStart)
	}
	k := 0
	for k < len(m.Segments) && m.Segments[k].Next <= start {
		remoteOnly -= m.Segments[k].Size
		k++
	}
	if r.Age >= 0 {
		limit := t.cfg.Now().Add(-r.Age).UnixMilli()
		for k < len(m.Segments) && m.Segments[k].Next <= localStart && m.Segments[k].MaxTimestamp < limit {
			remoteOnly -= m.Segments[k].Size
			k++
		}
	}
	if r.Bytes >= 0 {
		diff := remoteOnly + localSize - r.Bytes
		for k < len(m.Segments) && m.Segments[k].Next <= localStart && diff >= m.Segments[k].Size {
			diff -= m.Segments[k].Size
			k++
		}
	}
	gone := m.Segments[:k]
	if k > 0 {
		next := m
		next.Segments = m.Segments[k:]
		next.Start = max(start, gone[k-1].Next)
		if len(next.Segments) > 0 {
			next.Start = max(next.Start, next.Segments[0].Base)
		}
		if err := t.putManifestLocked(ctx, m, &next, leaderEpoch); err != nil {
			return local, 0, err
		}
		t.setManifest(next, nil, gone)
		m = next
	}
	for _, s := range gone {
		for _, key := range s.objectKeys(t.cfg.Prefix) {
			if err := t.cfg.Store.Delete(ctx, key); err != nil {
				// The manifest no longer names it: the orphan sweep retries.
				t.sweep = true
				return local, k, fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
			}
		}
		if t.cfg.Cache != nil {
			t.cfg.Cache.forget(s.dataKey(t.cfg.Prefix))
		}
		t.stats.deletedSegments.Add(1)
	}
	now := t.cfg.Now()
	if !t.sweep && (t.sweepAt.IsZero() || now.Before(t.sweepAt)) {
		return local, k, nil
	}
	kept, err := t.sweepOrphans(ctx, m, now)
	if err != nil {
		return local, k, err
	}
	t.sweep, t.sweepAt = false, time.Time{}
	if kept > 0 {
		t.sweepAt = now.Add(incompleteUploadAge)
	}
	return local, k, nil
}

// DeleteRecords moves the remote log start up to offset (Kafka's DeleteRecords
// on a tiered partition): the manifest is rewritten at once, so reads below
// offset fail from then on, and the next EnforceRetention deletes the segments
// wholly below it. The caller moves the local log start too; if it crashes
// first, the next Load does. An offset past the uploaded end (or with nothing
// uploaded) moves the end with it: nothing below it is left to upload, and the
// start must not fall back to the end, nor to the base of the batch holding
// offset when the next upload starts with it. The manifest is written as leader
// at leaderEpoch (putManifestLocked); over a manifest another leader changed
// since this tier read it, reloaded, when that does not fence this one.
func (t *Tier) DeleteRecords(ctx context.Context, offset int64, leaderEpoch int32) error {
	t.passMu.Lock()
	defer t.passMu.Unlock()
	err := t.deleteRecordsLocked(ctx, offset, leaderEpoch)
	if errors.Is(err, errManifestChanged) {
		err = t.deleteRecordsLocked(ctx, offset, leaderEpoch)
	}
	return err
}

func (t *Tier) deleteRecordsLocked(ctx context.Context, offset int64, leaderEpoch int32) error {
	m, loaded := t.manifestCopy()
	if !loaded {
		return fmt.Errorf("%w: manifest not loaded", ErrRemoteUnavailable)
	}
	if offset <= m.Start {
		return nil
	}
	next := m
	next.Start, next.End = offset, max(m.End, offset)
	if err := t.putManifestLocked(ctx, m, &next, leaderEpoch); err != nil {
		return err
	}
	t.setManifest(next, nil, nil)
	return nil
}

// putManifestLocked writes next, a change of m (this tier's copy), as the
// leader at leaderEpoch, stamped with that epoch: refused with
// ErrFencedLeaderEpoch when a newer leader wrote the stored manifest, and with
// ErrRemoteUnavailable (the copy reloaded) when it no longer is m. A deposed
// leader's retention pass or DeleteRecords used to write its stale copy over
// the new leader's, dropping the segments that leader had uploaded since.
// passMu held.
func (t *Tier) putManifestLocked(ctx context.Context, m manifest, next *manifest, leaderEpoch int32) error {
	if err := t.checkManifestUnchanged(ctx, m, leaderEpoch); err != nil {
		return err
	}
	next.LeaderEpoch = max(next.LeaderEpoch, leaderEpoch)
	b := next.encode()
	if err := t.cfg.Store.Put(ctx, t.key(manifestKey), bytes.NewReader(b), int64(len(b))); err != nil {
		return fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	}
	return nil
}

// EnforceLocalRetention applies only the local limits, never deleting a segment
// that is not wholly uploaded: what a follower runs (after Load, to learn the
// leader's uploads); the leader alone changes the remote part.
func (t *Tier) EnforceLocalRetention(highWatermark int64) (int, error) {
	t.passMu.Lock()
	defer t.passMu.Unlock()
	m, loaded := t.manifestCopy()
	if !loaded {
		return 0, fmt.Errorf("%w: manifest not loaded", ErrRemoteUnavailable)
	}
	return t.enforceLocalLocked(m, highWatermark)
}

func (t *Tier) enforceLocalLocked(m manifest, highWatermark int64) (int, error) {
	r := t.retention.Load()
	if !t.copyDisabled.Load() {
		highWatermark = min(highWatermark, m.End)
	}
	return t.log.enforceRetention(highWatermark, r.LocalAge, r.LocalBytes)
}

// incompleteUploadAge is how long after its last write the orphan sweep
// leaves what an interrupted put left behind (remote.IncompleteRemover): a put
// in progress, on this broker or on another that leads the partition now,
// looks the same. It is far longer than an upload pass may take (the replica
// package bounds one to minutes), with room for clocks that disagree.
const incompleteUploadAge = time.Hour

// sweepOrphans deletes segment objects the manifest does not name and that lie
// below its End (leftovers of an upload that crashed, or of retention that
// failed after committing), and what puts cut short by a crash left in a store
// that keeps it out of its listing (a file:// temporary file, an S3 multipart
// upload) when it is older than incompleteUploadAge at now. It returns how
// many of those it kept for being younger.
func (t *Tier) sweepOrphans(ctx context.Context, m manifest, now time.Time) (int, error) {
	keys, err := t.cfg.Store.List(ctx, t.cfg.Prefix+"/")
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	}
	named := make(map[string]bool, 2*len(m.Segments))
	for _, s := range m.Segments {
		for _, key := range s.objectKeys(t.cfg.Prefix) {
			named[key] = true
		}
	}
	for _, k := range keys {
		// Only objects wholly below End: the next segment can start below it
		// (the batch holding a DeleteRecords offset past the uploaded end),
		// and another leader may just have committed it.
		_, next, ok := parseRemoteName(path.Base(k))
		if !ok || named[k] || path.Dir(k) != t.cfg.Prefix || next > m.End {
			continue
		}
		if err := t.cfg.Store.Delete(ctx, k); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
		}
	}
	return t.removeIncomplete(ctx, now.Add(-incompleteUploadAge))
}

// removeIncomplete removes what puts under the tier's prefix cut short left
// behind before before (zero: all of it), in a store that keeps it apart.
func (t *Tier) removeIncomplete(ctx context.Context, before time.Time) (int, error) {
	r, ok := t.cfg.Store.(remote.IncompleteRemover)
	if !ok {
		return 0, nil
	}
	kept, err := r.RemoveIncomplete(ctx, t.cfg.Prefix+"/", before)
	if err != nil {
		return kept, fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	}
	return kept, nil
}

// DeleteAll deletes every object under the tier's prefix, the manifest first,
// and what interrupted puts left there, however recent (a deleted topic's
// partition: no upload of it is wanted any more).
func (t *Tier) DeleteAll(ctx context.Context) error {
	t.passMu.Lock()
	defer t.passMu.Unlock()
	if err := t.cfg.Store.Delete(ctx, t.key(manifestKey)); err != nil {
		return fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	}
	keys, err := t.cfg.Store.List(ctx, t.cfg.Prefix+"/")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	}
	for _, k := range keys {
		if err := t.cfg.Store.Delete(ctx, k); err != nil {
			return fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
		}
	}
	if _, err := t.removeIncomplete(ctx, time.Time{}); err != nil {
		return err
	}
	t.resetManifest(manifest{}, false)
	return nil
}

// parseRemoteName returns the offsets of a "<base>-<next>.seg|.log|.index"
// name.
func parseRemoteName(name string) (base, next int64, ok bool) {
	var stem string
	for _, suffix := range []string{segObjectSuffix, logSuffix, indexSuffix, snapshotSuffix} {
		if stem, ok = strings.CutSuffix(name, suffix); ok {
			break
		}
	}
	if !ok {
		return 0, 0, false
	}
	baseStr, nextStr, ok := strings.Cut(stem, "-")
	if !ok || len(baseStr) != baseDigits || len(nextStr) != baseDigits {
		return 0, 0, false
	}
	base, err1 := strconv.ParseInt(baseStr, 10, 64)
	next, err2 := strconv.ParseInt(nextStr, 10, 64)
	return base, next, err1 == nil && err2 == nil && base >= 0 && next > base
}

// Stats returns a snapshot of the tier's state and counters.
func (t *Tier) Stats() TierStats {
	m, _ := t.manifestCopy()
	s := TierStats{
		RemoteStart: m.Start, RemoteEnd: m.End, RemoteBytes: m.size(), RemoteSegments: len(m.Segments),
		UploadLagBytes:  t.log.closedBytesFrom(m.End),
		Uploads:         t.stats.uploads.Load(),
		UploadBytes:     t.stats.uploadBytes.Load(),
		UploadErrors:    t.stats.uploadErrors.Load(),
		RemoteReads:     t.stats.remoteReads.Load(),
		RemoteReadErrs:  t.stats.remoteReadErrors.Load(),
		CorruptBlocks:   t.stats.corruptBlocks.Load(),
		DeletedSegments: t.stats.deletedSegments.Load(),
	}
	if p := t.stats.lastUploadError.Load(); p != nil {
		s.LastUploadError = *p
	}
	return s
}
