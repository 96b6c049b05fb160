package offsets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

var offsetsID = metadata.UUID{7}

// newTestStore hosts partitions 0 (led here) and 1 (led by broker 2) of
// __consumer_offsets on broker 1, with max.message.bytes of 200.
func newTestStore(t *testing.T, coord Coordinator) (*Store, *replica.Manager) {
	t.Helper()
	return newTestStoreWith(t, coord, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// newTestStoreWith is newTestStore's, logging to logger, with extra metadata
// records applied.
func newTestStoreWith(t *testing.T, coord Coordinator, logger *slog.Logger, extra ...metadata.Record) (*Store, *replica.Manager) {
	t.Helper()
	var s *Store
	m, err := replica.NewManager(vfs.NewMem(), "/logs", 1, logger, replica.Options{
		OnLeadership: func(p *replica.Partition, leader bool) { s.LeadershipChanged(p, leader) },
	})
	if err != nil {
		t.Fatal(err)
	}
	s = New(m, logger)
	if coord != nil {
		s.SetCoordinator(coord)
	}
	if err := m.Apply(testImage(t, extra...).WithOffset(1)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		m.Close()
	})
	return s, m
}

// testImage is the metadata of newTestStore's partitions, and extra.
func testImage(t *testing.T, extra ...metadata.Record) *metadata.Image {
	t.Helper()
	img, err := metadata.ApplyAll(metadata.NewImage(), append([]metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.RegisterBrokerRecord{BrokerID: 2, Epoch: 1, Host: "127.0.0.1", Port: 9093},
		&metadata.TopicRecord{Name: group.OffsetsTopic, ID: offsetsID, Configs: map[string]string{"max.message.bytes": "200"}},
		&metadata.PartitionRecord{TopicID: offsetsID, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		&metadata.PartitionRecord{TopicID: offsetsID, Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2},
	}, extra...))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestAppendErrors: the error paths of Append, as the group coordinator sees
// them: a partition not hosted or led elsewhere is NOT_COORDINATOR (the client
// finds the new coordinator), records over max.message.bytes are
// group.ErrRecordTooLarge, a cancelled wait is the context's error.
func TestAppendErrors(t *testing.T) {
	s, _ := newTestStore(t, nil)
	ctx := context.Background()
	small := []group.Record{{Key: []byte("k"), Value: []byte("v")}}
	if _, err := s.Append(ctx, 0, 0, small); err != nil {
		t.Fatalf("append to the led partition: %v", err)
	}
	for _, tc := range []struct {
		name      string
		partition int32
		records   []group.Record
		want      error
	}{
		{"not hosted", 5, small, group.ErrNotCoordinator},
		{"led by another broker", 1, small, group.ErrNotCoordinator},
		{"too large", 0, []group.Record{{Key: []byte("k"), Value: make([]byte, 300)}}, group.ErrRecordTooLarge},
	} {
		if _, err := s.Append(ctx, tc.partition, 0, tc.records); !errors.Is(err, tc.want) {
			t.Errorf("%s: Append = %v, want %v", tc.name, err, tc.want)
		}
		if _, err := s.AppendTxn(ctx, tc.partition, 0, 9, 0, tc.records); !errors.Is(err, tc.want) {
			t.Errorf("%s: AppendTxn = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestAppendFencedByLeaderEpoch: a coordinator's write carries the leader
// epoch it loaded the partition at. Once this broker leads the partition at a
// newer epoch (a reassignment bumps it with the leader unchanged, and the
// coordinator loads the partition again), every append of the older epoch is
// refused with group.ErrNotCoordinator, so none lands after the new load read
// the log; the new epoch's are written.
func TestAppendFencedByLeaderEpoch(t *testing.T) {
	loads := &epochCoordinator{}
	s, m := newTestStore(t, loads)
	ctx := context.Background()
	small := []group.Record{{Key: []byte("k"), Value: []byte("v")}}
	bumped, err := metadata.ApplyAll(testImage(t), []metadata.Record{
		&metadata.PartitionChangeRecord{TopicID: offsetsID, Partition: 0, Leader: 1, LeaderEpoch: 1, ISR: []int32{1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(bumped.WithOffset(2)); err != nil {
		t.Fatal(err)
	}
	// The load at epoch 0 may be cancelled by the bump before it starts.
	wait.For(t, "partition 0 loaded at leader epoch 1", func() bool {
		e := loads.epochsOf(0)
		return len(e) > 0 && e[len(e)-1] == 1
	})
	appends := map[string]func(epoch int32) error{
		"Append":        func(epoch int32) error { _, err := s.Append(ctx, 0, epoch, small); return err },
		"AppendUnacked": func(epoch int32) error { return s.AppendUnacked(ctx, 0, epoch, small) },
		"AppendTxn":     func(epoch int32) error { _, err := s.AppendTxn(ctx, 0, epoch, 9, 0, small); return err },
	}
	for name, appendAt := range appends {
		if err := appendAt(0); !errors.Is(err, group.ErrNotCoordinator) {
			t.Errorf("%s at the previous leader epoch: %v, want group.ErrNotCoordinator", name, err)
		}
		if err := appendAt(1); err != nil {
			t.Errorf("%s at the leader epoch: %v", name, err)
		}
	}
}

// epochCoordinator records the leader epochs each partition is loaded at.
type epochCoordinator struct {
	mu     sync.Mutex
	epochs map[int32][]int32
}

func (c *epochCoordinator) LoadPartitionAt(_ context.Context, p, epoch int32, records iter.Seq2[group.Record, error]) error {
	for range records {
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epochs == nil {
		c.epochs = map[int32][]int32{}
	}
	c.epochs[p] = append(c.epochs[p], epoch)
	return nil
}

func (c *epochCoordinator) UnloadPartition(int32) {}

func (c *epochCoordinator) epochsOf(p int32) []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.epochs[p])
}

// TestAppendStorageError: a log that failed (KAFKA_STORAGE_ERROR) is
// NOT_COORDINATOR to the group coordinator, as Kafka 4.4's answers a storage
// error of __consumer_offsets: the client finds the coordinator again.
func TestAppendStorageError(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var failing atomic.Bool
	fs := vfs.NewErrorFS(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op) error {
		if failing.Load() && op.Kind&(vfs.OpWrite|vfs.OpSync) != 0 {
			return errors.New("disk failed")
		}
		return nil
	}))
	var s *Store
	m, err := replica.NewManager(fs, "/logs", 1, logger, replica.Options{
		OnLeadership: func(p *replica.Partition, leader bool) { s.LeadershipChanged(p, leader) },
	})
	if err != nil {
		t.Fatal(err)
	}
	s = New(m, logger)
	t.Cleanup(func() {
		s.Close()
		m.Close()
	})
	if err := m.Apply(testImage(t).WithOffset(1)); err != nil {
		t.Fatal(err)
	}
	small := []group.Record{{Key: []byte("k"), Value: []byte("v")}}
	failing.Store(true)
	if _, err := s.Append(context.Background(), 0, 0, small); !errors.Is(err, group.ErrNotCoordinator) {
		t.Errorf("Append to a failed log = %v, want %v", err, group.ErrNotCoordinator)
	}
}

// blockingCoordinator's LoadPartitionAt waits for its context and records
// what it saw.
type blockingCoordinator struct {
	mu       sync.Mutex
	loading  chan int32
	canceled []int32
	unloaded []int32
}

func (b *blockingCoordinator) LoadPartitionAt(ctx context.Context, p, _ int32, records iter.Seq2[group.Record, error]) error {
	for _, err := range records {
		if err != nil {
			return err
		}
	}
	b.loading <- p
	<-ctx.Done()
	b.mu.Lock()
	b.canceled = append(b.canceled, p)
	b.mu.Unlock()
	return ctx.Err()
}

func (b *blockingCoordinator) UnloadPartition(p int32) {
	b.mu.Lock()
	b.unloaded = append(b.unloaded, p)
	b.mu.Unlock()
}

// TestCloseWaitsForLoads: Close cancels a partition load under way and
// returns only once its goroutine has; leadership changes after Close load
// nothing. Before Close existed the loader ran on, unowned, past the node's
// shutdown.
func TestCloseWaitsForLoads(t *testing.T) {
	coord := &blockingCoordinator{loading: make(chan int32, 4)}
	s, m := newTestStore(t, coord)
	select {
	case p := <-coord.loading:
		if p != 0 {
			t.Fatalf("loading partition %d, want 0", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the led partition was never loaded")
	}
	s.Close()
	coord.mu.Lock()
	canceled := coord.canceled
	coord.mu.Unlock()
	if len(canceled) != 1 || canceled[0] != 0 {
		t.Fatalf("Close returned with the load not cancelled and returned (cancelled: %v)", canceled)
	}
	p, err := m.Partition(group.OffsetsTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.LeadershipChanged(p, true)
	s.LeadershipChanged(p, false)
	select {
	case p := <-coord.loading:
		t.Fatalf("partition %d loaded after Close", p)
	default:
	}
}

// TestLeadershipOfOtherTopicsIgnored: the store of __consumer_offsets loads
// and unloads nothing for another topic's partitions.
func TestLeadershipOfOtherTopicsIgnored(t *testing.T) {
	coord := &blockingCoordinator{loading: make(chan int32, 4)}
	_, m := newTestStore(t, coord)
	<-coord.loading // partition 0 of the store's own topic
	other := NewForTopic("__transaction_state", m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	other.SetCoordinator(coord)
	p, _ := m.Partition(group.OffsetsTopic, 0)
	other.LeadershipChanged(p, false)
	other.LeadershipChanged(p, true)
	other.Close()
	coord.mu.Lock()
	defer coord.mu.Unlock()
	if len(coord.unloaded) != 1 { // the unload before partition 0's load, by s
		t.Fatalf("unloads %v: another topic's store acted on __consumer_offsets", coord.unloaded)
	}
}

// TestReplayYieldsLogOrder: a partition's replay yields every record in log
// order, as Kafka's coordinator loader replays them: those of transactional
// batches marked with their producer id, and each transaction's marker, a
// commit or an abort, where the log holds it.
func TestReplayYieldsLogOrder(t *testing.T) {
	s, m := newTestStore(t, nil)
	ctx := context.Background()
	rec := func(v string) []group.Record { return []group.Record{{Key: []byte("k"), Value: []byte(v)}} }
	for _, step := range []func() error{
		func() error { _, err := s.Append(ctx, 0, 0, rec("a")); return err },
		func() error { _, err := s.AppendTxn(ctx, 0, 0, 1, 0, rec("t1a")); return err },
		func() error { _, err := s.AppendTxn(ctx, 0, 0, 2, 0, rec("t2")); return err },
		func() error { _, err := s.Append(ctx, 0, 0, rec("b")); return err },
		func() error { _, err := s.AppendTxn(ctx, 0, 0, 1, 0, rec("t1b")); return err },
		func() error { return marker(m, 1, true) },
		func() error { return marker(m, 2, false) },
		func() error { _, err := s.AppendTxn(ctx, 0, 0, 3, 0, rec("t3")); return err },
		func() error { _, err := s.Append(ctx, 0, 0, rec("c")); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	p, err := m.Partition(group.OffsetsTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	last := int64(-1)
	for r, err := range records(p) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Offset <= last {
			t.Fatalf("offset %d after %d", r.Offset, last)
		}
		last = r.Offset
		s := string(r.Value)
		switch {
		case r.Marker && r.Commit:
			s = fmt.Sprintf("commit %d", r.ProducerID)
		case r.Marker:
			s = fmt.Sprintf("abort %d", r.ProducerID)
		case r.Txn:
			s += fmt.Sprintf(" (producer %d)", r.ProducerID)
		}
		got = append(got, s)
	}
	want := []string{"a", "t1a (producer 1)", "t2 (producer 2)", "b", "t1b (producer 1)", "commit 1", "abort 2", "t3 (producer 3)", "c"}
	if !slices.Equal(got, want) {
		t.Fatalf("replayed %q, want %q", got, want)
	}
}

// marker writes producer pid's commit or abort marker to partition 0 and
// waits until the high-water mark covers it.
func marker(m *replica.Manager, pid int64, commit bool) error {
	p, err := m.Partition(group.OffsetsTopic, 0)
	if err != nil {
		return err
	}
	res, err := p.WriteTxnMarker(batch.Marker{ProducerID: pid, Commit: commit, Timestamp: time.Now().UnixMilli()}, 0)
	if err != nil {
		return err
	}
	return p.WaitHighWatermark(context.Background(), res.LastOffset+1, 10*time.Second)
}

// TestAppendWaitErrors: Append waits for the high-water mark; the wait ends
// with NOT_COORDINATOR when the partition's leadership moves away meanwhile
// (the group's new coordinator is elsewhere), and with the context's error
// when the request is cancelled. AppendUnacked does not wait, and fails as
// Append does before it.
func TestAppendWaitErrors(t *testing.T) {
	s, m := newTestStore(t, nil)
	// Partition 2 is led here with broker 2 in its ISR, which never fetches:
	// the high-water mark stays behind what Append writes.
	base := testImage(t, &metadata.PartitionRecord{TopicID: offsetsID, Partition: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	if err := m.Apply(base.WithOffset(2)); err != nil {
		t.Fatal(err)
	}
	small := []group.Record{{Key: []byte("k"), Value: []byte("v")}}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := s.Append(ctx, 2, 0, small); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append cancelled while waiting: %v, want context.Canceled", err)
	}

	if err := s.AppendUnacked(context.Background(), 2, 0, small); err != nil {
		t.Fatalf("AppendUnacked on the led partition: %v (it must not wait for the high-water mark)", err)
	}
	for _, tc := range []struct {
		name      string
		partition int32
		records   []group.Record
		want      error
	}{
		{"not hosted", 5, small, group.ErrNotCoordinator},
		{"led by another broker", 1, small, group.ErrNotCoordinator},
		{"too large", 2, []group.Record{{Key: []byte("k"), Value: make([]byte, 300)}}, group.ErrRecordTooLarge},
	} {
		if err := s.AppendUnacked(context.Background(), tc.partition, 0, tc.records); !errors.Is(err, tc.want) {
			t.Errorf("AppendUnacked %s: %v, want %v", tc.name, err, tc.want)
		}
	}

	// Leadership moves to broker 2 while Append waits.
	moved, err := metadata.ApplyAll(base, []metadata.Record{
		&metadata.PartitionChangeRecord{TopicID: offsetsID, Partition: 2, Leader: 2, LeaderEpoch: 1, ISR: []int32{2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Partition(group.OffsetsTopic, 2)
	if err != nil {
		t.Fatal(err)
	}
	// Read before the append starts: read after, it may already count the
	// append (the goroutine can run first), and the wait below never ends.
	before := p.LogEndOffset()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := s.Append(ctx, 2, 0, small)
		done <- err
	}()
	wait.For(t, "the append in the log", func() bool { return p.LogEndOffset() > before })
	if err := m.Apply(moved.WithOffset(3)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, group.ErrNotCoordinator) {
		t.Fatalf("Append whose leadership moved while waiting: %v, want group.ErrNotCoordinator", err)
	}
}

// warnTimes is a slog handler that keeps the times of the records with one
// message.
type warnTimes struct {
	msg   string
	mu    sync.Mutex
	times []time.Time
}

func (w *warnTimes) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnTimes) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *warnTimes) WithGroup(string) slog.Handler            { return w }
func (w *warnTimes) Handle(_ context.Context, r slog.Record) error {
	if r.Message == w.msg {
		w.mu.Lock()
		w.times = append(w.times, r.Time)
		w.mu.Unlock()
	}
	return nil
}

func (w *warnTimes) seen() []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.times)
}

// TestLoadWaitsBetweenRetries: a led partition with fewer in-sync replicas
// than min.insync.replicas (partition 2: two replicas, one in sync) fails the
// load's wait for the high-water mark at once; the load asks again only after
// a pause. It used to ask again at once: a share-state partition on a node of
// the in-process chaos run logged 13,250 warnings in a second, spinning on a
// core.
func TestLoadWaitsBetweenRetries(t *testing.T) {
	warns := &warnTimes{msg: "waiting to load group partition"}
	newTestStoreWith(t, &blockingCoordinator{loading: make(chan int32, 4)}, slog.New(warns),
		&metadata.PartitionRecord{TopicID: offsetsID, Partition: 2, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1},
		&metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: group.OffsetsTopic, Key: "min.insync.replicas", Value: "2"})
	wait.For(t, "three failed waits of the load", func() bool { return len(warns.seen()) >= 3 })
	times := warns.seen()
	for i := 1; i < 3; i++ {
		if gap := times[i].Sub(times[i-1]); gap < loadBackoff/2 {
			t.Errorf("retry %d came %v after the one before, want a pause of about %v", i, gap, loadBackoff)
		}
	}
}

// gatedUnloadCoordinator holds its first UnloadPartition until release is
// closed, and keeps which partitions are loaded; a load whose context ended
// loads nothing, as the coordinators' loads do.
type gatedUnloadCoordinator struct {
	entered, release chan struct{}
	unloads          atomic.Int32
	mu               sync.Mutex
	loaded           map[int32]bool
	loads            int // loads that loaded
	calls            int // LoadPartitionAt calls returned
}

func (g *gatedUnloadCoordinator) LoadPartitionAt(ctx context.Context, p, _ int32, _ iter.Seq2[group.Record, error]) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	if ctx.Err() != nil {
		return ctx.Err()
	}
	g.loaded[p] = true
	g.loads++
	return nil
}

func (g *gatedUnloadCoordinator) UnloadPartition(p int32) {
	if g.unloads.Add(1) == 1 {
		close(g.entered)
		<-g.release
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.loaded[p] = false
}

// TestReloadWaitsForTheCancelledLoad: a leadership change while the previous
// load of the partition is past its wait (here, in its unload of the
// coordinator's old state) starts the next load only once that one has
// returned. The two used to run at once, and the cancelled one's unload could
// land in the middle of the new one's load: the partition stayed unloaded,
// every request for its groups NOT_COORDINATOR until the next leadership
// change (FuzzTransactions found it after a node restart, which changes
// leadership twice in quick succession).
func TestReloadWaitsForTheCancelledLoad(t *testing.T) {
	coord := &gatedUnloadCoordinator{entered: make(chan struct{}), release: make(chan struct{}), loaded: map[int32]bool{}}
	s, m := newTestStore(t, coord)
	<-coord.entered // partition 0's first load, in its unload
	p, err := m.Partition(group.OffsetsTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.LeadershipChanged(p, true)
	// Room for a next load running beside the first to load the partition
	// before the first one's unload lands (none should).
	wait.Until(time.Now().Add(200*time.Millisecond), func() bool {
		coord.mu.Lock()
		defer coord.mu.Unlock()
		return coord.loads > 0
	})
	close(coord.release)
	wait.For(t, "both loads to return", func() bool {
		coord.mu.Lock()
		defer coord.mu.Unlock()
		return coord.calls == 2
	})
	coord.mu.Lock()
	defer coord.mu.Unlock()
	if !coord.loaded[0] {
		t.Fatalf("partition 0 is not loaded after its leadership changes (%d loads)", coord.loads)
	}
}
