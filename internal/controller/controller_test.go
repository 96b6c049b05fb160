package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/wait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait for cluster state; generous for -race on a
// loaded two-core machine. Waits poll and return as soon as the state holds.
const waitTimeout = 20 * time.Second

func testLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// singleConfig is a one-voter controller on TCP with short timeouts.
func singleConfig(dir string) Config {
	return Config{
		NodeID: 1, DataDir: dir, BindAddr: "127.0.0.1:0",
		HeartbeatTimeout: 150 * time.Millisecond, ElectionTimeout: 150 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		// These tests register brokers that never heartbeat, at addresses
		// nothing listens on: their sessions never expire and a probe never
		// proves them dead, as for live brokers.
		SessionTimeout: time.Hour,
		probe:          func(context.Context, string) error { return nil },
		Logger:         testLogger(), Rand: testRand(7),
	}
}

func start(t *testing.T, cfg Config) *Controller {
	t.Helper()
	c, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func registerAndCreate(t *testing.T, c *Controller, brokers int32, topics ...string) {
	t.Helper()
	for id := int32(1); id <= brokers; id++ {
		if _, err := c.RegisterBroker(ctxT(t), RegisterBroker{ID: id, Host: "127.0.0.1", Port: 9090 + id}); err != nil {
			t.Fatalf("RegisterBroker(%d): %v", id, err)
		}
	}
	var reqs []CreateTopic
	for _, name := range topics {
		reqs = append(reqs, CreateTopic{Name: name, NumPartitions: 3, ReplicationFactor: -1})
	}
	res, err := c.CreateTopics(ctxT(t), reqs, false)
	if err != nil {
		t.Fatalf("CreateTopics: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("CreateTopics %s: %v", r.Name, r.Err)
		}
	}
}

func allocate(t *testing.T, c *Controller, want int64) {
	t.Helper()
	block, err := c.AllocateProducerIDs(ctxT(t), 1, c.Image().Broker(1).Epoch)
	if err != nil {
		t.Fatalf("AllocateProducerIDs: %v", err)
	}
	if block.First != want || block.Len != ProducerIDBlockSize {
		t.Fatalf("producer id block = %+v, want first %d", block, want)
	}
}

// sameState compares two images by their records (everything but the offset).
func sameState(t *testing.T, got, want *metadata.Image) {
	t.Helper()
	if !reflect.DeepEqual(got.Records(), want.Records()) {
		t.Fatalf("images differ:\n got %+v\nwant %+v", got.Records(), want.Records())
	}
}

func TestSingleVoterRestart(t *testing.T) {
	dir := t.TempDir()
	c := start(t, singleConfig(dir))
	if !c.IsLeader() || c.LeaderID() != 1 {
		t.Fatalf("single voter: leader=%v id=%d", c.IsLeader(), c.LeaderID())
	}
	registerAndCreate(t, c, 1, "orders", "logs")
	allocate(t, c, 0)
	allocate(t, c, 1000)
	before := c.Image()
	if before.Topic("orders") == nil || len(before.Topic("orders").Partitions) != 3 {
		t.Fatalf("topic not created: %+v", before.Topic("orders"))
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// Same dir: no second bootstrap (it would fail), state from the log.
	c2 := start(t, singleConfig(dir))
	sameState(t, c2.Image(), before)
	if c2.Image().Offset() < before.Offset() {
		t.Errorf("offset went back: %d < %d", c2.Image().Offset(), before.Offset())
	}
	allocate(t, c2, 2000) // producer id blocks never repeat across restarts
	res, err := c2.CreateTopics(ctxT(t), []CreateTopic{{Name: "orders", NumPartitions: 1, ReplicationFactor: 1}}, false)
	if err != nil || !errors.Is(res[0].Err, metadata.ErrTopicExists) {
		t.Errorf("re-creating after restart = %+v, %v; want TOPIC_ALREADY_EXISTS", res, err)
	}
}

func TestSnapshotRestore(t *testing.T) {
	dir := t.TempDir()
	cfg := singleConfig(dir)
	cfg.TrailingLogs = 1
	c := start(t, cfg)
	registerAndCreate(t, c, 1, "a", "b", "c")
	allocate(t, c, 0)
	if err := c.raft.Snapshot().Error(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	// Changes after the snapshot come from the log on restart.
	if _, err := c.DeleteTopics(ctxT(t), []TopicRef{{Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.IncrementalAlterConfigs(ctxT(t), []IncrementalAlterConfigsResource{{
		Type: metadata.ResourceTopic, Name: "a", Ops: []AlterConfigOp{{Key: "retention.ms", Value: "1234"}},
	}}, false)
	if err != nil || res[0].Err != nil {
		t.Fatalf("IncrementalAlterConfigs = %+v, %v", res, err)
	}
	before := c.Image()
	first, _ := c.store.FirstIndex()
	if first <= 1 {
		t.Fatalf("log not compacted by the snapshot (first index %d): restart would not need it", first)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c2 := start(t, cfg)
	sameState(t, c2.Image(), before)
	if c2.Image().Topic("a").Config.RetentionMs != 1234 || c2.Image().Topic("b") != nil {
		t.Error("post-snapshot changes lost")
	}
	allocate(t, c2, 1000)
}

func TestConcurrentCreateSameTopic(t *testing.T) {
	c := start(t, singleConfig(t.TempDir()))
	registerAndCreate(t, c, 1)
	const n = 8
	var (
		wg              sync.WaitGroup
		mu              sync.Mutex
		created, exists int
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.CreateTopics(context.Background(), []CreateTopic{{Name: "race", NumPartitions: 2, ReplicationFactor: 1}}, false)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("CreateTopics: %v", err)
			case res[0].Err == nil:
				created++
			case errors.Is(res[0].Err, metadata.ErrTopicExists):
				exists++
			default:
				t.Errorf("CreateTopics: %v", res[0].Err)
			}
		}()
	}
	wg.Wait()
	if created != 1 || exists != n-1 {
		t.Errorf("created %d, already-exists %d; want 1 and %d", created, exists, n-1)
	}
}

func TestValidateOnlyAndRejectedBatch(t *testing.T) {
	c := start(t, singleConfig(t.TempDir()))
	registerAndCreate(t, c, 1)
	before := c.Image()
	res, err := c.CreateTopics(ctxT(t), []CreateTopic{{Name: "dry", NumPartitions: 2, ReplicationFactor: 1}}, true)
	if err != nil || res[0].Err != nil || res[0].NumPartitions != 2 {
		t.Fatalf("validate only = %+v, %v", res, err)
	}
	if c.Image().Topic("dry") != nil || c.Image().Offset() != before.Offset() {
		t.Fatal("validate-only created the topic")
	}

	// A batch the state machine rejects reports why, all or nothing.
	err = c.Propose(ctxT(t), []metadata.Record{
		&metadata.TopicRecord{Name: "half", ID: metadata.UUID{1}},
		&metadata.RemoveTopicRecord{TopicID: metadata.UUID{2}},
	})
	if !errors.Is(err, metadata.ErrUnknownTopicID) {
		t.Fatalf("Propose = %v, want ErrUnknownTopicID", err)
	}
	if c.Image().Topic("half") != nil {
		t.Fatal("half of a rejected batch was applied")
	}
	if err := c.Propose(ctxT(t), []metadata.Record{&metadata.TopicRecord{Name: "whole", ID: metadata.UUID{1}}}); err != nil {
		t.Fatal(err)
	}
	if c.Image().Topic("whole") == nil {
		t.Fatal("accepted batch not visible after Propose returned")
	}
}

func TestWatch(t *testing.T) {
	c := start(t, singleConfig(t.TempDir()))
	images, cancel := c.Watch()
	if img := <-images; img == nil {
		t.Fatal("no initial image")
	}
	other, _ := c.Watch() // never read: must not block the apply loop
	registerAndCreate(t, c, 1, "w1", "w2")
	deadline := time.After(waitTimeout)
	for seen := false; !seen; {
		select {
		case img := <-images:
			seen = img.Topic("w1") != nil && img.Topic("w2") != nil
		case <-deadline:
			t.Fatal("watcher never saw the topics")
		}
	}
	if img := <-other; img.Topic("w2") == nil {
		t.Error("the unread watcher does not hold the newest image")
	}
	cancel()
	cancel()
	if _, ok := <-images; ok {
		t.Error("channel open after cancel")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-other; ok {
		t.Error("channel open after Close")
	}
	if ch, _ := c.Watch(); ch != nil {
		if _, ok := <-ch; ok {
			t.Error("Watch after Close returned an open channel")
		}
	}
	if err := c.Propose(ctxT(t), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Propose after Close = %v, want ErrClosed", err)
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		c := singleConfig("/tmp/x")
		c.setDefaults()
		return c
	}
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"negative node", func(c *Config) { c.NodeID = -1 }},
		{"no dir", func(c *Config) { c.DataDir = "" }},
		{"no address", func(c *Config) { c.BindAddr = "" }},
		{"lease above heartbeat", func(c *Config) { c.LeaderLeaseTimeout = 2 * c.HeartbeatTimeout }},
		{"self not a voter", func(c *Config) { c.Voters = []Peer{{ID: 2, Addr: "a:1"}} }},
		{"repeated voter", func(c *Config) { c.Voters = []Peer{{ID: 1, Addr: "a:1"}, {ID: 1, Addr: "b:1"}} }},
		{"bad default partitions", func(c *Config) { c.DefaultPartitions = -3 }},
		{"negative session timeout", func(c *Config) { c.SessionTimeout = -time.Second }},
		{"negative rebalance interval", func(c *Config) { c.LeaderImbalanceCheckInterval = -time.Second }},
	}
	good := base()
	if err := good.Validate(); err != nil {
		t.Fatalf("base config: %v", err)
	}
	for _, tt := range tests {
		c := base()
		tt.mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", tt.name, c)
		}
	}
}

// cluster is three voters on in-memory transports.
type cluster struct {
	t      *testing.T
	dirs   []string
	addrs  []raft.ServerAddress
	trans  []*raft.InmemTransport
	nodes  []*Controller
	voters []Peer
	// configure adjusts every node's config.
	configure func(*Config)
}

// newCluster starts n voters; configure (optional) adjusts their config.
func newCluster(t *testing.T, n int, configure ...func(*Config)) *cluster {
	cl := &cluster{t: t, configure: func(*Config) {}}
	if len(configure) > 0 {
		cl.configure = configure[0]
	}
	for i := range n {
		addr, tr := raft.NewInmemTransport("")
		cl.dirs = append(cl.dirs, t.TempDir())
		cl.addrs = append(cl.addrs, addr)
		cl.trans = append(cl.trans, tr)
		cl.voters = append(cl.voters, Peer{ID: int32(i + 1), Addr: string(addr)})
	}
	cl.connectAll()
	cl.nodes = make([]*Controller, n)
	for i := range n {
		cl.startNode(i)
	}
	return cl
}

func (cl *cluster) connectAll() {
	for i, a := range cl.trans {
		for j, b := range cl.trans {
			if i != j && a != nil && b != nil {
				a.Connect(cl.addrs[j], b)
			}
		}
	}
}

func (cl *cluster) startNode(i int) {
	cfg := Config{
		NodeID: int32(i + 1), DataDir: cl.dirs[i], Voters: cl.voters, Transport: cl.trans[i],
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, CommitTimeout: 10 * time.Millisecond,
		SessionTimeout: time.Hour, TrailingLogs: 1, Logger: testLogger(), Rand: testRand(byte(i)),
	}
	cl.configure(&cfg)
	c, err := Start(cfg)
	if err != nil {
		cl.t.Fatalf("Start node %d: %v", i+1, err)
	}
	cl.nodes[i] = c
	cl.t.Cleanup(func() { _ = c.Close() })
}

// kill closes node i and cuts it off, as a crash would.
func (cl *cluster) kill(i int) {
	if err := cl.nodes[i].Close(); err != nil {
		cl.t.Fatalf("Close node %d: %v", i+1, err)
	}
	cl.cutOff(i)
	cl.nodes[i], cl.trans[i] = nil, nil
}

// restart brings node i back on its data dir with a fresh transport.
func (cl *cluster) restart(i int) {
	_, cl.trans[i] = raft.NewInmemTransport(cl.addrs[i])
	cl.connectAll()
	cl.startNode(i)
}

// leader waits until exactly one live node leads and returns its index.
func (cl *cluster) leader() int {
	var idx int
	wait.For(cl.t, "a single leader", func() bool {
		idx = -1
		for i, c := range cl.nodes {
			if c != nil && c.IsLeader() {
				if idx >= 0 {
					return false
				}
				idx = i
			}
		}
		return idx >= 0
	})
	if err := cl.nodes[idx].WaitReady(ctxT(cl.t)); err != nil {
		cl.t.Fatalf("WaitReady on leader: %v", err)
	}
	return idx
}

// retry runs op until it does not fail with ErrNotController, re-finding the
// leader: on a loaded machine a spurious election can always happen.
func (cl *cluster) retry(op func(c *Controller) error) {
	cl.t.Helper()
	if err := cl.call(op); err != nil {
		cl.t.Fatal(err)
	}
}

// call is retry for an op whose error the test checks.
func (cl *cluster) call(op func(c *Controller) error) error {
	deadline := time.Now().Add(waitTimeout)
	for {
		err := op(cl.nodes[cl.leader()])
		if !errors.Is(err, ErrNotController) || time.Now().After(deadline) {
			return err
		}
	}
}

func TestThreeVoters(t *testing.T) {
	cl := newCluster(t, 3)
	l := cl.leader()
	for i, c := range cl.nodes {
		if err := c.WaitReady(ctxT(t)); err != nil {
			t.Fatalf("WaitReady node %d: %v", i+1, err)
		}
	}

	// Followers refuse, naming the leader.
	for i, c := range cl.nodes {
		if i == l || c.IsLeader() {
			continue
		}
		_, err := c.CreateTopics(ctxT(t), []CreateTopic{{Name: "x", NumPartitions: 1, ReplicationFactor: 1}}, false)
		if !errors.Is(err, ErrNotController) || metadata.ErrorCode(err) != 41 {
			t.Errorf("CreateTopics on follower %d = %v, want NOT_CONTROLLER", i+1, err)
		}
		if got := c.LeaderID(); got != int32(l+1) {
			t.Errorf("follower %d says the leader is %d, want %d", i+1, got, l+1)
		}
	}

	var topics []string
	for i := range 5 {
		topics = append(topics, fmt.Sprint("t", i))
	}
	epochs := make(map[int32]int64)
	cl.retry(func(c *Controller) error {
		for id := int32(1); id <= 3; id++ {
			epoch, err := c.RegisterBroker(ctxT(t), RegisterBroker{ID: id, Host: "127.0.0.1", Port: 9090 + id})
			if err != nil {
				return err
			}
			epochs[id] = epoch
		}
		return nil
	})
	for _, name := range topics {
		cl.retry(func(c *Controller) error {
			_, err := c.CreateTopics(ctxT(t), []CreateTopic{{Name: name, NumPartitions: 2, ReplicationFactor: 3}}, false)
			return err
		})
	}
	var block ProducerIDBlock
	cl.retry(func(c *Controller) (err error) {
		block, err = c.AllocateProducerIDs(ctxT(t), 1, epochs[1])
		return err
	})

	// Every acknowledged change is applied on the leader; all nodes converge.
	l = cl.leader()
	applied := cl.nodes[l].Image()
	for _, name := range topics {
		if applied.Topic(name) == nil {
			t.Fatalf("leader lacks acknowledged topic %s", name)
		}
	}
	for i, c := range cl.nodes {
		wait.For(t, fmt.Sprint("node ", i+1, " to catch up"), func() bool { return c.Image().Offset() >= applied.Offset() })
	}

	// Kill the leader: another is elected and nothing applied is lost.
	cl.kill(l)
	l2 := cl.leader()
	if l2 == l {
		t.Fatal("dead node still leads")
	}
	sameState(t, cl.nodes[l2].Image(), applied)

	// The new leader carries on: new topics, the next producer id block.
	cl.retry(func(c *Controller) error {
		_, err := c.CreateTopics(ctxT(t), []CreateTopic{{Name: "after", NumPartitions: 1, ReplicationFactor: 2}}, false)
		return err
	})
	var block2 ProducerIDBlock
	cl.retry(func(c *Controller) (err error) {
		block2, err = c.AllocateProducerIDs(ctxT(t), 2, epochs[2])
		return err
	})
	if block2.First != block.First+ProducerIDBlockSize {
		t.Errorf("block after failover = %+v, before = %+v", block2, block)
	}

	// Compact the logs of both live nodes (either may lead by the time it
	// returns) past what the dead node has, then bring it back: it catches up
	// from a snapshot sent over the transport.
	final := cl.nodes[cl.leader()].Image()
	for i, c := range cl.nodes {
		if c == nil {
			continue
		}
		wait.For(t, fmt.Sprint("node ", i+1, " to apply everything"), func() bool { return c.Image().Offset() >= final.Offset() })
		if err := c.raft.Snapshot().Error(); err != nil {
			t.Fatalf("Snapshot on node %d: %v", i+1, err)
		}
	}
	cl.restart(l)
	wait.For(t, "the restarted node to catch up", func() bool {
		img := cl.nodes[l].Image()
		return img.Offset() >= final.Offset() && img.Topic("after") != nil
	})
	sameState(t, cl.nodes[l].Image(), final)
	// Raft records the installed snapshot just after restoring the image.
	wait.For(t, "the restarted node to record an installed snapshot (log catch-up would miss the point)", func() bool {
		return cl.nodes[l].raft.Stats()["last_snapshot_index"] != "0"
	})
}
