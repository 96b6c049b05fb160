package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/chaos/netfault"
	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/internal/vfs"
)

// processCluster is a testcluster whose every network link runs through a
// clusterNet proxy. The harness's own queries (testcluster.Partition,
// ActiveController) go to the nodes' real addresses and see through a cut.
//
// With a spare, it also runs one broker-only node, behind proxies as the
// others are (the operations of OpKinds move replicas to it, retire it and
// promote it to a controller voter; network faults may cut it off).
type processCluster struct {
	t     *testing.T
	tc    *testcluster.Cluster
	cn    *clusterNet
	topic string
	cl    *kgo.Client  // through the proxies, for the operations and the coordinator's role
	adm   *kadm.Client // over cl
	n     int          // the nodes started as controller voters: 1..n

	sec        *security         // nil: a plaintext cluster
	spare      *testcluster.Node // the broker-only node, if any
	spareVoter bool              // whether it is a controller voter now
	bin        string            // the strata binary itself, for its CLI (testcluster runs the wrapper)
}

// processOptions are a process cluster's extras.
type processOptions struct {
	// spare adds a broker-only node, for the operations.
	spare bool
	// tiered gives every node a file:// remote storage in a shared directory,
	// uploading every 100ms, for tiered topics.
	tiered bool
	// sec secures every listener (nil: plaintext).
	sec *security
}

// startProcessCluster starts nodes strata processes behind proxies.
func startProcessCluster(t *testing.T, nodes int, topic string, opts processOptions) *processCluster {
	t.Helper()
	bin := testcluster.Binary(t) // the real binary, built once per test process
	wrap, err := newNodeWrapper(t.TempDir(), bin)
	if err != nil {
		t.Fatal(err)
	}
	upstream := func(flag string) func(int32) netfault.Upstream {
		return func(id int32) netfault.Upstream {
			return func() (string, error) { return wrap.arg(id, flag) }
		}
	}
	all := nodes
	if opts.spare {
		all++
	}
	// Started before testcluster.Start, so their cleanup runs after the nodes die.
	c := &processCluster{t: t, topic: topic, n: nodes, bin: bin, sec: opts.sec,
		cn: newClusterNet(t, all, nodes, opts.sec != nil, sourceHost, upstream("--kafka-addr"), upstream("--controller-addr"))}
	for id := int32(1); id <= int32(all); id++ {
		if err := wrap.setFlags(id, c.cn.flags(id)...); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(testcluster.BinaryEnv, wrap.script)
	flags := []string{
		"--group-initial-rebalance-delay", "100ms",
		"--offsets-topic-partitions", "4",
		"--transaction-state-partitions", "4",
		"--share-state-partitions", "4",
	}
	if opts.tiered {
		flags = append(flags,
			"--remote-storage", "file://"+t.TempDir(),
			"--remote-upload-interval", "100ms",
			"--log-cleanup-interval", "200ms",
		)
	}
	tcOpts := []testcluster.Option{testcluster.WithFlags(flags...)}
	if opts.sec != nil {
		tcOpts = []testcluster.Option{testcluster.WithFlags(append(flags, opts.sec.flags()...)...),
			testcluster.WithClientSecurity(opts.sec.client, opts.sec.sasl(adminUser))}
	}
	c.tc = testcluster.Start(t, nodes, tcOpts...)
	if opts.spare {
		c.spare = c.tc.AddBroker()
	}
	keepLogsOnFailure(t, c.logs()) // registered after Start: runs before its temp dirs go
	// An operation's request may be in flight on the connection of the node
	// a fault kills: franz-go does not retry an end of stream on a
	// connection's first request (it suspects TLS or SASL settings, which
	// are known right here), as Kafka's admin client would, on another broker.
	if c.cl, err = kgo.NewClient(append(clientOpts(c.seeds(), "chaos-operator"), kgo.AlwaysRetryEOF())...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.cl.Close)
	c.adm = kadm.NewClient(c.cl)
	return c
}

// brokers is how many brokers the cluster has when every node is up.
func (c *processCluster) brokers() int {
	if c.spare != nil {
		return c.n + 1
	}
	return c.n
}

func (c *processCluster) logs() []string {
	var logs []string
	for _, n := range c.tc.Nodes() {
		logs = append(logs, n.LogPath)
	}
	return logs
}

func (c *processCluster) seeds() brokers { return c.sec.harness(c.cn.seeds()) }

func (c *processCluster) workloadSeeds() brokers { return c.sec.workload(c.cn.seeds()) }

func (c *processCluster) httpAddrs() []string {
	var out []string
	for _, n := range c.tc.Nodes() {
		out = append(out, n.HTTPAddr)
	}
	return out
}

func (c *processCluster) warmedUp() {
	c.t.Helper()
	if err := waitFor(30*time.Second, c.cn.checkSourcesSeen); err != nil {
		c.t.Fatal(err)
	}
}

// resolve picks the node a fault hits and says why.
func (c *processCluster) resolve(f Fault) (*testcluster.Node, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes := c.tc.Nodes()
	switch f.Role {
	case Leader, Follower:
		st, err := c.tc.Partition(ctx, c.topic, f.Partition)
		if err != nil {
			return nil, "", err
		}
		if f.Role == Leader {
			if st.Leader < 1 {
				return nil, "", fmt.Errorf("partition %d has no leader: %v", f.Partition, st)
			}
			return c.tc.Node(st.Leader), fmt.Sprintf("leader of partition %d", f.Partition), nil
		}
		followers := slices.DeleteFunc(slices.Clone(st.Replicas), func(id int32) bool { return id == st.Leader })
		if len(followers) == 0 {
			return nil, "", fmt.Errorf("partition %d has no follower: %v", f.Partition, st)
		}
		return c.tc.Node(followers[f.Pick%len(followers)]), fmt.Sprintf("follower of partition %d", f.Partition), nil
	case Coordinator:
		id, err := txnCoordinator(c.adm)
		if err != nil {
			return nil, "", err
		}
		return c.tc.Node(id), "transaction coordinator", nil
	case ShareCoordinator, ShareState:
		id, why, err := shareRoleNode(c.adm, c.topic, f)
		if err != nil {
			return nil, "", err
		}
		return c.tc.Node(id), why, nil
	case Controller:
		id, _, err := c.tc.ActiveController(ctx)
		if err != nil || id < 1 {
			return nil, "", fmt.Errorf("no active controller (%d): %v", id, err)
		}
		return c.tc.Node(id), "active controller", nil
	default:
		return nodes[f.Pick%len(nodes)], "picked", nil
	}
}

func (c *processCluster) inject(f Fault, healthy func(time.Duration) error) (string, error) {
	if f.Kind == RollingRestart {
		nodes := c.tc.Nodes()
		var order []string
		for i := range nodes {
			n := nodes[(f.Pick+i)%len(nodes)]
			n.Stop() // SIGTERM; fails the test unless it exits 0 in time
			n.Restart()
			if err := healthy(healthyTimeout); err != nil {
				return "", fmt.Errorf("rolling restart, after node %d: %w", n.ID, err)
			}
			order = append(order, strconv.Itoa(int(n.ID)))
		}
		return "rolling restart of nodes " + strings.Join(order, ","), nil
	}
	if slices.Contains(OpKinds, f.Kind) {
		return c.operate(f)
	}
	if f.Kind == DataCut {
		return c.cutData(f)
	}
	n, why, err := c.resolve(f)
	if err != nil {
		return "", err
	}
	what := fmt.Sprintf("%s node %d (%s) for %v", f.Kind, n.ID, why, f.Hold.Round(time.Millisecond))
	switch f.Kind {
	case Kill:
		n.Kill()
		time.Sleep(f.Hold) // the fault's length
		n.Restart()
	case Pause:
		n.Pause()
		time.Sleep(f.Hold)
		n.Resume()
	case Partition, PartitionPeers:
		if f.Kind == Partition {
			c.cn.net.Isolate(name(n.ID))
		} else {
			c.cn.net.Isolate(name(n.ID), clientSource)
		}
		time.Sleep(f.Hold)
		c.cn.net.Heal(f.Reset)
		if f.Reset {
			what += ", stalled connections reset"
		} else {
			what += ", stalled connections resumed"
		}
	default:
		return "", fmt.Errorf("a process cluster cannot inject %s", f.Kind)
	}
	return what, nil
}

// dataCutTimeout bounds the waits of a data cut: for the leader to drop the
// cut-off follower from the ISR (the test clusters' replica lag limit is 2s),
// and for the follower to rejoin it after the heal.
const dataCutTimeout = 30 * time.Second

// cutData cuts the Kafka connections between a follower of f's partition and
// the partition's leader, both ways (its fetches stall, and so do the
// leader's fetches from it for partitions it leads), and nothing else: both
// keep their Raft and controller links and stay registered and unfenced. The
// cut is held for f.Hold and, if the leader has not dropped the follower from
// the ISR by then, until it does; then it heals and the follower must join
// the ISR again. Either not happening within dataCutTimeout is an error: a
// follower that stopped fetching must stop holding back the high-water mark,
// and one that fetches again must count again.
func (c *processCluster) cutData(f Fault) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*dataCutTimeout+f.Hold)
	defer cancel()
	n, _, err := c.resolve(f)
	if err != nil {
		return "", err
	}
	st, err := c.tc.Partition(ctx, c.topic, f.Partition)
	if err != nil {
		return "", err
	}
	leader, follower := st.Leader, n.ID
	if leader < 1 || leader == follower {
		return "", fmt.Errorf("partition %d: follower %d and leader %d: %v", f.Partition, follower, leader, st)
	}
	isrWith := func(in bool) func() error {
		return func() error {
			st, err := c.tc.Partition(ctx, c.topic, f.Partition)
			if err != nil {
				return err
			}
			if slices.Contains(st.ISR, follower) != in {
				return fmt.Errorf("partition %d: %v", f.Partition, st)
			}
			return nil
		}
	}
	c.cn.net.CutKafka(name(follower), name(leader))
	cut := time.Now()
	time.Sleep(f.Hold) // the fault's length
	err = waitFor(dataCutTimeout, isrWith(false))
	if err == nil {
		// The follower kept its controller link: it is still a live broker.
		var md kadm.Metadata
		if md, err = c.adm.BrokerMetadata(ctx); err == nil && !slices.Contains(md.Brokers.NodeIDs(), follower) {
			err = fmt.Errorf("node %d is not among the live brokers %v during a cut of its data link only", follower, md.Brokers.NodeIDs())
		}
	}
	c.cn.net.Heal(f.Reset)
	held := time.Since(cut)
	if err != nil {
		return "", fmt.Errorf("data link between follower %d and leader %d of partition %d cut: %w", follower, leader, f.Partition, err)
	}
	healed := time.Now()
	if err := waitFor(dataCutTimeout, isrWith(true)); err != nil {
		return "", fmt.Errorf("follower %d of partition %d not back in the ISR after its data link healed: %w", follower, f.Partition, err)
	}
	what := fmt.Sprintf("data link between follower %d and leader %d of partition %d cut for %v (Raft and controller links up, the follower a live broker throughout): out of the ISR by then, back in it %.1fs after the heal",
		follower, leader, f.Partition, held.Round(time.Millisecond), time.Since(healed).Seconds())
	if f.Reset {
		return what + ", stalled connections reset", nil
	}
	return what + ", stalled connections resumed", nil
}

func (c *processCluster) heal() {
	c.cn.net.Heal(true)
	for _, n := range c.tc.Nodes() {
		switch {
		case n.Paused():
			n.Resume()
		case !n.Running():
			n.Restart()
		}
	}
}

// stopAll kills every node: their files keep everything written (the page
// cache survives a kill -9), so the logs read back are what each node held.
func (c *processCluster) stopAll() {
	for _, n := range c.tc.Nodes() {
		if n.Running() {
			n.Kill()
		}
	}
}

func (c *processCluster) replica(node int32, topic string, partition int32, end int64) (replicaLog, error) {
	src := filepath.Join(c.tc.Node(node).DataDir, "logs", topic+"-"+strconv.Itoa(int(partition)))
	dst := filepath.Join(c.t.TempDir(), "replica")
	if err := copyDir(src, dst); err != nil {
		return replicaLog{}, err
	}
	return readReplica(vfs.Default, dst, end)
}
