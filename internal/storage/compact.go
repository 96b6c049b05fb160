package storage

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Kafka's defaults for the compaction settings.
const (
	DefaultDeleteRetention        = 24 * time.Hour // delete.retention.ms
	DefaultMinCleanableDirtyRatio = 0.5            // min.cleanable.dirty.ratio
	DefaultOffsetMapBytes         = 128 << 20      // log.cleaner.dedupe.buffer.size
)

// CompactOptions are a compacted topic's settings for one pass. Unlike Config, the
// fields are taken as given: zero means zero. DefaultCompactOptions has Kafka's
// defaults.
type CompactOptions struct {
	// DeleteRetention keeps a tombstone (a record with a null value) for this long
	// after the pass that first made it clean; the first pass after that removes it
	// (delete.retention.ms).
	DeleteRetention time.Duration
	// MinCleanableDirtyRatio: a pass cleans only when the dirty bytes are at least
	// this share of the cleanable bytes (min.cleanable.dirty.ratio, in [0, 1]).
	MinCleanableDirtyRatio float64
	// MinCompactionLag: a segment is cleaned only once its newest record is at least
	// this old (min.compaction.lag.ms).
	MinCompactionLag time.Duration
	// MaxCompactionLag: once the first batch of a dirty sealed segment is older
	// than this, a pass runs whatever the dirty ratio (max.compaction.lag.ms).
	// Zero means no limit (Kafka's default; its least value is 1 ms). On a
	// compacted topic the broker also rolls the active segment at this age
	// (Config.SegmentAge), so that its records become cleanable.
	MaxCompactionLag time.Duration
	// OffsetMapBytes bounds the memory of the key -> latest offset map; 0 means
	// DefaultOffsetMapBytes. When the dirty section has more keys, a pass cleans the
	// prefix of whole segments whose keys fit (the first dirty segment always does).
	OffsetMapBytes int64
	// MaxRecordBytes holds each record of a compressed batch a pass reads to
	// this many bytes decompressed (max.decompressed.message.bytes): a larger
	// one fails the pass, which leaves the log as it was, as Kafka's cleaner
	// fails on it. 0 means no limit.
	MaxRecordBytes int
	// Now is the clock for tombstone expiry and the compaction lag; nil means the
	// log's Config.Now.
	Now func() time.Time
}

// DefaultCompactOptions returns Kafka's defaults: tombstones kept a day, a dirty
// ratio of one half, no compaction lag.
func DefaultCompactOptions() CompactOptions {
	return CompactOptions{DeleteRetention: DefaultDeleteRetention, MinCleanableDirtyRatio: DefaultMinCleanableDirtyRatio}
}

// Validate reports the first setting that is out of range.
func (o CompactOptions) Validate() error {
	switch {
	case o.DeleteRetention < 0:
		return fmt.Errorf("%w: DeleteRetention %v is negative", ErrConfig, o.DeleteRetention)
	case !(o.MinCleanableDirtyRatio >= 0 && o.MinCleanableDirtyRatio <= 1):
		return fmt.Errorf("%w: MinCleanableDirtyRatio %v not in [0, 1]", ErrConfig, o.MinCleanableDirtyRatio)
	case o.MinCompactionLag < 0:
		return fmt.Errorf("%w: MinCompactionLag %v is negative", ErrConfig, o.MinCompactionLag)
	case o.MaxCompactionLag < 0:
		return fmt.Errorf("%w: MaxCompactionLag %v is negative", ErrConfig, o.MaxCompactionLag)
	case o.OffsetMapBytes < 0:
		return fmt.Errorf("%w: OffsetMapBytes %d is negative", ErrConfig, o.OffsetMapBytes)
	case o.MaxRecordBytes < 0:
		return fmt.Errorf("%w: MaxRecordBytes %d is negative", ErrConfig, o.MaxRecordBytes)
	}
	return nil
}

// CompactStats describes one Compact call.
type CompactStats struct {
	// Cleaned reports whether the pass ran: false when no sealed segment below the
	// high-water mark (and past the compaction lag) is dirty, when the dirty ratio
	// is below MinCleanableDirtyRatio and no dirty record is older than
	// MaxCompactionLag, or when a truncation raced with the pass.
	Cleaned bool
	// DirtyRatio is dirty bytes over cleanable bytes when the pass was planned.
	DirtyRatio float64
	// FirstDirtyOffset and EndOffset delimit the dirty section whose keys went into
	// the offset map; after a pass everything below EndOffset is clean.
	FirstDirtyOffset, EndOffset int64
	// SegmentsRead segments (BytesRead bytes) were rewritten into SegmentsWritten
	// (BytesWritten bytes); a lone segment that would not change is left in place
	// and counted in neither.
	SegmentsRead, SegmentsWritten int
	BytesRead, BytesWritten       int64
	// Records read from the rewritten segments, and those removed: superseded by a
	// later record with the same key, expired tombstones, records without a key,
	// and records of aborted transactions.
	RecordsRead, Superseded, TombstonesRemoved, KeylessRemoved, AbortedRemoved int64
	// MarkersRemoved transaction markers went: no batch of their transaction
	// had been left for longer than DeleteRetention.
	MarkersRemoved int64
	// Batches copied byte for byte, rewritten with fewer records, removed, and kept
	// empty (the last batch of an idempotent producer).
	BatchesCopied, BatchesRewritten, BatchesRemoved, EmptyBatchesKept int64
}

// Compact runs one cleaning pass (Kafka's log cleaner) over the sealed segments
// wholly below highWatermark: it keeps the latest record of each key, removes
// tombstones DeleteRetention after they became clean, and never changes an offset
// or touches the active segment, so offsets become sparse. Cleaned segments replace
// the old ones atomically and crash-safely (see the package doc); readers holding
// Chunks of old segments keep reading them. At most one pass runs at a time; appends
// and reads go on during it. An error before the swap leaves the log as it was;
// an error during the swap makes the log fail-stop, and reopening finishes the swap.
// The broker calls it (or RunCompaction) for topics with cleanup.policy=compact;
// with "compact,delete" it calls EnforceRetention too.
func (l *Log) Compact(highWatermark int64, opts CompactOptions) (CompactStats, error) {
	if err := opts.Validate(); err != nil {
		return CompactStats{}, err
	}
	if opts.Now == nil {
		opts.Now = l.conf().Now
	}
	if opts.OffsetMapBytes == 0 {
		opts.OffsetMapBytes = DefaultOffsetMapBytes
	}
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()

	now := opts.Now()
	if opts.MinCompactionLag != 0 {
		// The plan stops at a segment newer than the lag limit.
		if err := l.checkTimestamps(highWatermark, now.Add(-opts.MinCompactionLag).UnixMilli()+1); err != nil {
			return CompactStats{}, err
		}
	}
	overdue := opts.MaxCompactionLag != 0 && l.compactionOverdue(now.Add(-opts.MaxCompactionLag).UnixMilli())
	p, err := l.planCompaction(highWatermark, opts, now)
	if err != nil || p == nil {
		return p.statsOrZero(), err
	}
	defer releaseViews(p.all)
	if p.stats.DirtyRatio < opts.MinCleanableDirtyRatio && !p.tombstonesOnly && !overdue {
		return p.stats, nil
	}
	stats, err := l.clean(p, opts)
	if err != nil && p.raced(l) {
		// A truncation cut a segment the pass was reading; try again later.
		return CompactStats{DirtyRatio: p.stats.DirtyRatio}, nil
	}
	if err == nil && stats.Cleaned {
		l.stats.compactions.Add(1)
		l.stats.compactionBytesRead.Add(stats.BytesRead)
		l.stats.compactionBytesWritten.Add(stats.BytesWritten)
	}
	return stats, err
}

// compactionOverdue reports whether a sealed segment holding dirty offsets
// starts with a batch whose max timestamp is positive and before limit: a
// record has waited longer than MaxCompactionLag, and a pass is due whatever
// the dirty ratio (Kafka's LogCleanerManager.maxCompactionDelay, which also
// passes over a first batch without a timestamp). The headers are read before
// appendMu is taken; cleanMu is held, so the first dirty offset cannot move up
// meanwhile.
func (l *Log) compactionOverdue(limit int64) bool {
	firstDirty := l.FirstDirtyOffset()
	views := l.sealedViews()
	defer releaseViews(views)
	for _, v := range views {
		if v.next <= firstDirty || v.size == 0 {
			continue
		}
		if h, _, ok := v.s.headerAt(0); ok && h.MaxTimestamp > 0 && h.MaxTimestamp < limit {
			return true
		}
	}
	return false
}

// compactPlan is what a pass works on, fixed when it starts.
type compactPlan struct {
	all        []segmentView // every segment, acquired, the active one last
	cleanable  int           // all[:cleanable] may be cleaned
	firstDirty int64
	state      cleanerState // the cleaner state when the pass began
	truncGen   uint64
	now        time.Time
	stats      CompactStats
	// tombstonesOnly: nothing is dirty, but tombstones in the clean section expired.
	tombstonesOnly bool
}

func (p *compactPlan) statsOrZero() CompactStats {
	if p == nil {
		return CompactStats{}
	}
	return p.stats
}

// upper is the end of the offsets segment i of the plan may hold: the next
// segment's base.
func (p *compactPlan) upper(i int) int64 { return p.all[i+1].s.base }

// raced reports whether a truncation ran since the plan was made.
func (p *compactPlan) raced(l *Log) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.truncGen != p.truncGen
}

// planCompaction picks the cleanable segments: sealed, wholly below highWatermark
// and, with a compaction lag, old enough, stopping at the first that is not. It
// returns nil when none of them is dirty. now is the pass's clock reading.
func (l *Log) planCompaction(highWatermark int64, opts CompactOptions, now time.Time) (*compactPlan, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return nil, err
	}
	p := &compactPlan{state: l.cleaner.clone(), truncGen: l.mu.truncGen, now: now}
	segs := l.mu.segments
	lagLimit := p.now.Add(-opts.MinCompactionLag).UnixMilli()
	for i, s := range segs {
		if i+1 == len(segs) || p.cleanable != i || segs[i+1].base > highWatermark {
			break
		}
		if opts.MinCompactionLag != 0 {
			newest, err := s.newestTimestamp(&l.stats)
			if err != nil {
				return nil, err
			}
			if newest > lagLimit {
				break
			}
		}
		p.cleanable++
	}
	p.firstDirty = max(p.state.firstDirty, segs[0].base)
	var clean, dirty int64
	for i, s := range segs[:p.cleanable] {
		if segs[i+1].base <= p.firstDirty {
			clean += s.size
		} else {
			dirty += s.size
		}
	}
	dirtySegments := p.cleanable > 0 && segs[p.cleanable].base > p.firstDirty
	if !dirtySegments && !(p.cleanable > 0 && p.state.expiredTombstones(p.now.UnixMilli(), opts.DeleteRetention)) {
		return nil, nil
	}
	for _, s := range segs {
		p.all = append(p.all, acquireViewLocked(s))
	}
	p.stats.FirstDirtyOffset = p.firstDirty
	switch {
	case !dirtySegments:
		// Nothing is dirty but tombstones expired: a pass runs whatever the ratio.
		p.tombstonesOnly = true
	case clean+dirty > 0:
		p.stats.DirtyRatio = float64(dirty) / float64(clean+dirty)
	default:
		p.stats.DirtyRatio = 1 // dirty segments that are all empty
	}
	return p, nil
}

// clean runs a planned pass: offset map, cleaned segments, swap.
func (l *Log) clean(p *compactPlan, opts CompactOptions) (CompactStats, error) {
	stats := p.stats
	producers, err := scanProducers(p.all)
	if err != nil {
		return stats, err
	}
	recs := newPassRecords(opts)
	defer recs.buf.Release()
	keys, end, err := buildOffsetMap(p, opts.OffsetMapBytes, producers.aborted, recs)
	if err != nil {
		return stats, err
	}
	stats.EndOffset = end
	c := &cleaner{
		records:         recs,
		keys:            keys,
		producers:       producers.last,
		lastBatch:       producers.lastBatch,
		aborted:         producers.aborted,
		txnKept:         make(map[int64]bool),
		txnRead:         make(map[int64]bool),
		markersRemoved:  make(map[int64]bool),
		state:           &p.state,
		nowMs:           p.now.UnixMilli(),
		deleteRetention: opts.DeleteRetention,
		stats:           &stats,
		tombstones:      make([]bool, len(p.state.ranges)+1),
	}
	var out []*cleanedSegment
	defer func() {
		for _, cs := range out {
			cs.discard(l)
		}
	}()
	filtered := p.all[0].s.base // the pass filters every batch below it
	for _, g := range groupSegments(p, end, l.conf().SegmentBytes) {
		cs, err := l.writeCleaned(p, g, c)
		if err != nil {
			return stats, err
		}
		if cs != nil {
			out = append(out, cs)
		}
		filtered = p.upper(g.last)
	}
	next := p.state.clone()
	for i := range next.ranges {
		next.ranges[i].tombstones = c.tombstones[i]
	}
	next.record(end, c.nowMs, opts.DeleteRetention, c.tombstones[len(next.ranges)])
	// Clocks of markers the pass did not reach (clean segments past the
	// compaction lag or the high-water mark) carry over, unless a transaction
	// lost its last batch in this pass with its marker there: then every
	// marker there waits from now.
	if filtered < p.state.firstDirty && c.emptiedUnreached() {
		next.markers = append(c.markers, markerClock{from: filtered, to: p.state.firstDirty - 1, atMs: c.nowMs})
	} else {
		next.markers = append(c.markers, p.state.markersFrom(filtered)...)
	}
	next.capMarkers()
	pending := out
	out = nil // swapCleaned owns them now
	if err := l.swapCleaned(p, pending, next); err != nil {
		return stats, err
	}
	stats.Cleaned = true
	return stats, nil
}

// segmentGroup is a run of consecutive cleanable segments, all[first:last+1],
// cleaned into one segment.
type segmentGroup struct{ first, last int }

// groupSegments splits the segments wholly below end into runs that fit one
// cleaned segment: at most segmentBytes of input and an offset span an index entry
// can address (Kafka's groupSegmentsBySize).
func groupSegments(p *compactPlan, end, segmentBytes int64) []segmentGroup {
	var groups []segmentGroup
	for i := 0; i < p.cleanable && p.upper(i) <= end; {
		g := segmentGroup{first: i, last: i}
		size := p.all[i].size
		for j := i + 1; j < p.cleanable && p.upper(j) <= end; j++ {
			if size+p.all[j].size > segmentBytes || p.upper(j)-1-p.all[i].s.base > math.MaxUint32 {
				break
			}
			size += p.all[j].size
			g.last = j
		}
		groups = append(groups, g)
		i = g.last + 1
	}
	return groups
}

// FirstDirtyOffset returns the end of the log's clean section: every offset below
// it has been through a compaction pass. It is 0 for a log never compacted.
func (l *Log) FirstDirtyOffset() int64 {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.cleaner.firstDirty
}

// RunCompaction calls Compact every interval with the high-water mark hwm returns
// and the options opts returns (read each time, so topic config changes apply),
// until ctx ends (returning its error) or a pass fails (returning that error).
func (l *Log) RunCompaction(ctx context.Context, interval time.Duration, hwm func() int64, opts func() CompactOptions) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if _, err := l.Compact(hwm(), opts()); err != nil {
				return err
			}
		}
	}
}
