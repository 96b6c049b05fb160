package replica

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
)

// memCluster runs the replication of real Managers inside one test: every
// broker's partition logs live on an in-memory disk (vfs.MemFS behind an
// ErrorFS whose fsyncs the test can fail), follower fetches go through an
// in-memory Transport that serves them from the leader's Manager, and ISR
// changes through an in-memory controller: a metadata image, the controller's
// own PlanAlterPartitions, and every new image applied to every broker at once.
// Run it inside synctest.Test: time is fake and synctest.Wait lets every
// fetcher, flusher and proposal run until the cluster is quiet.
type memCluster struct {
	t      *testing.T
	lagMax time.Duration

	mu    sync.Mutex // guards img, nodes, cut, lose, hold and held; held while images are applied
	img   *metadata.Image
	nodes map[int32]*memNode
	cut   map[int32]bool // brokers cut off from every other broker
	// lose maps a broker to the fetch offset from which the answers to its
	// fetches are lost: the leader serves them (and records the follower's
	// progress), the follower hears nothing.
	lose map[int32]int64
	// hold, while not nil, keeps every AlterPartition waiting until it is
	// closed (proposals in flight); held counts those that arrived.
	hold chan struct{}
	held int
	// isrErr, while not nil, is every AlterPartition's answer: the request
	// reached no controller that could apply it (isrRefusals counts them).
	isrErr      error
	isrRefusals int
	// isrRequests counts the AlterPartition requests the controller answered.
	isrRequests int
	// isrChanges holds every ISR change the controller was sent.
	isrChanges []ISRChange
	// stale holds the brokers cut off from the controller's metadata: new
	// images reach them only once they are back (setStale false).
	stale map[int32]bool
	// remote is every broker's remote storage (nil: none).
	remote remote.Store
	// down holds the brokers in controlled shutdown, as the active
	// controller remembers them (controlledShutdown).
	down controller.ShuttingDown
}

type memNode struct {
	id    int32
	mem   *vfs.MemFS
	fsync *vfs.Rule // fails fsyncs once enabled
	mgr   *Manager
	stop  context.CancelFunc
	done  chan struct{} // the ISR maintenance returned
	// epoch is the broker epoch its fetches carry (1 unless a test changes it).
	epoch atomic.Int64
}

const memTopic = "t"

var memTopicID = metadata.UUID{1}

// newMemCluster starts brokers 1..n and creates topic memTopic with one
// partition on every broker, led by broker 1, all in sync.
func newMemCluster(t *testing.T, n int, minISR int) *memCluster {
	var all []int32
	for id := int32(1); id <= int32(n); id++ {
		all = append(all, id)
	}
	return newMemClusterOn(t, n, all, minISR)
}

// newMemClusterOn starts brokers 1..n and creates topic memTopic with one
// partition on replicas, led by the first, all in sync.
func newMemClusterOn(t *testing.T, n int, replicas []int32, minISR int) *memCluster {
	return newMemClusterWith(t, n, replicas, map[string]string{"min.insync.replicas": strconv.Itoa(minISR)}, nil)
}

// newTieredMemCluster is newMemCluster with memTopic tiered: every broker
// uses store as its remote storage.
func newTieredMemCluster(t *testing.T, n int, minISR int, store remote.Store) *memCluster {
	var all []int32
	for id := int32(1); id <= int32(n); id++ {
		all = append(all, id)
	}
	configs := map[string]string{"min.insync.replicas": strconv.Itoa(minISR), "remote.storage.enable": "true"}
	return newMemClusterWith(t, n, all, configs, store)
}

// newMemClusterWith starts brokers 1..n, with store as their remote storage
// (nil: none), and creates topic memTopic with configs and one partition on
// replicas, led by the first, all in sync.
func newMemClusterWith(t *testing.T, n int, replicas []int32, configs map[string]string, store remote.Store) *memCluster {
	c := &memCluster{t: t, lagMax: 10 * time.Second, img: metadata.NewImage(), nodes: map[int32]*memNode{}, cut: map[int32]bool{}, lose: map[int32]int64{}, stale: map[int32]bool{}, remote: store}
	var recs []metadata.Record
	for id := int32(1); id <= int32(n); id++ {
		recs = append(recs, &metadata.RegisterBrokerRecord{BrokerID: id, Epoch: 1, Host: "127.0.0.1", Port: 9092})
	}
	recs = append(recs,
		&metadata.TopicRecord{Name: memTopic, ID: memTopicID, Configs: configs},
		&metadata.PartitionRecord{TopicID: memTopicID, Partition: 0, Replicas: replicas, ISR: replicas, Leader: replicas[0]})
	c.applyRecords(recs...)
	for id := int32(1); id <= int32(n); id++ {
		c.start(id, vfs.NewMem())
	}
	t.Cleanup(c.close)
	return c
}

// start runs broker id on mem, registered at broker epoch 1.
func (c *memCluster) start(id int32, mem *vfs.MemFS) { c.startAt(id, mem, 1) }

// startAt runs broker id on mem with broker epoch epoch (0: a process that
// has not registered yet).
func (c *memCluster) startAt(id int32, mem *vfs.MemFS, epoch int64) {
	nd := &memNode{id: id, mem: mem, fsync: vfs.FailOn(vfs.OpSync)}
	nd.fsync.Disable()
	nd.epoch.Store(epoch)
	// MEMCLUSTER_LOG=1 shows every broker's log, to follow a failing sequence.
	var w io.Writer = io.Discard
	if os.Getenv("MEMCLUSTER_LOG") != "" {
		w = os.Stderr
	}
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", id)
	m, err := NewManager(vfs.NewErrorFS(mem, nd.fsync), "/data/logs", id, logger, Options{
		Transport:     memTransport{c: c, from: id},
		ISRChanger:    memController{c: c, from: id},
		BrokerEpoch:   nd.epoch.Load,
		ReplicaLagMax: c.lagMax,
		Remote:        c.remote,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	nd.mgr = m
	ctx, cancel := context.WithCancel(context.Background())
	nd.stop, nd.done = cancel, make(chan struct{})
	go func() {
		defer close(nd.done)
		m.RunISRMaintenance(ctx)
	}()
	c.mu.Lock()
	c.nodes[id] = nd
	img := c.img
	c.mu.Unlock()
	if err := m.Apply(img); err != nil {
		c.t.Fatal(err)
	}
}

// stopNode closes broker id's Manager and forgets it.
func (c *memCluster) stopNode(id int32) *memNode {
	c.mu.Lock()
	nd := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	nd.stop()
	<-nd.done
	nd.mgr.Close()
	return nd
}

func (c *memCluster) close() {
	c.mu.Lock()
	var ids []int32
	for id := range c.nodes {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.stopNode(id)
	}
}

// applyRecords commits records and applies the new image to every broker.
func (c *memCluster) applyRecords(recs ...metadata.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.applyLocked(recs); err != nil {
		c.t.Fatal(err)
	}
}

func (c *memCluster) applyLocked(recs []metadata.Record) error {
	img, err := metadata.ApplyAll(c.img, recs)
	if err != nil {
		return err
	}
	c.img = img.WithOffset(c.img.Offset() + 1)
	for id, nd := range c.nodes {
		if !c.stale[id] {
			nd.mgr.Apply(c.img) // a closed Manager refuses: it is being stopped
		}
	}
	return nil
}

// setStale cuts broker id off from the controller's metadata (stale true) or
// brings it back, applying the newest image.
func (c *memCluster) setStale(id int32, stale bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stale[id] = stale
	if nd := c.nodes[id]; nd != nil && !stale {
		nd.mgr.Apply(c.img)
	}
}

// partition is the partition as the controller has it.
func (c *memCluster) partition() *metadata.Partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.img.Partition(memTopic, 0)
}

// reassign moves the partition to target as the controller's
// PlanAlterReassignments does (it completes once the ISR holds target).
func (c *memCluster) reassign(target ...int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, errs := controller.PlanAlterReassignments(c.img, []controller.Reassignment{{Topic: memTopic, Partition: 0, Replicas: target}}, nil)
	for _, err := range errs {
		if err != nil {
			c.t.Fatal(err)
		}
	}
	if err := c.applyLocked(recs); err != nil {
		c.t.Fatal(err)
	}
}

// elect makes leader lead at the next leader epoch with isr.
func (c *memCluster) elect(leader int32, isr ...int32) {
	p := c.partition()
	c.applyRecords(&metadata.PartitionChangeRecord{TopicID: memTopicID, Partition: 0, BasePartitionEpoch: p.PartitionEpoch,
		Leader: leader, LeaderEpoch: p.LeaderEpoch + 1, ISR: isr})
}

// replica is broker id's replica of the partition.
func (c *memCluster) replica(id int32) *Partition {
	c.mu.Lock()
	nd := c.nodes[id]
	c.mu.Unlock()
	p, err := nd.mgr.Partition(memTopic, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

// holdISR keeps the ISR changes proposed from now on in flight until release
// is called; held reports how many arrived.
func (c *memCluster) holdISR() (held func() int, release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hold := make(chan struct{})
	c.hold, c.held = hold, 0
	held = func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.held
	}
	release = func() {
		c.mu.Lock()
		c.hold = nil
		c.mu.Unlock()
		close(hold)
	}
	return held, release
}

// controlledShutdown has broker id ask the controller for a controlled
// shutdown in heartbeat after heartbeat, as a stopping broker does, each
// planned by the controller's PlanBrokerHeartbeat and its records applied,
// until the controller has nothing more to do but tell it to stop: the broker
// has not applied the last change yet. It still runs.
func (c *memCluster) controlledShutdown(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down == nil {
		c.down = controller.ShuttingDown{}
	}
	c.down[id] = true
	b := c.img.Broker(id)
	for range 10 {
		req := controller.HeartbeatRequest{BrokerID: id, BrokerEpoch: b.Epoch, WantShutdown: true}
		st := controller.HeartbeatState{ShuttingDown: c.down, ShutdownOffset: int64(c.img.Offset())}
		recs, res, err := controller.PlanBrokerHeartbeat(c.img, req, st)
		if err != nil || res.ShouldShutdown {
			c.t.Fatalf("controlled shutdown of %d: %+v, %v", id, res, err)
		}
		if len(recs) == 0 {
			return
		}
		if err := c.applyLocked(recs); err != nil {
			c.t.Fatal(err)
		}
	}
	c.t.Fatalf("controlled shutdown of %d: the hand-off does not end", id)
}

// isolate cuts broker id off from the other brokers (not from the controller,
// which here is the test itself) or heals it.
func (c *memCluster) isolate(id int32, cut bool) {
	c.mu.Lock()
	c.cut[id] = cut
	c.mu.Unlock()
}

// loseAnswers makes the answers to broker id's fetches at or past offset
// from get lost on their way back (from < 0: none are lost any more). The
// leader still serves them: what it learns of the follower's progress counts.
func (c *memCluster) loseAnswers(id int32, from int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if from < 0 {
		delete(c.lose, id)
		return
	}
	c.lose[id] = from
}

// produce appends n one-record batches to the leader with acks=all and
// returns the offsets acknowledged; it stops at the first refusal.
func (c *memCluster) produce(leader int32, n int) (acked []int64, err error) {
	p := c.replica(leader)
	for range n {
		res, err := p.Append(batchtest.Build(batchtest.Options{}), -1)
		if err != nil {
			return acked, err
		}
		if err := p.WaitHighWatermark(context.Background(), res.LastOffset+1, 5*time.Second); err != nil {
			return acked, err
		}
		acked = append(acked, res.BaseOffset)
	}
	return acked, nil
}

// memController is one broker's ISRChanger: each AlterPartition request
// planned by the controller's PlanAlterPartitions against the cluster's image
// and applied as one change of the image, as the controller proposes it.
type memController struct {
	c    *memCluster
	from int32
}

func (mc memController) AlterPartitions(_ context.Context, changes []ISRChange) ([]ISRResult, error) {
	c := mc.c
	c.mu.Lock()
	if hold := c.hold; hold != nil {
		c.held++
		c.mu.Unlock()
		<-hold
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	if c.cut[mc.from] || c.stale[mc.from] {
		return nil, errors.New("memcluster: controller unreachable")
	}
	var epoch int64
	if nd := c.nodes[mc.from]; nd != nil {
		epoch = nd.epoch.Load()
	}
	if c.isrErr != nil {
		c.isrRefusals++
		return nil, c.isrErr
	}
	c.isrRequests++
	c.isrChanges = append(c.isrChanges, changes...)
	reqs := make([]controller.AlterPartitionRequest, len(changes))
	for i, ch := range changes {
		reqs[i] = controller.AlterPartitionRequest{
			BrokerID: mc.from, BrokerEpoch: epoch, TopicID: ch.TopicID, Partition: ch.Partition,
			LeaderEpoch: ch.LeaderEpoch, PartitionEpoch: ch.PartitionEpoch, NewISR: ch.ISR, NewISRBrokerEpochs: ch.BrokerEpochs,
		}
	}
	recs, planned, err := controller.PlanAlterPartitions(c.img, reqs, c.down)
	if err != nil {
		return nil, err
	}
	if len(recs) > 0 {
		if err := c.applyLocked(recs); err != nil {
			return nil, err
		}
	}
	results := make([]ISRResult, len(planned))
	for i, r := range planned {
		results[i] = ISRResult{Partition: r.Partition, Err: r.Err}
	}
	return results, nil
}

// memTransport is one broker's Transport: it serves replica fetches from the
// leader's Manager as the Fetch handler does (ReadForFollower per partition, a
// long poll on appends while nothing is readable).
type memTransport struct {
	c    *memCluster
	from int32
}

// memRoundTrip is how long a replica fetch's round trip takes (fake time).
const memRoundTrip = time.Millisecond

func (tr memTransport) Fetch(ctx context.Context, leader int32, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	c := tr.c
	c.mu.Lock()
	nd := c.nodes[leader]
	cut := c.cut[tr.from] || c.cut[leader]
	loseFrom, lose := c.lose[tr.from]
	c.mu.Unlock()
	if cut || nd == nil {
		return nil, errors.New("memcluster: leader unreachable")
	}
	// A round trip takes memRoundTrip: a fetcher that never waits (one
	// answered with the same divergence forever, say) still lets time pass.
	time.Sleep(memRoundTrip)
	if lose && fetchesFrom(req, loseFrom) {
		serveReplicaFetch(nd.mgr, req)
		return nil, errors.New("memcluster: fetch answer lost")
	}
	w := NewWatcher()
	var watched []*Partition
	defer func() {
		for _, p := range watched {
			p.UnwatchAppends(w)
		}
	}()
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if p, err := nd.mgr.Partition(rt.Topic, rp.Partition); err == nil {
				p.WatchAppends(w)
				watched = append(watched, p)
			}
		}
	}
	resp, ready := serveReplicaFetch(nd.mgr, req)
	if ready {
		return resp, nil
	}
	select {
	case <-w.C:
	case <-time.After(time.Duration(req.MaxWaitMillis) * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	resp, _ = serveReplicaFetch(nd.mgr, req)
	return resp, nil
}

// ListOffsets answers a follower's lookups from the leader's Manager as the
// ListOffsets handler does.
func (tr memTransport) ListOffsets(ctx context.Context, leader int32, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error) {
	c := tr.c
	c.mu.Lock()
	nd := c.nodes[leader]
	cut := c.cut[tr.from] || c.cut[leader]
	c.mu.Unlock()
	if cut || nd == nil {
		return nil, errors.New("memcluster: leader unreachable")
	}
	time.Sleep(memRoundTrip)
	resp := kmsg.NewPtrListOffsetsResponse()
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition, sp.Offset, sp.Timestamp = rp.Partition, -1, -1
			p, err := nd.mgr.Partition(rt.Topic, rp.Partition)
			if err == nil {
				err = p.CheckLeaderEpoch(rp.CurrentLeaderEpoch)
			}
			if err == nil {
				var found bool
				sp.Offset, sp.Timestamp, sp.LeaderEpoch, found, err = p.ListOffset(ctx, rp.Timestamp, ReadUncommitted)
				if !found {
					sp.Offset, sp.Timestamp = -1, -1
				}
			}
			if err != nil {
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// fetchesFrom reports whether req fetches any partition at or past offset.
func fetchesFrom(req *kmsg.FetchRequest, offset int64) bool {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if rp.FetchOffset >= offset {
				return true
			}
		}
	}
	return false
}

// serveReplicaFetch answers a replica fetch from m; ready reports whether the
// answer carries anything (records, a divergence or an error).
func serveReplicaFetch(m *Manager, req *kmsg.FetchRequest) (resp *kmsg.FetchResponse, ready bool) {
	resp = kmsg.NewPtrFetchResponse()
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			p, err := m.Partition(rt.Topic, rp.Partition)
			switch {
			case err != nil:
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			case rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < p.LeaderEpoch():
				sp.ErrorCode = kerr.FencedLeaderEpoch.Code
			case rp.CurrentLeaderEpoch > p.LeaderEpoch():
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			default:
				ff, err := p.ReadForFollower(FollowerFetchRequest{
					ReplicaID: req.ReplicaID, BrokerEpoch: req.ReplicaState.Epoch, LeaderEpoch: rp.CurrentLeaderEpoch,
					FetchOffset: rp.FetchOffset, LogStartOffset: rp.LogStartOffset, LastFetchedEpoch: rp.LastFetchedEpoch, MaxBytes: int(rp.PartitionMaxBytes),
				}, time.Now())
				sp.HighWatermark, sp.LogStartOffset = ff.HighWatermark, ff.LogStartOffset
				switch {
				case errors.Is(err, storage.ErrOffsetOutOfRange):
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
				case errors.Is(err, ErrOffsetMovedToTieredStorage):
					sp.ErrorCode = kerr.OffsetMovedToTieredStorage.Code
				case errors.Is(err, ErrNotLeader), errors.Is(err, ErrNotReplica):
					sp.ErrorCode = kerr.NotLeaderForPartition.Code
				case err != nil:
					sp.ErrorCode = kerr.KafkaStorageError.Code
				case ff.Diverging != nil:
					sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = ff.Diverging.Epoch, ff.Diverging.EndOffset
					ready = true
				case ff.Chunk.Size > 0:
					b, err := ff.Chunk.Bytes()
					ff.Chunk.Release()
					if err != nil {
						sp.ErrorCode = kerr.KafkaStorageError.Code
					}
					sp.RecordBatches = b
					ready = true
				}
			}
			if sp.ErrorCode != 0 {
				ready = true
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, ready
}

// checkAgreement fails the test unless every in-sync replica holds the same
// batches below the leader's high-water mark.
func (c *memCluster) checkAgreement() {
	c.t.Helper()
	ip := c.partition()
	leader := c.replica(ip.Leader)
	hwm := leader.HighWatermark()
	want := logBytes(c.t, leader.log, hwm)
	for _, id := range ip.ISR {
		if got := logBytes(c.t, c.replica(id).log, hwm); !slices.Equal(got, want) {
			c.t.Fatalf("in-sync replica %d differs from leader %d below the HWM %d", id, ip.Leader, hwm)
		}
	}
}

// logBytes reads a log's bytes from its start up to end.
func logBytes(t *testing.T, l *storage.Log, end int64) []byte {
	t.Helper()
	var out []byte
	for off := l.LogStartOffset(); off < end; {
		ch, err := l.Read(off, 1<<20, end)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Size == 0 {
			break
		}
		b, err := ch.Bytes()
		ch.Release()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
		off = ch.NextOffset
	}
	return out
}
