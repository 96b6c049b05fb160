package storage

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// FlushMode chooses when a log fsyncs its active segment.
type FlushMode int

const (
	// GroupCommit fsyncs as soon as there is unsynced data, on one flusher goroutine
	// per log: appends that arrive while an fsync runs are covered together by the
	// next one, and every WaitDurable waiter shares the result.
	GroupCommit FlushMode = iota
	// Interval fsyncs after IntervalMessages unsynced messages or every Interval,
	// whichever comes first (Kafka's flush.messages and flush.ms). With both zero the
	// log is synced only when a segment rolls and on Close, as Kafka does by default;
	// durability then comes from replication.
	Interval
)

func (m FlushMode) String() string {
	switch m {
	case GroupCommit:
		return "group-commit"
	case Interval:
		return "interval"
	}
	return fmt.Sprintf("FlushMode(%d)", int(m))
}

// FlushPolicy is a log's durability policy.
type FlushPolicy struct {
	Mode FlushMode
	// IntervalMessages (Interval mode) syncs once this many records are unsynced;
	// 0 disables the trigger.
	IntervalMessages int64
	// Interval (Interval mode) syncs unsynced data this often; 0 disables the trigger.
	Interval time.Duration
}

// tick is the period of the policy's time trigger; 0 when it has none.
func (p FlushPolicy) tick() time.Duration {
	if p.Mode == Interval && p.Interval > 0 {
		return p.Interval
	}
	return 0
}

// Defaults, Kafka's where Kafka has one.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentAge         = 7 * 24 * time.Hour
	DefaultIndexIntervalBytes = 4096
	DefaultIndexMaxBytes      = 10 << 20
	DefaultRetentionAge       = 7 * 24 * time.Hour
	// IndexEveryBatch as IndexIntervalBytes puts an offset-index entry before
	// every batch but a segment's first, as Kafka does for an interval of 0
	// (which Config reads as the default).
	IndexEveryBatch = -1
	// MinSegmentBytes and MaxSegmentBytes bound SegmentBytes; the maximum keeps
	// file positions within the uint32 of an index entry.
	MinSegmentBytes = 2 << 10
	MaxSegmentBytes = math.MaxInt32
	// minIndexMaxBytes leaves room for a few entries of either index.
	minIndexMaxBytes = 4 * timeEntrySize
)

// Config configures one partition log. The zero value of each field means its
// default.
type Config struct {
	// SegmentBytes rolls the active segment before it would exceed this size
	// (segment.bytes; default 1 GiB, at most MaxSegmentBytes).
	SegmentBytes int64
	// SegmentAge rolls a non-empty active segment once the newest batch is this much
	// younger than the segment's first batch, or, for batches without timestamps, once
	// the segment is this old by Now (segment.ms; default 7 days).
	SegmentAge time.Duration
	// SegmentJitter brings each segment's time-based roll forward by a random
	// amount in [0, min(SegmentJitter, SegmentAge)), drawn when the segment is
	// created or opened, so that logs created together do not all roll at once
	// (segment.jitter.ms; default 0, no jitter).
	SegmentJitter time.Duration
	// IndexIntervalBytes is the number of log bytes between offset-index entries
	// (index.interval.bytes; default 4096). IndexEveryBatch (any negative value)
	// indexes every batch but a segment's first: Kafka's index.interval.bytes=0.
	IndexIntervalBytes int
	// IndexMaxBytes caps each index file; a full index rolls the segment
	// (segment.index.bytes; default 10 MiB).
	IndexMaxBytes int
	// RetentionAge deletes segments whose newest record is older than this
	// (retention.ms; default 7 days; negative: keep forever).
	RetentionAge time.Duration
	// RetentionBytes deletes the oldest segments while the log is larger than this
	// (retention.bytes; 0 means the default, -1: no limit).
	RetentionBytes int64
	// FileDeleteDelay keeps the file of a segment that retention, compaction,
	// truncation or DeleteRecords removed, renamed to .deleted, this long
	// before removing it (file.delete.delay.ms), and for as long as a reader
	// holds it. 0 removes it once no reader holds it; the broker passes the
	// topic's setting, 60 s by default.
	FileDeleteDelay time.Duration
	// LogAppendTime stamps every batch appended as leader with the broker's time
	// (message.timestamp.type=LogAppendTime).
	LogAppendTime bool
	// Flush is the durability policy; the zero value is GroupCommit.
	Flush FlushPolicy
	// Preallocate keeps a few MiB of zeroed, fsynced file ahead of the active
	// segment's write position, so appends overwrite blocks already on disk and
	// their fsyncs skip the file system's journal commit (preallocate; default
	// false). See prealloc.go.
	Preallocate bool
	// CacheTailBytes is how much of the newest durable data of the active
	// segment stays in the operating system's page cache: after each fsync the
	// bytes below the synced size minus CacheTailBytes are dropped from it, so
	// that appends reuse those pages (cache.go). 0 means DefaultCacheTailBytes;
	// negative: nothing is dropped, written data stays cached until the kernel
	// needs the memory (Kafka's way).
	CacheTailBytes int64
	// randN returns a random number in [0, n) for SegmentJitter; nil means
	// math/rand/v2's Int64N (tests).
	randN func(n int64) int64
	// preallocWindow and preallocChunk replace the zeroer's window and chunk
	// sizes when set (tests).
	preallocWindow, preallocChunk int64
	// Now is the clock for roll and retention decisions and LogAppendTime; nil means
	// time.Now.
	Now func() time.Time
	// OnSync, if set, is called after every fsync of a segment with its duration and
	// result, from the goroutine that synced. It must not block or call into the Log.
	OnSync func(took time.Duration, err error)
	// OnRoll, if set, is called after every segment roll with how long it held
	// the log's appends (sealing and fsyncing the old segment, creating the new
	// one). It must not block.
	OnRoll func(took time.Duration)
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentAge == 0 {
		c.SegmentAge = DefaultSegmentAge
	}
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if c.IndexMaxBytes == 0 {
		c.IndexMaxBytes = DefaultIndexMaxBytes
	}
	if c.RetentionAge == 0 {
		c.RetentionAge = DefaultRetentionAge
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = -1
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.CacheTailBytes == 0 {
		c.CacheTailBytes = DefaultCacheTailBytes
	}
	if c.randN == nil {
		c.randN = rand.Int64N
	}
	if c.preallocWindow == 0 {
		c.preallocWindow = preallocWindowFor(c.SegmentBytes)
	}
	if c.preallocChunk == 0 {
		c.preallocChunk = defaultPreallocChunk
	}
	return c
}

// Validate reports the first setting that is out of range, after defaults apply.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.SegmentBytes < MinSegmentBytes || c.SegmentBytes > MaxSegmentBytes:
		return fmt.Errorf("%w: SegmentBytes %d not in [%d, %d]", ErrConfig, c.SegmentBytes, MinSegmentBytes, int64(MaxSegmentBytes))
	case c.SegmentAge < 0:
		return fmt.Errorf("%w: SegmentAge %v is negative", ErrConfig, c.SegmentAge)
	case c.SegmentJitter < 0:
		return fmt.Errorf("%w: SegmentJitter %v is negative", ErrConfig, c.SegmentJitter)
	case c.FileDeleteDelay < 0:
		return fmt.Errorf("%w: FileDeleteDelay %v is negative", ErrConfig, c.FileDeleteDelay)
	case c.IndexMaxBytes < minIndexMaxBytes:
		return fmt.Errorf("%w: IndexMaxBytes %d below %d", ErrConfig, c.IndexMaxBytes, minIndexMaxBytes)
	case c.RetentionBytes < -1:
		return fmt.Errorf("%w: RetentionBytes %d below -1", ErrConfig, c.RetentionBytes)
	case c.Flush.Mode != GroupCommit && c.Flush.Mode != Interval:
		return fmt.Errorf("%w: unknown flush mode %v", ErrConfig, c.Flush.Mode)
	case c.Flush.IntervalMessages < 0 || c.Flush.Interval < 0:
		return fmt.Errorf("%w: negative flush interval", ErrConfig)
	}
	return nil
}

// rollJitter draws a new segment's roll jitter from [0, min(SegmentJitter,
// SegmentAge)), as Kafka's LogConfig.randomSegmentJitter does from segment.ms;
// 0 without SegmentJitter. c has its defaults.
func (c *Config) rollJitter() time.Duration {
	bound := min(c.SegmentJitter, c.SegmentAge)
	if bound <= 0 {
		return 0
	}
	return time.Duration(c.randN(int64(bound)))
}
