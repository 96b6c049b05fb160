package chaos

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/chaos/netfault"
	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/internal/vfs"
)

// processCluster is a testcluster whose every network link runs through a
// netfault proxy:
//
//	traffic                            goes to                          source told by
//	---------------------------------  -------------------------------  --------------------
//	clients, follower fetches          node's Kafka proxy (advertised   client id of the first
//	                                   with --advertised-kafka-addr)    request: strata-replica-<id>
//	Raft and the controller link,      the proxy of link A->B (node A's  the proxy: one per link
//	node A to node B                   --controllers names it for B)
//
// so isolating a node stops everything it sends and everything sent to it. The
// harness's own queries (testcluster.Partition, ActiveController) go to the
// nodes' real addresses and see through the cut.
type processCluster struct {
	t       *testing.T
	tc      *testcluster.Cluster
	net     *netfault.Net
	proxies []*netfault.Proxy
	kafka   []*netfault.Proxy // by node id - 1
	wrap    *nodeWrapper
	topic   string
}

// clientSource is the endpoint name of every connection that is not a node's.
const clientSource = "client"

// replicaClientPrefix is the client id prefix of a broker's follower fetcher
// (internal/server: strata-replica-<node id>).
const replicaClientPrefix = "strata-replica-"

// startProcessCluster starts nodes strata processes behind proxies.
func startProcessCluster(t *testing.T, nodes int, topic string) *processCluster {
	t.Helper()
	bin := testcluster.Binary(t) // the real binary, built once per test process
	wrap, err := newNodeWrapper(t.TempDir(), bin)
	if err != nil {
		t.Fatal(err)
	}
	c := &processCluster{t: t, net: netfault.New(), wrap: wrap, topic: topic}
	// Registered before testcluster.Start, so it runs after the nodes are killed.
	t.Cleanup(func() {
		for _, p := range c.proxies {
			p.Close()
		}
	})
	name := func(id int32) string { return strconv.Itoa(int(id)) }
	who := func(clientID string) string {
		if id, ok := strings.CutPrefix(clientID, replicaClientPrefix); ok {
			return id
		}
		return clientSource
	}
	upstream := func(id int32, flag string) netfault.Upstream {
		return func() (string, error) { return wrap.arg(id, flag) }
	}
	listen := func(p *netfault.Proxy, err error) *netfault.Proxy {
		if err != nil {
			t.Fatalf("starting a proxy: %v", err)
		}
		c.proxies = append(c.proxies, p)
		return p
	}
	links := map[[2]int32]*netfault.Proxy{}
	for id := int32(1); id <= int32(nodes); id++ {
		host := proxyHost(id)
		c.kafka = append(c.kafka, listen(c.net.Kafka(host+":0", name(id), who, upstream(id, "--kafka-addr"))))
		for from := int32(1); from <= int32(nodes); from++ {
			if from != id {
				links[[2]int32{from, id}] = listen(c.net.Link(host+":0", name(from), name(id), upstream(id, "--controller-addr")))
			}
		}
	}
	for id := int32(1); id <= int32(nodes); id++ {
		var voters []string
		for to := int32(1); to <= int32(nodes); to++ {
			addr := "{controller-addr}"
			if to != id {
				addr = links[[2]int32{id, to}].Addr()
			}
			voters = append(voters, fmt.Sprintf("%d@%s", to, addr))
		}
		if err := wrap.setFlags(id, "--advertised-kafka-addr", c.kafka[id-1].Addr(), "--controllers", strings.Join(voters, ",")); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(testcluster.BinaryEnv, wrap.script)
	c.tc = testcluster.Start(t, nodes, testcluster.WithFlags(
		"--group-initial-rebalance-delay", "100ms",
		"--offsets-topic-partitions", "4",
	))
	var logs []string
	for _, n := range c.tc.Nodes() {
		logs = append(logs, n.LogPath)
	}
	keepLogsOnFailure(t, logs) // registered after Start: runs before its temp dirs go
	return c
}

// proxyHost is where node id's proxies listen: its testcluster loopback
// address where the host can bind it, else 127.0.0.1.
func proxyHost(id int32) string {
	host := fmt.Sprintf("127.0.0.%d", 10+id)
	ln, err := net.Listen("tcp", host+":0")
	if err != nil {
		return "127.0.0.1"
	}
	ln.Close()
	return host
}

func (c *processCluster) seeds() []string {
	var s []string
	for _, p := range c.kafka {
		s = append(s, p.Addr())
	}
	return s
}

// warmedUp fails the test unless every node's follower fetches were seen, and
// told apart, by some Kafka proxy: if the server's fetcher changed its client
// id, isolating a node would silently leave its fetches flowing.
func (c *processCluster) warmedUp() {
	c.t.Helper()
	err := waitFor(30*time.Second, func() error {
		seen := map[string]bool{}
		for _, p := range c.kafka {
			for src := range p.Sources() {
				seen[src] = true
			}
		}
		for _, n := range c.tc.Nodes() {
			if !seen[strconv.Itoa(int(n.ID))] {
				return fmt.Errorf("no Kafka proxy saw a connection from node %d's follower fetcher (client id %s%d); sources seen: %v",
					n.ID, replicaClientPrefix, n.ID, seen)
			}
		}
		return nil
	})
	if err != nil {
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
			c.net.Isolate(strconv.Itoa(int(n.ID)))
		} else {
			c.net.Isolate(strconv.Itoa(int(n.ID)), clientSource)
		}
		time.Sleep(f.Hold)
		c.net.Heal(f.Reset)
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

func (c *processCluster) heal() {
	c.net.Heal(true)
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
