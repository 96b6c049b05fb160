package replica

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
)

// TestApplyPreparesWhatChanged: Apply skips the partitions whose metadata is
// unchanged, but a topic configuration change reaches every partition of the
// topic, a partition whose preparation failed is prepared again by the next
// Apply although its metadata did not change, and an unhosted partition is
// closed.
func TestApplyPreparesWhatChanged(t *testing.T) {
	var failOpen atomic.Bool // fail creating partition 2's directory
	fsys := vfs.NewErrorFS(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op) error {
		if failOpen.Load() && strings.Contains(op.Path, "t-2") {
			return errors.New("injected")
		}
		return nil
	}))
	m, err := NewManager(fsys, "/logs", 1, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	id := metadata.UUID{7}
	recs := []metadata.Record{&metadata.TopicRecord{Name: "t", ID: id}}
	for b := int32(1); b <= 2; b++ {
		recs = append(recs, &metadata.RegisterBrokerRecord{BrokerID: b, Epoch: 1, Host: "127.0.0.1", Port: 9091 + b})
	}
	for p := range int32(3) {
		recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: p, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), recs)
	if err != nil {
		t.Fatal(err)
	}
	next := func(rec metadata.Record) {
		t.Helper()
		n, err := metadata.Apply(img, rec)
		if err != nil {
			t.Fatal(err)
		}
		img = n.WithOffset(img.Offset() + 1)
	}
	img = img.WithOffset(1)

	failOpen.Store(true)
	if err := m.Apply(img); err == nil {
		t.Fatal("Apply hid partition 2's failure")
	}
	if _, err := m.Partition("t", 2); err == nil {
		t.Fatal("partition 2 hosted although its directory could not be made")
	}
	failOpen.Store(false)
	// An unrelated change: partition 2's metadata is as before, and it is
	// prepared again.
	next(&metadata.RegisterBrokerRecord{BrokerID: 3, Epoch: 1, Host: "127.0.0.1", Port: 9094})
	if err := m.Apply(img); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if _, err := m.Partition("t", p); err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
	}

	// A topic configuration change reaches every partition.
	next(&metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "t", Key: "retention.ms", Value: "12345"})
	if err := m.Apply(img); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		part, _ := m.Partition("t", p)
		if got := part.Config().RetentionMs; got != 12345 {
			t.Fatalf("partition %d: retention.ms %d after the change", p, got)
		}
	}
	// ...as one copy the partitions share, not one each (about 200 bytes per
	// partition: 2 MB on a broker hosting 10,000).
	first, _ := m.Partition("t", 0)
	for p := range int32(3) {
		if part, _ := m.Partition("t", p); part.Config() != first.Config() {
			t.Fatalf("partition %d holds its own copy of the topic's configuration", p)
		}
	}

	// A leader change of one partition reaches it; the others keep their role.
	p1 := img.Topic("t").Partitions[1]
	next(&metadata.PartitionChangeRecord{TopicID: id, Partition: 1, BasePartitionEpoch: p1.PartitionEpoch,
		Leader: 2, LeaderEpoch: p1.LeaderEpoch + 1, ISR: []int32{1, 2}})
	if err := m.Apply(img); err != nil {
		t.Fatal(err)
	}
	for p, leads := range []bool{true, false, true} {
		part, _ := m.Partition("t", int32(p))
		if part.IsLeader() != leads {
			t.Fatalf("partition %d: leader %v, want %v", p, part.IsLeader(), leads)
		}
	}

	// Moved off this broker: closed and removed; the others stay.
	p0 := img.Topic("t").Partitions[0]
	next(&metadata.ReassignmentRecord{TopicID: id, Partition: 0, BasePartitionEpoch: p0.PartitionEpoch,
		Replicas: []int32{2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: p0.LeaderEpoch + 1})
	if err := m.Apply(img); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Partition("t", 0); err == nil {
		t.Fatal("partition 0 still hosted after moving off this broker")
	}
	if _, err := m.Partition("t", 2); err != nil {
		t.Fatalf("partition 2: %v", err)
	}
	// The topic deleted: every partition goes.
	next(&metadata.RemoveTopicRecord{TopicID: id})
	if err := m.Apply(img); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if _, err := m.Partition("t", p); err == nil {
			t.Fatalf("partition %d hosted after the topic's removal", p)
		}
	}
}

// TestStorageConfigSegmentSize checks the segment size a log is opened with: a
// topic's internal.segment.bytes before segment.bytes, and a size below the
// log's floor raised to it. Older Strata took log.segment.bytes=1000 and a node
// holding such a topic then refused to start ("SegmentBytes 1000 not in [2048,
// ...]", seen in session 10).
func TestStorageConfigSegmentSize(t *testing.T) {
	for _, tt := range []struct {
		segment, internal int32
		want              int64
	}{
		{1 << 30, 0, 1 << 30},
		{1 << 20, 4096, 4096},
		{1000, 0, storage.MinSegmentBytes},
		{14, 0, storage.MinSegmentBytes},
	} {
		tc := metadata.DefaultTopicConfig()
		tc.SegmentBytes, tc.InternalSegmentBytes = tt.segment, tt.internal
		c := storageConfig(tc, time.Now)
		if c.SegmentBytes != tt.want {
			t.Errorf("segment.bytes %d, internal.segment.bytes %d: segment size %d, want %d", tt.segment, tt.internal, c.SegmentBytes, tt.want)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("segment.bytes %d: %v", tt.segment, err)
		}
	}
}

// TestIndexIntervalAsKafka: a topic's index.interval.bytes on its log's
// offset index. Kafka's LogSegment adds an entry before a batch once more
// than the interval was appended since the last one, so 0 indexes every batch
// but a segment's first; Strata read 0 as its log's default, 4096.
func TestIndexIntervalAsKafka(t *testing.T) {
	const batches = 10
	for _, tt := range []struct {
		interval    int32
		wantEntries int
	}{
		{0, batches - 1},
		{4096, 0},
	} {
		tc := metadata.DefaultTopicConfig()
		tc.IndexIntervalBytes = tt.interval
		dir := t.TempDir()
		l, err := storage.Open(vfs.Default, dir, storageConfig(tc, time.Now))
		if err != nil {
			t.Fatal(err)
		}
		for range batches {
			if _, err := l.Append(batchtest.Build(batchtest.Options{Records: batchtest.Values(1, 10)}), 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, "00000000000000000000.index"))
		if err != nil {
			t.Fatal(err)
		}
		if got := int(fi.Size()) / 8; got != tt.wantEntries {
			t.Errorf("index.interval.bytes=%d: %d offset index entries for %d batches, want %d", tt.interval, got, batches, tt.wantEntries)
		}
	}
}

// TestStorageConfigPreallocate checks that a topic's preallocate (or the
// cluster's log.preallocate, which resolves into it) reaches its log.
func TestStorageConfigPreallocate(t *testing.T) {
	for _, pre := range []bool{false, true} {
		tc := metadata.DefaultTopicConfig()
		tc.Preallocate = pre
		if got := storageConfig(tc, time.Now).Preallocate; got != pre {
			t.Errorf("preallocate=%v: log config has %v", pre, got)
		}
	}
}

// TestStorageConfigJitterAndDeleteDelay checks that a topic's
// segment.jitter.ms and file.delete.delay.ms reach its log (the log bounds the
// jitter by its segment age, as Kafka's LogConfig.randomSegmentJitter bounds
// it by segment.ms).
func TestStorageConfigJitterAndDeleteDelay(t *testing.T) {
	for _, tt := range []struct {
		jitterMs, deleteDelayMs int64
		wantJitter, wantDelay   time.Duration
	}{
		{0, 60_000, 0, time.Minute}, // Kafka's defaults
		{30_000, 0, 30 * time.Second, 0},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64},
	} {
		tc := metadata.DefaultTopicConfig()
		tc.SegmentJitterMs, tc.FileDeleteDelayMs = tt.jitterMs, tt.deleteDelayMs
		c := storageConfig(tc, time.Now)
		if c.SegmentJitter != tt.wantJitter || c.FileDeleteDelay != tt.wantDelay {
			t.Errorf("segment.jitter.ms %d, file.delete.delay.ms %d: log jitter %v, delete delay %v; want %v, %v",
				tt.jitterMs, tt.deleteDelayMs, c.SegmentJitter, c.FileDeleteDelay, tt.wantJitter, tt.wantDelay)
		}
		if err := c.Validate(); err != nil {
			t.Error(err)
		}
	}
}

// TestStorageConfigMaxCompactionLag checks max.compaction.lag.ms on the way
// to a log: on a compacted topic the active segment rolls once it is that old
// if segment.ms is longer (Kafka's LogConfig.maxSegmentMs), so that its
// records can be cleaned in time, and every pass is given the lag.
func TestStorageConfigMaxCompactionLag(t *testing.T) {
	const day = 24 * time.Hour
	for _, tt := range []struct {
		policy              metadata.CleanupPolicy
		segmentMs, maxLagMs int64
		wantAge, wantMaxLag time.Duration
	}{
		{metadata.CleanupCompact, 7 * day.Milliseconds(), math.MaxInt64, 7 * day, math.MaxInt64},
		{metadata.CleanupCompact, 7 * day.Milliseconds(), 60_000, time.Minute, time.Minute},
		{metadata.CleanupCompact | metadata.CleanupDelete, 7 * day.Milliseconds(), 60_000, time.Minute, time.Minute},
		{metadata.CleanupCompact, 30_000, 60_000, 30 * time.Second, time.Minute},
		{metadata.CleanupDelete, 7 * day.Milliseconds(), 60_000, 7 * day, time.Minute},
	} {
		tc := metadata.DefaultTopicConfig()
		tc.CleanupPolicy, tc.SegmentMs, tc.MaxCompactionLagMs = tt.policy, tt.segmentMs, tt.maxLagMs
		if got := storageConfig(tc, time.Now).SegmentAge; got != tt.wantAge {
			t.Errorf("policy %v, segment.ms %d, max.compaction.lag.ms %d: segment age %v, want %v", tt.policy, tt.segmentMs, tt.maxLagMs, got, tt.wantAge)
		}
		if got := compactOptions(tc).MaxCompactionLag; got != tt.wantMaxLag {
			t.Errorf("max.compaction.lag.ms %d: pass option %v, want %v", tt.maxLagMs, got, tt.wantMaxLag)
		}
	}
}

// TestRetentionAsKafka: a topic's retention.ms and retention.bytes act on its
// log with Kafka's values: 0 deletes every segment below the high-water mark
// (the active one rolled first), as Kafka's UnifiedLog.deleteOldSegments does,
// and any negative retention.bytes is no limit (LogConfig puts no bound on
// it). Strata read 0 as its log's default (7 days, no size limit), and a
// retention.bytes below -1 failed the log's config.
func TestRetentionAsKafka(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		name        string
		ms, bytes   int64
		wantDeleted bool
	}{
		{"retention.ms 0", 0, -1, true},
		{"retention.bytes 0", -1, 0, true},
		{"retention.bytes -5", -1, -5, false},
		{"kept", 60 * 60 * 1000, -1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := metadata.DefaultTopicConfig()
			tc.RetentionMs, tc.RetentionBytes, tc.InternalSegmentBytes = tt.ms, tt.bytes, storage.MinSegmentBytes
			l, err := storage.Open(vfs.Default, t.TempDir(), storageConfig(tc, func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			p, err := newPartition("t", metadata.UUID{}, 0, l, false, 1, producerExpiry{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.close() })
			p.setConfig(&tc)
			if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}, now); err != nil {
				t.Fatal(err)
			}
			for range 20 {
				mustAppend(t, p, batchtest.Build(batchtest.Options{FirstTimestamp: now.Add(-time.Minute).UnixMilli(), Records: batchtest.Values(2, 200)}))
			}
			(&Manager{now: func() time.Time { return now }, log: slog.New(slog.DiscardHandler)}).clean(p)
			end := p.LogEndOffset()
			if deleted := p.LogStartOffset() == end; deleted != tt.wantDeleted {
				t.Errorf("log start %d, end %d: all deleted %v, want %v", p.LogStartOffset(), end, deleted, tt.wantDeleted)
			}
		})
	}
}

// TestApplyPerBrokerTopicConfig: a broker key set for this broker alone (a
// per-broker dynamic config, kafka-configs --entity-type brokers
// --entity-name 1) reaches the logs of its topics that do not set the key,
// before the cluster-wide default, as Kafka's brokers build a topic's
// LogConfig from their own configuration; another broker's value does not,
// and a topic's own value still wins.
func TestApplyPerBrokerTopicConfig(t *testing.T) {
	m, err := NewManager(vfs.NewMem(), "/logs", 1, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	id := metadata.UUID{7}
	img, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.TopicRecord{Name: "t", ID: id},
		&metadata.PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	img = img.WithOffset(1)
	if err := m.Apply(img); err != nil {
		t.Fatal(err)
	}
	broker := func(name, key, value string) *metadata.ConfigRecord {
		return &metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, ResourceName: name, Key: key, Value: value, Delete: value == ""}
	}
	for _, step := range []struct {
		rec  metadata.Record
		want int64 // retention.ms of t-0 after rec
	}{
		{broker("", "log.retention.ms", "5000"), 5000},
		{broker("1", "log.retention.ms", "4242"), 4242},
		{broker("2", "log.retention.ms", "1111"), 4242},
		{broker("", "log.retention.ms", "6000"), 4242},
		{&metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "t", Key: "retention.ms", Value: "7"}, 7},
		{&metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "t", Key: "retention.ms", Delete: true}, 4242},
		{broker("1", "log.retention.ms", ""), 6000},
	} {
		n, err := metadata.Apply(img, step.rec)
		if err != nil {
			t.Fatal(err)
		}
		img = n.WithOffset(img.Offset() + 1)
		if err := m.Apply(img); err != nil {
			t.Fatal(err)
		}
		p, err := m.Partition("t", 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Config().RetentionMs; got != step.want {
			t.Fatalf("after %+v: retention.ms %d, want %d", step.rec, got, step.want)
		}
	}
}
