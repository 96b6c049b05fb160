package replica

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// TestTieredPartition drives a tiered single-replica leader through the
// Manager's upload and cleaner passes: local retention deletes only what is
// uploaded, a fetch below the local start is served from the store,
// ListOffsets -2/-4/-5/-6 answer the remote start, the local start, the last
// uploaded offset and the first not uploaded (before the first upload: none,
// and the log start), and DeleteRecords moves the remote start.
func TestTieredPartition(t *testing.T) {
	p, l, m, store, _ := tieredLeader(t)
	tier := p.Tier()
	if tier == nil {
		t.Fatal("no tier for a topic with remote.storage.enable")
	}
	for range 60 {
		if _, err := p.Append(batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(2, 100)}), 1); err != nil {
			t.Fatal(err)
		}
	}
	if p.HighWatermark() != 120 {
		t.Fatalf("HWM %d, want 120", p.HighWatermark())
	}

	// Before any upload, local retention deletes nothing.
	m.cleanTiered(p, tier)
	if p.LogStartOffset() != 0 {
		t.Fatalf("local start %d before any upload", p.LogStartOffset())
	}
	type listed struct {
		ts, want int64
		epoch    int32
	}
	checkListed := func(when string, tcs []listed) {
		t.Helper()
		for _, tc := range tcs {
			off, _, epoch, found, err := p.ListOffset(context.Background(), tc.ts, ReadUncommitted)
			if err != nil || !found || off != tc.want || epoch != tc.epoch {
				t.Errorf("%s: ListOffset(%d) = %d epoch %d, %v, %v; want %d epoch %d", when, tc.ts, off, epoch, found, err, tc.want, tc.epoch)
			}
		}
	}
	checkListed("before any upload", []listed{
		{LatestTieredTimestamp, -1, -1},
		{EarliestPendingUploadTimestamp, 0, 0},
	})
	m.uploadOnce(context.Background(), p, &tierUploadState{tier: tier, epoch: -1})
	m.cleanTiered(p, tier)
	local := p.LogStartOffset()
	if local == 0 || l.Size() > 8192+4096 {
		t.Fatalf("after upload and retention: local start %d, %d bytes", local, l.Size())
	}

	res, err := p.Read(0, 1<<20, ReadUncommitted)
	if err != nil || len(res.Remote) == 0 || res.LogStartOffset != 0 {
		t.Fatalf("fetch at 0: %d remote bytes, log start %d, %v", len(res.Remote), res.LogStartOffset, err)
	}
	if h, _ := batch.ParseHeader(res.Remote); h.BaseOffset != 0 {
		t.Fatalf("remote fetch starts at %d", h.BaseOffset)
	}
	uploaded := tier.UploadedEnd()
	if uploaded <= 0 || uploaded >= 120 {
		t.Fatalf("uploaded end %d after an upload pass", uploaded)
	}
	checkListed("after an upload", []listed{
		{EarliestTimestamp, 0, 0},
		{EarliestLocalTimestamp, local, 0},
		{LatestTieredTimestamp, uploaded - 1, 0},
		{EarliestPendingUploadTimestamp, uploaded, 0},
	})

	if start, err := p.DeleteRecords(10); err != nil || start != 10 {
		t.Fatalf("DeleteRecords(10) = %d, %v", start, err)
	}
	if _, err := p.Read(9, 1<<20, ReadUncommitted); !errors.Is(err, storage.ErrOffsetOutOfRange) {
		t.Fatalf("fetch below the new start: %v", err)
	}

	// The topic is deleted: its remote objects go, in the background.
	if keys, err := store.List(context.Background(), ""); err != nil || len(keys) == 0 {
		t.Fatalf("nothing in the store before the topic's deletion: %v, %v", keys, err)
	}
	m.deleteRemote(p)
	wait.For(t, "the deleted topic's remote objects to go", func() bool {
		keys, err := store.List(context.Background(), "")
		return err == nil && len(keys) == 0
	})

	// Without remote.storage.enable the tier goes.
	m.applyTier(p, metadata.DefaultTopicConfig())
	if p.Tier() != nil {
		t.Fatal("tier kept after remote.storage.enable was turned off")
	}
}

// TestNewTierKnowsTheRemotePartAtOnce: a leader's tier that no tiering pass
// has loaded yet (after a restart or a new leadership) answers from the
// store's manifest, not as if nothing were remote: ListOffsets earliest and by
// timestamp, and a fetch below the local start.
func TestNewTierKnowsTheRemotePartAtOnce(t *testing.T) {
	p, _, m, _, tc := tieredLeader(t)
	first := time.Now().UnixMilli()
	for i := range 60 {
		if _, err := p.Append(batchtest.Build(batchtest.Options{FirstTimestamp: first + int64(i), Records: batchtest.Values(2, 100)}), 1); err != nil {
			t.Fatal(err)
		}
	}
	m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
	m.cleanTiered(p, p.Tier())
	if p.LogStartOffset() == 0 {
		t.Fatal("local retention deleted nothing after the upload")
	}

	// The broker restarts: a new, unloaded tier over the same log and store.
	p.tier.Store(nil)
	m.applyTier(p, tc)
	off, _, _, found, err := p.ListOffset(context.Background(), EarliestTimestamp, ReadUncommitted)
	if err != nil || !found || off != 0 {
		t.Fatalf("ListOffsets earliest on a new tier = %d, %v, %v; want 0", off, found, err)
	}
	p.tier.Store(nil)
	m.applyTier(p, tc)
	off, _, _, found, err = p.ListOffset(context.Background(), first, ReadUncommitted)
	if err != nil || !found || off != 0 {
		t.Fatalf("ListOffsets by the first timestamp on a new tier = %d, %v, %v; want 0", off, found, err)
	}
	p.tier.Store(nil)
	m.applyTier(p, tc)
	res, err := p.Read(0, 1<<20, ReadUncommitted)
	if err != nil || len(res.Remote) == 0 || res.LogStartOffset != 0 {
		t.Fatalf("fetch at 0 on a new tier: %d remote bytes, log start %d, %v", len(res.Remote), res.LogStartOffset, err)
	}
}

func TestTierRetentionMapsTopicConfig(t *testing.T) {
	tc := metadata.DefaultTopicConfig()
	tc.RetentionMs, tc.RetentionBytes, tc.LocalRetentionMs, tc.LocalRetentionBytes = 1000, 5000, -2, 100
	r := tierRetention(tc)
	if r.Age != time.Second || r.Bytes != 5000 || r.LocalAge != time.Second || r.LocalBytes != 100 {
		t.Fatalf("tierRetention = %+v", r)
	}
}

func TestTierCopyLagMapsTopicConfig(t *testing.T) {
	for _, c := range []struct {
		lagMs, lagBytes, localMs, localBytes int64
		want                                 storage.CopyLag
	}{
		{0, -1, -2, -2, storage.CopyLag{Age: 0, Bytes: -1}},
		{1000, 5000, -2, -2, storage.CopyLag{Age: time.Second, Bytes: 5000}},
		{-1, -1, 2000, 100, storage.CopyLag{Age: 2 * time.Second, Bytes: 100}},
	} {
		tc := metadata.DefaultTopicConfig()
		tc.RemoteCopyLagMs, tc.RemoteCopyLagBytes, tc.LocalRetentionMs, tc.LocalRetentionBytes = c.lagMs, c.lagBytes, c.localMs, c.localBytes
		if got := tierCopyLag(tc); got != c.want {
			t.Errorf("tierCopyLag(lag %d ms, %d bytes; local %d ms, %d bytes) = %+v, want %+v", c.lagMs, c.lagBytes, c.localMs, c.localBytes, got, c.want)
		}
	}
}

// TestTieredCopyLagFollowsTopicConfig: the leader's uploads hold closed
// segments back for remote.copy.lag.ms, by the Manager's clock, and a change
// of the topic's value applies to the next pass. The old code uploaded every
// closed segment whatever the value.
func TestTieredCopyLagFollowsTopicConfig(t *testing.T) {
	p, _, m, _, tc := tieredLeader(t)
	now := time.UnixMilli(1_700_000_000_000)
	m.now = func() time.Time { return now }
	m.applyTier(p, metadata.DefaultTopicConfig()) // a new tier, on m.now
	// remote.copy.lag.bytes=-1 is the local retention: unbounded, no size check.
	tc.RemoteCopyLagMs, tc.LocalRetentionBytes = time.Minute.Milliseconds(), -2
	m.applyTier(p, tc)
	for range 60 {
		// Dated a second ago: a record dated after the clock lets its segment go.
		if _, err := p.Append(batchtest.Build(batchtest.Options{FirstTimestamp: now.Add(-time.Second).UnixMilli(), Records: batchtest.Values(2, 100)}), 1); err != nil {
			t.Fatal(err)
		}
	}
	upload := func() int64 {
		m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
		return p.Tier().UploadedEnd()
	}
	if end := upload(); end != 0 {
		t.Fatalf("uploaded up to %d with remote.copy.lag.ms=60000 and every record just written", end)
	}
	tc.RemoteCopyLagMs = 2 * time.Minute.Milliseconds()
	m.applyTier(p, tc)
	now = now.Add(time.Minute)
	if end := upload(); end != 0 {
		t.Fatalf("uploaded up to %d a minute after the records, with remote.copy.lag.ms raised to two", end)
	}
	now = now.Add(time.Minute)
	if end := upload(); end == 0 {
		t.Fatal("nothing uploaded once the records were as old as remote.copy.lag.ms")
	}
}

// TestTieredAbortedTxnOutlivesLocalRetention: an aborted transaction whose
// batches and marker local retention deleted after their upload is still
// reported to a read_committed fetch served from the store, and still after the
// replica restarts on its local log (the manifest carries it). Found by the
// chaos suite's transactional runs on a tiered topic: the cleaner forgot
// aborted transactions below the local log start, so read_committed consumers
// reading from offset 0 got the aborted records; and a restarted or new
// replica never knew them.
func TestTieredAbortedTxnOutlivesLocalRetention(t *testing.T) {
	dir := t.TempDir()
	m, _, tc := tieredManager(t)
	open := func() *Partition { return openTieredLeader(t, m, tc, dir) }
	p := open()
	// Timestamped now: retention.ms must not take them from the store.
	now := time.Now().UnixMilli()
	b, err := batch.Build(batch.BuildOptions{Idempotent: true, ProducerID: 7, Transactional: true, FirstTimestamp: now},
		[]batch.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p, b)
	if _, err := p.WriteTxnMarker(batch.Marker{ProducerID: 7, Timestamp: now}, 0); err != nil {
		t.Fatal(err)
	}
	for range 60 {
		mustAppend(t, p, batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(2, 100)}))
	}
	m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
	m.clean(p)
	if p.LogStartOffset() <= 4 {
		t.Fatalf("local start %d: the aborted transaction was not deleted locally", p.LogStartOffset())
	}
	want := []AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 3}}
	check := func(when string, p *Partition) {
		t.Helper()
		res, err := p.Read(0, 1<<20, ReadCommitted)
		if err != nil || len(res.Remote) == 0 {
			t.Fatalf("%s: read_committed fetch at 0: %d remote bytes, %v", when, len(res.Remote), err)
		}
		if !slices.Equal(res.Aborted, want) {
			t.Fatalf("%s: aborted transactions of a remote read: %v, want %v", when, res.Aborted, want)
		}
	}
	check("after local retention", p)
	p.close()
	p = open()
	t.Cleanup(func() { p.close() })
	check("after a restart", p)
}

// tieredManager is a Manager with an in-memory object store, and a tiered
// topic config keeping 8 KiB locally.
// tieredLeader is a single-replica leader of a tiered topic (4 KiB segments,
// 8 KiB of local retention) with its Manager, store and topic config.
func tieredLeader(t *testing.T) (*Partition, *storage.Log, *Manager, remote.Store, metadata.TopicConfig) {
	t.Helper()
	l, err := storage.Open(vfs.Default, t.TempDir(), storage.Config{SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPartition("t", metadata.UUID{1}, 0, l, false, 1, producerExpiry{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close() })
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 0}, time.Now()); err != nil {
		t.Fatal(err)
	}
	m, store, tc := tieredManager(t)
	p.setConfig(&tc)
	m.applyTier(p, tc)
	return p, l, m, store, tc
}

func tieredManager(t *testing.T) (*Manager, remote.Store, metadata.TopicConfig) {
	t.Helper()
	store, err := remote.NewFile(vfs.NewMem(), "/objects")
	if err != nil {
		t.Fatal(err)
	}
	m := &Manager{log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now,
		opts: Options{Remote: store, RemoteCache: storage.NewBlockCache(1 << 20)}}
	m.bgCtx, m.bgCancel = context.WithCancel(context.Background())
	t.Cleanup(func() { m.bgCancel(); m.bg.Wait() })
	tc := metadata.DefaultTopicConfig()
	tc.RemoteStorageEnable, tc.LocalRetentionBytes = true, 8192
	return m, store, tc
}

// hangingDeletes is a store whose deletes hang until their context ends: an
// object store that stopped answering.
type hangingDeletes struct {
	remote.Store
	entered chan struct{} // a delete began
	ended   atomic.Bool   // a delete returned
}

func (s *hangingDeletes) Delete(ctx context.Context, key string) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	s.ended.Store(true)
	return ctx.Err()
}

// TestCloseEndsRemoteDeletion: the deletion of a deleted topic's remote
// objects belongs to the Manager. Close cancels it and returns only once it
// has ended; the old code left it running for up to five minutes after Close,
// against a store the node was shutting down.
func TestCloseEndsRemoteDeletion(t *testing.T) {
	files, err := remote.NewFile(vfs.NewMem(), "/objects")
	if err != nil {
		t.Fatal(err)
	}
	store := &hangingDeletes{Store: files, entered: make(chan struct{}, 1)}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := NewManager(vfs.NewMem(), "/data/logs", 1, logger, Options{Remote: store, RemoteCache: storage.NewBlockCache(1 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.TopicRecord{Name: "t", ID: metadata.UUID{1}, Configs: map[string]string{"remote.storage.enable": "true"}},
		&metadata.PartitionRecord{TopicID: metadata.UUID{1}, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(img.WithOffset(1)); err != nil {
		t.Fatal(err)
	}
	p, err := m.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Tier() == nil {
		t.Fatal("no tier for a topic with remote.storage.enable")
	}
	m.deleteRemote(p)
	select {
	case <-store.entered:
	case <-time.After(time.Minute):
		t.Fatal("the remote deletion never reached the store")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if !store.ended.Load() {
		t.Fatal("Close returned while the remote deletion still ran")
	}
}

// TestTieredAbortedTxnSpansSegments: an aborted transaction whose batches are
// in one segment and whose marker is in a later one. The first segment is
// uploaded (the transaction has ended: uploads stop at the last stable
// offset) and deleted locally; then a replica that never saw the batches (no
// producer-state snapshot covers them: a new replica, or one that lost its
// snapshots) leads and uploads the marker's segment. A read_committed fetch
// from the store must still be told of the transaction: the first upload
// records it, not only the upload of its marker.
func TestTieredAbortedTxnSpansSegments(t *testing.T) {
	dir := t.TempDir()
	m, _, tc := tieredManager(t)
	tc.LocalRetentionBytes = 1 // everything uploaded goes locally
	open := func() *Partition { return openTieredLeader(t, m, tc, dir) }
	fill := func(p *Partition) { // until the active segment rolls
		t.Helper()
		for n := p.Log().NumSegments(); p.Log().NumSegments() == n; {
			mustAppend(t, p, batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(2, 100)}))
		}
	}
	upload := func(p *Partition) {
		t.Helper()
		m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
		m.clean(p)
	}
	p := open()
	now := time.Now().UnixMilli()
	b, err := batch.Build(batch.BuildOptions{Idempotent: true, ProducerID: 7, Transactional: true, FirstTimestamp: now},
		[]batch.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p, b) // 0-2, in the first segment
	fill(p)
	res, err := p.WriteTxnMarker(batch.Marker{ProducerID: 7, Timestamp: now}, 0) // in the active segment
	if err != nil {
		t.Fatal(err)
	}
	upload(p)
	if p.LogStartOffset() <= 2 || p.LogStartOffset() > res.BaseOffset {
		t.Fatalf("local start %d: want the transaction's batches deleted locally and its marker (%d) kept", p.LogStartOffset(), res.BaseOffset)
	}
	p.close()
	snapshots, err := filepath.Glob(filepath.Join(dir, "*.snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snapshots {
		if err := os.Remove(s); err != nil {
			t.Fatal(err)
		}
	}
	p = open()
	t.Cleanup(func() { p.close() })
	fill(p)
	upload(p) // the marker's segment, by a replica that does not know the transaction
	if p.LogStartOffset() <= res.BaseOffset {
		t.Fatalf("local start %d: the marker's segment (%d) was not uploaded and deleted", p.LogStartOffset(), res.BaseOffset)
	}
	got, err := p.Read(0, 1<<20, ReadCommitted)
	if err != nil || len(got.Remote) == 0 {
		t.Fatalf("read_committed fetch at 0: %d remote bytes, %v", len(got.Remote), err)
	}
	if want := []AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: res.BaseOffset}}; !slices.Equal(got.Aborted, want) {
		t.Fatalf("aborted transactions of a remote read: %v, want %v", got.Aborted, want)
	}
}

// openTieredLeader opens the single-replica leader of a tiered partition on
// dir with 4 KiB segments, its tier loaded.
func openTieredLeader(t *testing.T, m *Manager, tc metadata.TopicConfig, dir string) *Partition {
	t.Helper()
	p := openTieredPartition(t, m, tc, dir)
	if err := p.Tier().Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// openTieredPartition is openTieredLeader with the tier not loaded yet: a
// broker that has just started.
func openTieredPartition(t *testing.T, m *Manager, tc metadata.TopicConfig, dir string) *Partition {
	t.Helper()
	l, err := storage.Open(vfs.Default, dir, storage.Config{SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPartition("t", metadata.UUID{1}, 0, l, false, 1, producerExpiry{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 0}, time.Now()); err != nil {
		t.Fatal(err)
	}
	p.setConfig(&tc)
	m.applyTier(p, tc)
	return p
}

// deadlineGets is a store whose reads, once failing is set, record the
// deadline of their context and fail at once.
type deadlineGets struct {
	remote.Store
	failing   atomic.Bool
	mu        sync.Mutex
	deadlines []time.Time // zero: none
}

var errGetRefused = errors.New("get refused")

func (s *deadlineGets) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if !s.failing.Load() {
		return s.Store.Get(ctx, key, off, n)
	}
	d, _ := ctx.Deadline()
	s.mu.Lock()
	s.deadlines = append(s.deadlines, d)
	s.mu.Unlock()
	return nil, errGetRefused
}

// TestListOffsetRemoteDeadline: a timestamp lookup in the object store runs
// within the caller's deadline (ListOffsets v10's TimeoutMillis, KIP-1075), or
// within defaultRemoteReadTimeout when the caller gives none. The old code
// always used its own five seconds.
func TestListOffsetRemoteDeadline(t *testing.T) {
	m, store, tc := tieredManager(t)
	gets := &deadlineGets{Store: store}
	m.opts.Remote, m.opts.RemoteCache = gets, nil
	p := openTieredLeader(t, m, tc, t.TempDir())
	t.Cleanup(func() { p.close() })
	first := time.Now().UnixMilli()
	for range 60 {
		mustAppend(t, p, batchtest.Build(batchtest.Options{FirstTimestamp: first, Records: batchtest.Values(2, 100)}))
	}
	m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
	m.clean(p)
	if p.LogStartOffset() == 0 {
		t.Fatal("nothing deleted locally after the upload")
	}
	gets.failing.Store(true)

	for _, tt := range []struct {
		name     string
		deadline time.Time // zero: none
	}{
		{"the caller's deadline", time.Now().Add(250 * time.Millisecond)},
		{"a later deadline than the default", time.Now().Add(time.Minute)},
		{"no deadline", time.Time{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gets.mu.Lock()
			gets.deadlines = nil
			gets.mu.Unlock()
			ctx := context.Background()
			if !tt.deadline.IsZero() {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, tt.deadline)
				defer cancel()
			}
			before := time.Now()
			if _, _, _, _, err := p.ListOffset(ctx, first, ReadUncommitted); !errors.Is(err, storage.ErrRemoteUnavailable) {
				t.Fatalf("ListOffset: %v, want the store unavailable", err)
			}
			gets.mu.Lock()
			defer gets.mu.Unlock()
			if len(gets.deadlines) == 0 {
				t.Fatal("the lookup read nothing from the store")
			}
			for _, d := range gets.deadlines {
				switch {
				case !tt.deadline.IsZero() && !d.Equal(tt.deadline):
					t.Errorf("a read ran until %v, want the caller's %v", d, tt.deadline)
				case tt.deadline.IsZero() && (d.Before(before.Add(defaultRemoteReadTimeout)) || d.After(time.Now().Add(defaultRemoteReadTimeout))):
					t.Errorf("a read ran until %v, want the default %v from the call", d, defaultRemoteReadTimeout)
				}
			}
		})
	}
}

// TestTieredDeleteRecordsCrashBetweenSteps: DeleteRecords on a tiered
// partition writes the manifest's new start, then moves the local log start.
// A crash in between (here: the manifest step alone, then a restart) left the
// local log serving the deleted records for good. With nothing remote below
// the local start, the old code answered ListOffsets earliest and every
// fetch's log_start_offset with the old local start, 0, and served the
// records from 0; after local retention it answered the manifest's start but
// still served the records between the local start and it, in answers whose
// log_start_offset lay above their first batch. Whatever loads the tier first
// after the restart (the tiering pass, ListOffsets) now moves the local start
// up to the manifest's, and uploads and retention go on from there.
func TestTieredDeleteRecordsCrashBetweenSteps(t *testing.T) {
	loaders := []struct {
		name string
		load func(*Manager, *Partition)
	}{
		{"the tiering pass", func(m *Manager, p *Partition) {
			m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
		}},
		{"ListOffsets earliest", func(m *Manager, p *Partition) {
			_, _, _, _, _ = p.ListOffset(context.Background(), EarliestTimestamp, ReadUncommitted)
		}},
	}
	for _, tt := range []struct {
		name     string
		retained bool // uploaded and deleted locally before DeleteRecords
	}{
		{"nothing remote", false},
		{"after local retention", true},
	} {
		for _, loader := range loaders {
			t.Run(tt.name+"/"+loader.name, func(t *testing.T) {
				dir := t.TempDir()
				m, _, tc := tieredManager(t)
				p := openTieredLeader(t, m, tc, dir)
				for range 60 { // offsets [0, 120) in batches of 2
					mustAppend(t, p, batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(2, 100)}))
				}
				if tt.retained {
					m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
					m.clean(p)
				}
				localStart := p.LogStartOffset()
				if tt.retained == (localStart == 0) {
					t.Fatalf("local start %d before DeleteRecords", localStart)
				}
				cut := localStart + 31 // inside a batch of the local log
				// The crash: the manifest's start moved, the local one did not.
				if err := p.Tier().DeleteRecords(context.Background(), cut, p.LeaderEpoch()); err != nil {
					t.Fatal(err)
				}
				p.close()
				p = openTieredPartition(t, m, tc, dir)
				t.Cleanup(func() { p.close() })
				loader.load(m, p)

				check := func(when string) {
					t.Helper()
					for _, ts := range []int64{EarliestTimestamp, EarliestLocalTimestamp} {
						if off, _, _, _, err := p.ListOffset(context.Background(), ts, ReadUncommitted); err != nil || off < cut || ts == EarliestTimestamp && off != cut {
							t.Errorf("%s: ListOffsets(%d) = %d, %v; want %d", when, ts, off, err, cut)
						}
					}
					if res, err := p.Read(localStart, 1<<20, ReadUncommitted); !errors.Is(err, storage.ErrOffsetOutOfRange) {
						h, _ := batch.ParseHeader(fetchedBytes(t, res))
						t.Errorf("%s: fetch at the old local start %d: batch at %d, log start %d, %v; want out of range", when, localStart, h.BaseOffset, res.LogStartOffset, err)
					}
					res, err := p.Read(cut, 1<<20, ReadUncommitted)
					if err != nil {
						t.Fatalf("%s: fetch at %d: %v", when, cut, err)
					}
					if h, _ := batch.ParseHeader(fetchedBytes(t, res)); h.BaseOffset > cut || h.NextOffset() <= cut || res.LogStartOffset != cut {
						t.Errorf("%s: fetch at %d: batch [%d, %d), log start %d", when, cut, h.BaseOffset, h.NextOffset(), res.LogStartOffset)
					}
					if t.Failed() {
						t.FailNow()
					}
				}
				check("after the restart")
				for range 60 {
					mustAppend(t, p, batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(2, 100)}))
				}
				m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
				m.clean(p)
				if st := p.Tier().Stats(); st.RemoteEnd <= cut || p.LogStartOffset() <= cut {
					t.Fatalf("after more appends, an upload and retention: uploaded end %d, local start %d", st.RemoteEnd, p.LogStartOffset())
				}
				check("after an upload and retention")
			})
		}
	}
}

// fetchedBytes returns the bytes of a fetch answer, wherever they were read from.
func fetchedBytes(t *testing.T, res FetchResult) []byte {
	t.Helper()
	if res.Remote != nil {
		return res.Remote
	}
	if res.Chunk.Size == 0 {
		return nil
	}
	b, err := res.Chunk.Bytes()
	res.Chunk.Release()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTieredReplicaDropsDeletedRecords: DeleteRecords on a tiered partition
// moves the manifest's start and the leader's local log start; its followers
// must drop the deleted records too. The old code left a follower holding
// them for good (followLogStart left a tiered partition alone, and the
// leader's answers carried its local start): it served them to consumers
// fetching from it (KIP-392) and, after a failover, as the leader. Now a
// follower moves its local start with its next fetch answer, which carries
// the partition's start, as Kafka's followers do; and a replica moves it up to
// the manifest's when its tier loads the manifest (a follower on its cleaner
// pass, a new leader on its first tiering pass), which also mends a crash
// between DeleteRecords' two steps.
func TestTieredReplicaDropsDeletedRecords(t *testing.T) {
	for _, tt := range []struct {
		name     string
		failover bool // broker 2 leads before its tier loads
		load     func(*Manager, *Partition)
	}{
		{"a follower's next fetch", false, func(*Manager, *Partition) {}},
		{"a follower's cleaner pass", false, func(m *Manager, p *Partition) { m.clean(p) }},
		{"a new leader's tiering pass", true, func(m *Manager, p *Partition) {
			m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store, err := remote.NewFile(vfs.NewMem(), "/objects")
				if err != nil {
					t.Fatal(err)
				}
				c := newTieredMemCluster(t, 2, 1, store)
				if _, err := c.produce(1, 6); err != nil {
					t.Fatal(err)
				}
				if _, err := c.replica(1).DeleteRecords(4); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Second) // a fetch round
				synctest.Wait()
				if tt.failover {
					c.elect(2, 2, 1)
					synctest.Wait()
				}
				p := c.replica(2)
				c.mu.Lock()
				m := c.nodes[2].mgr
				c.mu.Unlock()
				tt.load(m, p)
				if start := p.LogStartOffset(); start != 4 {
					t.Errorf("broker 2's local log starts at %d; records below 4 were deleted", start)
				}
				if res, err := p.ReadReplica(0, 1<<20, ReadUncommitted); !errors.Is(err, storage.ErrOffsetOutOfRange) {
					h, _ := batch.ParseHeader(fetchedBytes(t, res))
					t.Errorf("broker 2 (leader %v) fetching deleted offset 0: batch at %d, log start %d, %v; want out of range", p.IsLeader(), h.BaseOffset, res.LogStartOffset, err)
				}
			})
		})
	}
}

// TestTieredLeaderSendsPartitionStart: a tiered leader's answers to its
// followers carry the partition's log start, remote part included, which is
// below its local start once local retention ran: a follower moves its own
// start only up to it (followLogStart), so it keeps the records the store
// still holds. Before the tier has loaded its manifest the start is not
// known, and the answer carries -1, which moves nothing. The same holds for
// an answer that reads nothing of the partition (FetchLogStart: the fetch's
// byte budget was spent on other partitions), which carried the local start.
func TestTieredLeaderSendsPartitionStart(t *testing.T) {
	p, _, m, _, _ := tieredLeader(t)
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, PartitionEpoch: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for range 60 {
		if _, err := p.Append(batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(2, 100)}), 1); err != nil {
			t.Fatal(err)
		}
	}
	answerStart := func() int64 {
		t.Helper()
		ff, err := p.ReadForFollower(followerFetch(2, p.LogEndOffset(), -1), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ff.Chunk.Release()
		return ff.LogStartOffset
	}
	if p.Tier().Loaded() {
		t.Fatal("the tier loaded before its first tiering pass")
	}
	if start := answerStart(); start != -1 {
		t.Errorf("log start %d in an answer before the tier loaded, want -1", start)
	}
	if start := p.FetchLogStart(true); start != -1 {
		t.Errorf("FetchLogStart to a follower before the tier loaded: %d, want -1", start)
	}
	m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
	m.cleanTiered(p, p.Tier())
	if local := p.LogStartOffset(); local == 0 {
		t.Fatal("local retention deleted nothing after the upload")
	}
	if start := answerStart(); start != 0 {
		t.Errorf("log start %d in an answer after local retention (local start %d), want the partition's, 0", start, p.LogStartOffset())
	}
	// The handler's answer for a partition past the fetch's byte budget.
	for _, follower := range []bool{true, false} {
		if start := p.FetchLogStart(follower); start != 0 {
			t.Errorf("FetchLogStart(follower %v) after local retention: %d, want 0", follower, start)
		}
	}
}

// TestTieredFollowerFetchBelowLocalStart: a follower fetching below a tiered
// leader's local log start but at or above the partition's log start (in the
// remote part) is answered OFFSET_MOVED_TO_TIERED_STORAGE with the high-water
// mark and the partition's log start, as Kafka's ReplicaManager answers it
// (KIP-405): the follower then asks for the leader's local start. Below the
// partition's start or past the log end it is OFFSET_OUT_OF_RANGE. The old
// code answered OFFSET_OUT_OF_RANGE for the remote part too.
func TestTieredFollowerFetchBelowLocalStart(t *testing.T) {
	p, _, m, _, _ := tieredLeader(t)
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, PartitionEpoch: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for range 60 {
		if _, err := p.Append(batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(2, 100)}), 1); err != nil {
			t.Fatal(err)
		}
	}
	m.uploadOnce(context.Background(), p, &tierUploadState{tier: p.Tier(), epoch: -1})
	m.cleanTiered(p, p.Tier())
	local := p.LogStartOffset()
	if local == 0 {
		t.Fatal("local retention deleted nothing after the upload")
	}
	hwm := p.HighWatermark()
	for _, tt := range []struct {
		name   string
		offset int64
		want   error
	}{
		{"the remote start", 0, ErrOffsetMovedToTieredStorage},
		{"just below the local start", local - 1, ErrOffsetMovedToTieredStorage},
		{"the local start", local, nil},
		{"past the log end", p.LogEndOffset() + 1, storage.ErrOffsetOutOfRange},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ff, err := p.ReadForFollower(followerFetch(2, tt.offset, -1), time.Now())
			ff.Chunk.Release()
			if !errors.Is(err, tt.want) && (tt.want != nil || err != nil) {
				t.Fatalf("follower fetch at %d (local start %d): %v, want %v", tt.offset, local, err, tt.want)
			}
			if errors.Is(tt.want, ErrOffsetMovedToTieredStorage) && (ff.LogStartOffset != 0 || ff.HighWatermark != hwm) {
				t.Fatalf("answer carries log start %d and HWM %d, want 0 and %d", ff.LogStartOffset, ff.HighWatermark, hwm)
			}
		})
	}
}

// TestTieredFollowerCatchesUpFromLocalStart: a follower that fell behind a
// tiered leader's local log start (cut off while the leader uploaded and
// deleted locally) starts over at the leader's local start, as Kafka's
// follower does on OFFSET_MOVED_TO_TIERED_STORAGE (TierStateMachine: it asks
// the leader for its earliest-local offset), catches up and rejoins the ISR.
func TestTieredFollowerCatchesUpFromLocalStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := tieredFollowerCutOff(t)
		leader := c.replica(1)
		for range 60 {
			if _, err := leader.Append(batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Records: batchtest.Values(2, 100)}), 1); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		c.mu.Lock()
		m := c.nodes[1].mgr
		c.mu.Unlock()
		m.uploadOnce(context.Background(), leader, &tierUploadState{tier: leader.Tier(), epoch: -1})
		m.cleanTiered(leader, leader.Tier())
		local := leader.LogStartOffset()
		if follower := c.replica(2).LogEndOffset(); local <= follower {
			t.Fatalf("leader's local start %d, not past the follower's log end %d", local, follower)
		}

		c.rejoinAt(t, local)
	})
}

// tieredFollowerCutOff starts two replicas of a tiered topic with small
// segments and local retention (inside a synctest bubble), and cuts follower
// 2 off until it has left the ISR.
func tieredFollowerCutOff(t *testing.T) *memCluster {
	t.Helper()
	store, err := remote.NewFile(vfs.NewMem(), "/objects")
	if err != nil {
		t.Fatal(err)
	}
	configs := map[string]string{"min.insync.replicas": "1", "remote.storage.enable": "true",
		metadata.TopicInternalSegmentBytes: "4096", "local.retention.bytes": "8192"}
	c := newMemClusterWith(t, 2, []int32{1, 2}, configs, store)
	if _, err := c.produce(1, 3); err != nil {
		t.Fatal(err)
	}
	c.isolate(2, true)
	time.Sleep(3 * c.lagMax)
	synctest.Wait()
	if isr := c.partition().ISR; !slices.Equal(isr, []int32{1}) {
		t.Fatalf("ISR %v, want [1]", isr)
	}
	return c
}
