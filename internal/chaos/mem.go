package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-stream/strata/internal/chaos/netfault"
	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/freeport"
	"github.com/strata-stream/strata/internal/server"
	"github.com/strata-stream/strata/internal/vfs"
)

// memCluster is an in-process cluster (server.Start) whose nodes keep their
// partition logs in a vfs.MemFS each, behind an error-injecting vfs.ErrorFS
// and a freezeFS, and talk through a clusterNet:
//
//	node.fs = freezeFS( ErrorFS( MemFS, DiskFull + fsync Rule ) )
//
// so a test can fill one node's disk, fail its fsyncs, or cut the power of every
// node at one instant (disks frozen, every link cut) and restart each on what it
// had fsynced. The controller's Raft log, stable state and snapshots (package
// controller/raftstore) are in the same MemFS and cut with it by a power loss;
// disk-full and fsync faults hit only the partition logs (see start).
type memCluster struct {
	t     *testing.T
	cn    *clusterNet
	nodes []*memNode
	topic string
	adm   *kadm.Client
	seed  uint64
	cuts  int       // power cuts so far; varies the torn-write seed
	sec   *security // nil: a plaintext cluster
}

type memNode struct {
	cfg     config.Config
	logPath string
	logFile *os.File // open while the node runs
	mem     *vfs.MemFS
	full    *vfs.DiskFull // on during a disk-full fault
	syncs   *vfs.Rule     // on during an fsync fault
	fs      *freezeFS
	node    *server.Node
}

// startMemCluster starts n in-process nodes on in-memory disks; tune, if any,
// adjusts each node's configuration.
func startMemCluster(t *testing.T, n int, topic string, seed uint64, sec *security, tune ...func(*config.Config)) *memCluster {
	t.Helper()
	c := &memCluster{t: t, topic: topic, seed: seed, sec: sec}
	logDir := t.TempDir()
	for i := range n {
		cfg := config.Default()
		cfg.NodeID = int32(i + 1)
		cfg.DataDir = t.TempDir() // a unique path; everything under it is in the MemFS
		cfg.KafkaAddr, cfg.ControllerAddr, cfg.HTTPAddr = freeAddr(t), freeAddr(t), freeAddr(t)
		cfg.ClusterID = "strata-chaos"
		cfg.BrokerHeartbeatInterval = 100 * time.Millisecond
		cfg.BrokerSessionTimeout = 2 * time.Second
		cfg.ReplicaLagTimeMax = 2 * time.Second
		cfg.ShutdownTimeout = 5 * time.Second
		cfg.GroupInitialDelay = 100 * time.Millisecond
		cfg.OffsetsTopicPartition = 4
		cfg.TransactionStatePartitions = 4
		cfg.ShareStatePartitions = 4
		if i == 1 {
			// Node 2 makes its logs durable with the shared syncfs, the others
			// with each log's fsync: every in-process run puts both under its
			// power cuts and failed syncs.
			cfg.LogDirSync = config.LogDirSyncFilesystem
		}
		if sec != nil {
			sec.configure(&cfg)
		}
		for _, f := range tune {
			f(&cfg)
		}
		// The data dir does not exist on the in-memory disk: the node creates it,
		// and must make it durable itself.
		c.nodes = append(c.nodes, &memNode{cfg: cfg, mem: vfs.NewMem(), logPath: filepath.Join(logDir, fmt.Sprintf("node-%d.log", i+1))})
	}
	addr := func(get func(*memNode) string) func(int32) netfault.Upstream {
		return func(id int32) netfault.Upstream {
			return func() (string, error) { return get(c.nodes[id-1]), nil }
		}
	}
	c.cn = newClusterNet(t, n, n, sec != nil, func(int32) string { return "127.0.0.1" },
		addr(func(nd *memNode) string { return nd.cfg.KafkaAddr }), addr(func(nd *memNode) string { return nd.cfg.ControllerAddr }))
	for _, nd := range c.nodes {
		id := nd.cfg.NodeID
		nd.cfg.AdvertisedKafkaAddr, nd.cfg.AdvertisedControllerAddr = c.cn.advertised(id), c.cn.advertisedController(id)
		nd.cfg.ControllerSourceHost, nd.cfg.Controllers = sourceHost(id), c.cn.controllers()
		if c.cn.byAddr {
			nd.cfg.KafkaSourceHost = sourceHost(id)
		}
	}
	t.Cleanup(func() {
		c.stopAll()
		if t.Failed() {
			for _, nd := range c.nodes {
				t.Logf("last lines of node %d's log (%s):\n%s", nd.cfg.NodeID, nd.logPath, tail(nd.logPath, 80))
			}
		}
	})
	keepLogsOnFailure(t, c.logs())
	if err := c.startAll(c.nodes); err != nil {
		t.Fatal(err)
	}
	c.adm = newAdmin(t, c.seeds())
	return c
}

// freeAddr returns a loopback address free now, outside the ephemeral range;
// a node keeps it across restarts (its controller address is in every voter
// list).
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startAll starts nodes together (each waits for a controller quorum).
func (c *memCluster) startAll(nodes []*memNode) error {
	errs := make(chan error, len(nodes))
	for _, nd := range nodes {
		go func() { errs <- nd.start() }()
	}
	var all []error
	for range nodes {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	if len(all) > 0 {
		return fmt.Errorf("starting nodes: %v", all)
	}
	return nil
}

func (nd *memNode) start() error {
	nd.full = vfs.NewDiskFull(0)
	nd.full.Disable()
	nd.syncs = vfs.FailOn(vfs.OpSync | vfs.OpSyncDir | vfs.OpSyncFS).WithError(syscall.EIO)
	nd.syncs.Disable()
	// Disk faults hit the partition logs' disk (Kafka's log.dirs); the
	// controller's Raft store is on its own (metadata.log.dir), which only the
	// power loss reaches: hashicorp/raft panics when it cannot store its term,
	// which would take down every in-process node at once.
	logs := filepath.Join(nd.cfg.DataDir, "logs") + string(filepath.Separator)
	onLogs := vfs.InjectorFunc(func(op vfs.Op) error {
		if !strings.HasPrefix(op.Path, logs) && !strings.HasPrefix(op.To, logs) && op.Path != strings.TrimSuffix(logs, string(filepath.Separator)) {
			return nil
		}
		return vfs.Any(nd.full, nd.syncs).MaybeError(op)
	})
	// A power cut holds the Raft store's changes (<data-dir>/metadata, as
	// server.Start places it) rather than failing them (freezeFS).
	nd.fs = newFreezeFS(vfs.NewErrorFS(nd.mem, onLogs), filepath.Join(nd.cfg.DataDir, "metadata")+string(filepath.Separator))
	lf, err := os.OpenFile(nd.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(lf, "=== chaos %s: starting node %d\n", time.Now().Format("15:04:05.000"), nd.cfg.NodeID)
	logger := slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := server.Start(ctx, nd.cfg, logger, nd.fs)
	if err != nil {
		lf.Close()
		return fmt.Errorf("node %d: %w", nd.cfg.NodeID, err)
	}
	nd.node, nd.logFile = n, lf
	return nil
}

// stop closes the node (if running).
func (nd *memNode) stop() { nd.close((*server.Node).Close) }

// abort stops a node that has lost its power: no hand-off, no draining (see
// server.Node.Abort), so its successor can start at once.
func (nd *memNode) abort() { nd.close((*server.Node).Abort) }

func (nd *memNode) close(how func(*server.Node) error) {
	if nd.node != nil {
		if err := how(nd.node); err != nil {
			fmt.Fprintf(nd.logFile, "=== chaos: close: %v\n", err)
		}
		nd.logFile.Close()
		nd.node, nd.logFile = nil, nil
	}
}

func (c *memCluster) seeds() brokers { return c.sec.harness(c.cn.seeds()) }

func (c *memCluster) workloadSeeds() brokers { return c.sec.workload(c.cn.seeds()) }

func (c *memCluster) httpAddrs() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.cfg.HTTPAddr)
	}
	return out
}

// stopAll closes every node, together.
func (c *memCluster) stopAll() { c.eachNode((*memNode).stop) }

// abortAll aborts every node, together.
func (c *memCluster) abortAll() { c.eachNode((*memNode).abort) }

func (c *memCluster) eachNode(f func(*memNode)) {
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(nd)
		}()
	}
	wg.Wait()
}

func (c *memCluster) heal() {
	c.cn.net.Heal(true)
	var down []*memNode
	for _, nd := range c.nodes {
		nd.full.Disable()
		nd.syncs.Disable()
		if nd.node == nil {
			down = append(down, nd)
		}
	}
	if err := c.startAll(down); err != nil {
		c.t.Errorf("healing: %v", err)
	}
}

// resolve picks the node a disk fault hits.
func (c *memCluster) resolve(f Fault) (*memNode, string, error) {
	if f.Role == Leader || f.Role == Follower {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		md, err := c.adm.Metadata(ctx, c.topic)
		if err != nil {
			return nil, "", err
		}
		pd, ok := md.Topics[c.topic].Partitions[f.Partition]
		if !ok || pd.Leader < 1 {
			return nil, "", fmt.Errorf("partition %d has no leader", f.Partition)
		}
		if f.Role == Leader {
			return c.nodes[pd.Leader-1], fmt.Sprintf("leader of partition %d", f.Partition), nil
		}
		followers := slices.DeleteFunc(slices.Clone(pd.Replicas), func(id int32) bool { return id == pd.Leader })
		if len(followers) == 0 {
			return nil, "", fmt.Errorf("partition %d has no follower", f.Partition)
		}
		return c.nodes[followers[f.Pick%len(followers)]-1], fmt.Sprintf("follower of partition %d", f.Partition), nil
	}
	if f.Role == Coordinator {
		id, err := txnCoordinator(c.adm)
		if err != nil {
			return nil, "", err
		}
		return c.nodes[id-1], "transaction coordinator", nil
	}
	if f.Role == ShareCoordinator || f.Role == ShareState {
		id, why, err := shareRoleNode(c.adm, c.topic, f)
		if err != nil {
			return nil, "", err
		}
		return c.nodes[id-1], why, nil
	}
	return c.nodes[f.Pick%len(c.nodes)], "picked", nil
}

func (c *memCluster) inject(f Fault, _ func(time.Duration) error) (string, error) {
	switch f.Kind {
	case PowerLoss:
		return c.powerLoss()
	case DiskFull, FsyncFailure, Kill:
	default:
		return "", fmt.Errorf("an in-process cluster cannot inject %s", f.Kind)
	}
	nd, why, err := c.resolve(f)
	if err != nil {
		return "", err
	}
	if f.Kind == Kill {
		// The node's power is cut for the hold: it stops at once, unheard,
		// and restarts on what it had fsynced.
		if err := c.powerCycle(nd, f.Hold); err != nil {
			return "", err
		}
		return fmt.Sprintf("kill of node %d (%s, its unsynced writes lost) for %v", nd.cfg.NodeID, why, f.Hold.Round(time.Millisecond)), nil
	}
	if f.Kind == DiskFull {
		nd.full.SetFree(0)
		nd.full.Enable()
	} else {
		nd.syncs.Enable()
	}
	time.Sleep(f.Hold) // the fault's length
	failed := nd.syncs.Fired()
	// Heal: the operator power-cycles the node. Only what it had fsynced
	// survives (a failed fsync may have lost pages), so it restarts on a crash
	// image.
	if err := c.powerCycle(nd, 0); err != nil {
		return "", err
	}
	what := fmt.Sprintf("%s on node %d (%s) for %v, then a reboot", f.Kind, nd.cfg.NodeID, why, f.Hold.Round(time.Millisecond))
	if f.Kind == FsyncFailure {
		what += fmt.Sprintf(" (%d fsyncs failed)", failed)
	}
	return what, nil
}

// powerCycle cuts nd's power, keeps it off for off, and starts it again on
// what it had fsynced (with a seeded torn tail), its disk faults cleared.
func (c *memCluster) powerCycle(nd *memNode, off time.Duration) error {
	c.powerOff(nd)
	c.cuts++
	nd.crash(vfs.WithTornWrites(c.seed + uint64(c.cuts)))
	nd.abort()
	time.Sleep(off)
	c.cn.net.Heal(true)
	nd.full.Disable()
	nd.syncs.Disable()
	return c.startAll([]*memNode{nd})
}

// powerOff stops nodes at one instant as far as the world can tell: their
// disks freeze (nothing more becomes durable) and every link to and from them
// is cut (nothing more is said). It returns once the disk changes already under
// way have finished, so crash images taken afterwards are the state at the cut.
// The in-process nodes themselves run on until stopped, unheard; their own ends
// of their connections are reset (netfault's Down), so that stopping them does
// not wait for I/O timeouts on links nobody answers (8-10 s in Raft's shutdown
// alone), while their peers still see only silence.
func (c *memCluster) powerOff(nodes ...*memNode) {
	for _, nd := range nodes {
		nd.fs.frozen.Store(true)
		c.cn.net.Isolate(name(nd.cfg.NodeID))
		c.cn.net.Down(name(nd.cfg.NodeID))
	}
	for _, nd := range nodes {
		nd.fs.Freeze()
	}
}

// crash gives nd, powered off, the disk it restarts on: what it had fsynced by
// the freeze. The old disk is left to the old node, whose held Raft writes
// now finish there, so that it can stop.
func (nd *memNode) crash(opts ...vfs.CrashOption) {
	nd.mem = nd.mem.CrashClone(opts...)
	nd.fs.Thaw()
}

// powerLoss cuts the power of every node at one instant: each keeps what it had
// fsynced (plus a seeded torn prefix of the rest) and restarts on that image.
func (c *memCluster) powerLoss() (string, error) {
	cut := time.Now()
	c.powerOff(c.nodes...)
	c.cuts++
	for i, nd := range c.nodes {
		nd.crash(vfs.WithTornWrites(c.seed*1000 + uint64(c.cuts*10+i)))
	}
	c.abortAll()
	c.cn.net.Heal(true)
	start := time.Now()
	if err := c.startAll(c.nodes); err != nil {
		return "", err
	}
	return fmt.Sprintf("power loss of all %d nodes at %s; restarted in %.1fs", len(c.nodes), cut.Format("15:04:05.000"), time.Since(start).Seconds()), nil
}

func (c *memCluster) logs() []string {
	var logs []string
	for _, nd := range c.nodes {
		logs = append(logs, nd.logPath)
	}
	return logs
}

func (c *memCluster) warmedUp() {
	c.t.Helper()
	if err := waitFor(30*time.Second, c.cn.checkSourcesSeen); err != nil {
		c.t.Fatal(err)
	}
}

func (c *memCluster) replica(node int32, topic string, partition int32, end int64) (replicaLog, error) {
	nd := c.nodes[node-1]
	return readReplica(nd.mem, filepath.Join(nd.cfg.DataDir, "logs", topic+"-"+strconv.Itoa(int(partition))), end)
}
