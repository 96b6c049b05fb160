package share

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// newTieredTestParts is newTestParts's with topic "t" tiered (remote storage
// on, 4 KiB segments, 8 KiB kept locally) on an in-memory object store.
func newTieredTestParts(t *testing.T) (testParts, *replica.Manager, *replica.Partition) {
	t.Helper()
	store, err := remote.NewFile(vfs.NewMem(), "/objects")
	if err != nil {
		t.Fatal(err)
	}
	rm, err := replica.NewManager(vfs.NewMem(), "/logs", 1, slog.New(slog.DiscardHandler),
		replica.Options{Remote: store, RemoteCache: storage.NewBlockCache(1 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rm.Close() })
	img, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.TopicRecord{Name: "t", ID: gcTopicID, Configs: map[string]string{
			"remote.storage.enable": "true", "local.retention.bytes": "8192", metadata.TopicInternalSegmentBytes: "4096"}},
		&metadata.PartitionRecord{TopicID: gcTopicID, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	img = img.WithOffset(1)
	if err := rm.Apply(img); err != nil {
		t.Fatal(err)
	}
	rp, err := rm.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if rp.Tier() == nil {
		t.Fatal("the test topic is not tiered")
	}
	return testParts{img: img, rm: rm}, rm, rp
}

// tierAway appends 60 two-record batches (120 offsets) of 100-byte values, then runs the
// tiering and cleaner passes until local retention has deleted uploaded
// segments: the first records are then only in the object store.
func tierAway(t *testing.T, rm *replica.Manager, rp *replica.Partition) {
	t.Helper()
	first := rp.HighWatermark()
	want := first + 120
	for range 60 {
		if _, err := rp.Append(batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(2, 100)}), 1); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "the high watermark", func() bool { return rp.HighWatermark() == want })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { rm.RunTiering(ctx, 10*time.Millisecond); done <- struct{}{} }()
	go func() { rm.RunCleaner(ctx, 10*time.Millisecond); done <- struct{}{} }()
	wait.For(t, "local retention to delete uploaded segments", func() bool { return rp.LogStartOffset() > 2 })
	cancel()
	<-done
	<-done
	if ls := rp.FetchLogStart(false); ls > first {
		t.Fatalf("the partition's log start is %d after local retention, want at most %d (the records are in the object store)", ls, first)
	}
	res, err := rp.Read(first, 1<<20, replica.ReadUncommitted)
	if err != nil || len(res.Remote) == 0 {
		t.Fatalf("a fetch at %d is not served from the object store: %d remote bytes, %v", first, len(res.Remote), err)
	}
	t.Logf("local log start %d, log start %d, high watermark %d", rp.LogStartOffset(), rp.FetchLogStart(false), rp.HighWatermark())
}

// firstAcquired opens member's session for up to 500 records and returns the
// first offset it acquired (-1: none) and the partition's error code.
func firstAcquired(t *testing.T, m *Manager, member string, maxRecords int32) (int64, int16) {
	t.Helper()
	req := openFetch(member)
	req.MaxRecords, req.MaxWaitMillis = maxRecords, 0
	resp := m.ShareFetch(context.Background(), req)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("%s: share fetch: %+v", member, resp)
	}
	p := resp.Topics[0].Partitions[0]
	if len(p.AcquiredRecords) == 0 {
		return -1, p.ErrorCode
	}
	return p.AcquiredRecords[0].FirstOffset, p.ErrorCode
}

// TestShareGroupReadsTieredRecords: on a tiered topic whose first segments
// local retention deleted after uploading them, the records are still the
// partition's (its log start is 0; a Fetch reads them from the object store),
// and a share group delivers them, as Kafka's share-partition leader does
// since 4.1: a group with share.auto.offset.reset=earliest starts at the log
// start, and a group that was reading them does not skip them. Both used to
// start at the local log start, skipping the object store's records without
// a word.
func TestShareGroupReadsTieredRecords(t *testing.T) {
	t.Run("new group at earliest", func(t *testing.T) {
		parts, rm, rp := newTieredTestParts(t)
		m := NewManager(Config{Defaults: testGroupConfig()}, &memStore{}, parts, nil)
		t.Cleanup(m.Close)
		tierAway(t, rm, rp)
		if o, code := firstAcquired(t, m, "m1", 500); o != 0 {
			t.Errorf("a new group at earliest acquired from offset %d (code %d), want 0: the records before the local log start %d are never delivered",
				o, code, rp.LogStartOffset())
		}
		// The next members take the rest in order, across the object store's
		// end and into the local log.
		next := int64(-1)
		for i := 2; next < rp.HighWatermark(); i++ {
			req := openFetch(fmt.Sprintf("m%d", i))
			req.MaxRecords, req.MaxWaitMillis = 500, 0
			resp := m.ShareFetch(context.Background(), req)
			recs := resp.Topics[0].Partitions[0].AcquiredRecords
			if len(recs) == 0 {
				t.Fatalf("member m%d acquired nothing at %d, below the high watermark %d", i, next, rp.HighWatermark())
			}
			if next >= 0 && recs[0].FirstOffset != next {
				t.Fatalf("member m%d acquired from %d, want %d", i, recs[0].FirstOffset, next)
			}
			next = recs[len(recs)-1].LastOffset + 1
		}
	})
	t.Run("group reading before the upload", func(t *testing.T) {
		parts, rm, rp := newTieredTestParts(t)
		m := NewManager(Config{Defaults: testGroupConfig()}, &memStore{}, parts, nil)
		t.Cleanup(m.Close)
		appendRecords(t, rp, 1) // offset 0, one record
		if o, _ := firstAcquired(t, m, "m1", 1); o != 0 {
			t.Fatalf("first acquisition at %d, want 0", o)
		}
		if code := accept(m, "m1", 0); code != 0 {
			t.Fatalf("accepting offset 0: code %d", code)
		}
		tierAway(t, rm, rp) // offsets 1-120 (60 batches)
		if o, code := firstAcquired(t, m, "m2", 500); o != 1 {
			t.Errorf("the group's next acquisition starts at offset %d (code %d), want 1: offsets 1-%d, still in the object store, are skipped, never delivered nor archived",
				o, code, rp.LogStartOffset()-1)
		}
	})
}
