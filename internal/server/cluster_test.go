package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/freeport"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// freeAddr returns a loopback address free now, outside the ephemeral range.
func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// testCluster is an in-process cluster of nodes, each a voter and a broker.
type testCluster struct {
	t     *testing.T
	cfgs  []config.Config
	nodes []*Node
}

// startCluster starts size nodes; opts adjust node i's config (index from 0).
func startCluster(t *testing.T, size int, opts ...func(i int, cfg *config.Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, nodes: make([]*Node, size)}
	var voters []string
	for i := 0; i < size; i++ {
		cfg := nodeConfig(t.TempDir())
		cfg.NodeID = int32(i + 1)
		cfg.ControllerAddr = freeAddr(t)
		cfg.KafkaAddr = freeAddr(t)
		cfg.ClusterID = "strata-test-cluster"
		cfg.BrokerHeartbeatInterval = 100 * time.Millisecond
		cfg.BrokerSessionTimeout = 2 * time.Second
		cfg.ReplicaLagTimeMax = 2 * time.Second
		cfg.ShutdownTimeout = 10 * time.Second
		voters = append(voters, fmt.Sprintf("%d@%s", cfg.NodeID, cfg.ControllerAddr))
		c.cfgs = append(c.cfgs, cfg)
	}
	for i := range c.cfgs {
		c.cfgs[i].Controllers = strings.Join(voters, ",")
		for _, o := range opts {
			o(i, &c.cfgs[i])
		}
	}
	// Nodes wait for a quorum while starting: start them together.
	errs := make(chan error, size)
	for i := range c.cfgs {
		go func() { errs <- c.start(i) }()
	}
	for range size {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	return c
}

func (c *testCluster) start(i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := Start(ctx, c.cfgs[i], testLogger().With("node", i+1), vfs.Default)
	if err != nil {
		return fmt.Errorf("node %d: %w", i+1, err)
	}
	c.nodes[i] = n
	return nil
}

func (c *testCluster) stop(i int) {
	if c.nodes[i] != nil {
		c.nodes[i].Close()
		c.nodes[i] = nil
	}
}

func (c *testCluster) seeds() []string {
	var s []string
	for _, n := range c.nodes {
		if n != nil {
			s = append(s, n.KafkaAddr())
		}
	}
	return s
}

func (c *testCluster) client(opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// leaderOf returns the index of the node leading topic-partition.
func (c *testCluster) leaderOf(adm *kadm.Client, topic string, partition int32) int {
	c.t.Helper()
	var leader int = -1
	wait.For(c.t, "a leader", func() bool {
		md, err := adm.Metadata(context.Background(), topic)
		if err != nil {
			return false
		}
		p, ok := md.Topics[topic].Partitions[partition]
		if !ok || p.Leader < 0 || c.nodes[p.Leader-1] == nil {
			return false
		}
		leader = int(p.Leader - 1)
		return true
	})
	return leader
}

// TestClusterReplicatesAndAgrees: a topic with three replicas takes acks=all
// writes, every replica ends with the same bytes, and the HWM reaches the end on
// all of them.
func TestClusterReplicatesAndAgrees(t *testing.T) {
	c := startCluster(t, 3)
	ctx := context.Background()
	cl, adm := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("rep"))
	minISR := "2"
	if _, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": &minISR}, "rep"); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := 0; i < 300; i++ {
		rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprint(i % 17)), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consumeAll(t, strings.Join(c.seeds(), ","), "rep", len(rs))
	if len(got) != len(rs) {
		t.Fatalf("read %d, want %d", len(got), len(rs))
	}
	for p := int32(0); p < 3; p++ {
		c.checkAgreement(t, "rep", p)
	}
}

// checkAgreement waits until every replica of topic-partition holds byte-for-byte
// the same log as the others, and the leader's HWM is at its end.
func (c *testCluster) checkAgreement(t *testing.T, topic string, partition int32) {
	t.Helper()
	wait.Eventually(t, 20*time.Second, fmt.Sprintf("the replicas of %s-%d to agree", topic, partition), func() error {
		if detail := c.disagreement(topic, partition); detail != "" {
			return errors.New(detail)
		}
		return nil
	})
}

// disagreement describes how the live replicas differ, or returns "". The
// replicas are those the first live node's metadata image names.
func (c *testCluster) disagreement(topic string, partition int32) string {
	var want []byte
	var wantEnd int64 = -1
	var replicas []int32
	for _, n := range c.nodes {
		if n == nil || replicas != nil {
			continue
		}
		mp := n.ctrl.Image().Partition(topic, partition)
		if mp == nil {
			return fmt.Sprintf("node %d does not know %s-%d", n.cfg.NodeID, topic, partition)
		}
		replicas = mp.Replicas
	}
	for _, n := range c.nodes {
		if n == nil || !slices.Contains(replicas, n.cfg.NodeID) {
			continue
		}
		p, err := n.replicas.Partition(topic, partition)
		if err != nil {
			return fmt.Sprintf("node %d: %v", n.cfg.NodeID, err)
		}
		end := p.LogEndOffset()
		chunk, err := p.Log().Read(p.LogStartOffset(), 64<<20, end)
		if err != nil {
			return fmt.Sprintf("node %d: %v", n.cfg.NodeID, err)
		}
		b, err := chunk.Bytes()
		chunk.Release()
		if err != nil {
			return fmt.Sprintf("node %d: %v", n.cfg.NodeID, err)
		}
		if p.IsLeader() && p.HighWatermark() != end {
			return fmt.Sprintf("leader node %d: HWM %d, log end %d", n.cfg.NodeID, p.HighWatermark(), end)
		}
		if wantEnd < 0 {
			want, wantEnd = b, end
			continue
		}
		if end != wantEnd || !bytes.Equal(b, want) {
			return fmt.Sprintf("node %d ends at %d with %d bytes, another at %d with %d bytes", n.cfg.NodeID, end, len(b), wantEnd, len(want))
		}
	}
	return ""
}

// crash stops node i abruptly (no controlled shutdown).
func (c *testCluster) crash(i int) {
	if c.nodes[i] != nil {
		c.nodes[i].close(false)
		c.nodes[i] = nil
	}
}

// ackedLog records what a producer had acknowledged.
type ackedLog struct {
	mu    sync.Mutex
	acked map[string][]string // key -> values in ack order
	n     int
}

func (a *ackedLog) add(k, v string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.acked == nil {
		a.acked = map[string][]string{}
	}
	a.acked[k] = append(a.acked[k], v)
	a.n++
}

func (a *ackedLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// verify checks that every acknowledged value was read, exactly once, in the
// acknowledged order per key.
func (a *ackedLog) verify(t *testing.T, read []*kgo.Record) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	got := map[string][]string{}
	seen := map[string]bool{}
	for _, r := range read {
		v := string(r.Value)
		if seen[v] {
			t.Fatalf("duplicate: value %s read twice", v)
		}
		seen[v] = true
		got[string(r.Key)] = append(got[string(r.Key)], v)
	}
	for k, want := range a.acked {
		// Values that were not acknowledged (a timed-out attempt that did land)
		// may appear between acknowledged ones; acknowledged ones keep their order.
		i := 0
		for _, v := range got[k] {
			if i < len(want) && v == want[i] {
				i++
			}
		}
		if i != len(want) {
			t.Fatalf("key %s: acknowledged %d values, found %d of them in order (lost or reordered)", k, len(want), i)
		}
	}
}

// TestClusterLeaderFailover: the leader of a partition crashes while an idempotent
// producer writes with acks=all and min.insync.replicas=2. A follower takes over,
// nothing acknowledged is lost or reordered, and the old leader rejoins as a
// follower with a log identical to the new leader's.
func TestClusterLeaderFailover(t *testing.T) {
	c := startCluster(t, 3)
	ctx := context.Background()
	_, adm := c.client()
	minISR := "2"
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": &minISR}, "fo"); err != nil {
		t.Fatal(err)
	}
	cl, _ := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("fo"),
		kgo.RecordRetries(1000), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	var acks ackedLog
	stop := make(chan struct{})
	produced := make(chan error, 1)
	var lastAck atomic.Int64
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				produced <- nil
				return
			default:
			}
			k, v := fmt.Sprint(i%5), fmt.Sprint(i)
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := cl.ProduceSync(pctx, &kgo.Record{Key: []byte(k), Value: []byte(v)}).FirstErr()
			cancel()
			if err != nil {
				produced <- fmt.Errorf("produce %s: %w", v, err)
				return
			}
			acks.add(k, v)
			lastAck.Store(time.Now().UnixNano())
		}
	}()
	wait.For(t, "some acknowledged writes", func() bool { return acks.count() >= 50 })
	leader := c.leaderOf(adm, "fo", 0)
	crashed := time.Now()
	c.crash(leader)
	wait.For(t, "writes acknowledged by a new leader", func() bool { return lastAck.Load() > crashed.UnixNano() })
	t.Logf("failover: first acknowledged write %v after the leader crashed", time.Duration(lastAck.Load()-crashed.UnixNano()))
	before := acks.count()
	wait.For(t, "more writes after failover", func() bool { return acks.count() >= before+50 })
	if err := c.start(leader); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "more writes after the old leader returned", func() bool { return acks.count() >= before+100 })
	close(stop)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	acks.verify(t, consumeAll(t, strings.Join(c.seeds(), ","), "fo", acks.count()))
	c.checkAgreement(t, "fo", 0)

	// The old leader is back in the ISR: a preferred-replica election returns
	// leadership to the first replica.
	_, adm2 := c.client()
	wait.For(t, "the preferred replica to lead again", func() bool {
		md, err := adm2.Metadata(ctx, "fo")
		if err != nil {
			return false
		}
		p := md.Topics["fo"].Partitions[0]
		if len(p.ISR) != 3 {
			return false
		}
		if p.Leader == p.Replicas[0] {
			return true
		}
		adm2.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"fo": {0: {}}})
		return false
	})
}

// TestClusterGroupCoordinatorFailover: committed offsets live in the replicated
// __consumer_offsets topic; when the coordinator's broker crashes, the new leader
// of the group's partition reloads them and answers for the group.
func TestClusterGroupCoordinatorFailover(t *testing.T) {
	c := startCluster(t, 3)
	ctx := context.Background()
	_, adm := c.client()
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "gt"); err != nil {
		t.Fatal(err)
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "gt", Partition: 0, At: 11})
	offsets.Add(kadm.Offset{Topic: "gt", Partition: 2, At: 7})
	// Metadata reaches the other brokers a moment after CreateTopics answers.
	wait.For(t, "a commit", func() bool {
		resp, err := adm.CommitOffsets(ctx, "failover-group", offsets)
		return err == nil && resp.Ok()
	})
	fc := adm.FindGroupCoordinators(ctx, "failover-group")
	if err := fc.Error(); err != nil {
		t.Fatal(err)
	}
	coordinator := int(fc["failover-group"].NodeID - 1)
	c.crash(coordinator)
	wait.For(t, "offsets from the new coordinator", func() bool {
		// A fresh client each time: kgo keeps a group's coordinator cached across
		// dial errors, and the crashed node was it.
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		got, err := kadm.NewClient(cl).FetchOffsets(ctx, "failover-group")
		if err != nil || !got.Ok() {
			return false
		}
		o0, _ := got.Lookup("gt", 0)
		o2, _ := got.Lookup("gt", 2)
		return o0.At == 11 && o2.At == 7
	})
}
