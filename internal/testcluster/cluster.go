// Package testcluster runs a real multi-process Strata cluster for tests: one
// `strata server` process per node, so that SIGKILL is a crash, SIGSTOP a stalled
// machine and SIGTERM a clean shutdown, as on real hosts.
//
// # What a cluster is
//
// Start builds the strata binary once per test process (Binary), then starts n
// nodes, every one a controller voter and, unless WithControllerOnly names it,
// a broker; AddBroker adds broker-only nodes (--roles broker) later:
//
//	node  loopback address  data dir       log file
//	----  ----------------  -------------  ---------------------------
//	1     127.0.0.11        t.TempDir()    <tempdir>/node-1.log
//	2     127.0.0.12        t.TempDir()    <tempdir>/node-2.log
//	...   127.0.0.(10+i)
//
// Each node gets three ports (Kafka, HTTP, controller) probed free on its own
// address. Where the host cannot bind 127.0.0.11 (Linux routes all of 127/8 to
// loopback, other systems may not), every node uses 127.0.0.1 with distinct
// ports, and the test log says so. The timing flags default to test values
// (heartbeat 100ms, session timeout 2s, replica lag 2s); WithFlags appends
// flags that override them. A node is ready once GET /readyz answers 200.
//
// # Lifetime
//
// Children run in their own process groups and get SIGKILL if the test process
// dies (Pdeathsig; one goroutine, locked to its thread, starts every child and
// lives as long as the test process: a package checking for leaked goroutines
// must ignore it). t.Cleanup kills every node that is still running, whatever
// the outcome; when the test failed it first logs the tail of every node's log.
// A node not ready in time (Start, Restart, AddBroker, WaitReady) fails the
// test with the end of its own log in the message.
// Data dirs and logs live in t.TempDir directories.
//
// # Concurrency
//
// The lifecycle methods (Kill, Stop, Pause, Resume, Restart) and the Wait*
// helpers fail the test with t.Fatal, so call them from the test's goroutine. The
// query methods (Partition, ActiveController, Node.Request) return errors and
// are safe from any goroutine.
package testcluster

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/freeport"
)

// ClusterID is the --cluster-id every node of a test cluster is given.
const ClusterID = "strata-testcluster"

// readyTimeout bounds how long Start and Restart wait for readiness.
const readyTimeout = 60 * time.Second

// Option configures Start.
type Option func(*options)

type options struct {
	flags          []string
	controllerOnly map[int32]bool
	// readyTLS and clientOpts: see WithClientSecurity.
	readyTLS   *tls.Config
	clientOpts []kgo.Opt
}

// WithControllerOnly starts the nodes with these ids as controller voters that
// serve no Kafka clients (--roles controller); the others are combined nodes.
func WithControllerOnly(ids ...int32) Option {
	return func(o *options) {
		if o.controllerOnly == nil {
			o.controllerOnly = map[int32]bool{}
		}
		for _, id := range ids {
			o.controllerOnly[id] = true
		}
	}
}

// WithFlags appends server flags for every node; they come after the defaults,
// so they override them (e.g. "--broker-session-timeout", "3s").
func WithFlags(flags ...string) Option {
	return func(o *options) { o.flags = append(o.flags, flags...) }
}

// WithClientSecurity is for a cluster whose listeners use TLS, and maybe SASL,
// as the caller's WithFlags set them up: readiness is asked over HTTPS with
// tlsCfg, and the cluster's own clients (Client, Admin, Node.Request) dial
// with tlsCfg and opts (SASL, say).
func WithClientSecurity(tlsCfg *tls.Config, opts ...kgo.Opt) Option {
	return func(o *options) {
		o.readyTLS = tlsCfg
		o.clientOpts = append([]kgo.Opt{kgo.DialTLSConfig(tlsCfg)}, opts...)
	}
}

// Cluster is a running test cluster.
type Cluster struct {
	t       testing.TB
	opts    options
	nodes   []*Node
	logDir  string
	clients struct {
		sync.Mutex
		all []*kgo.Client
	}
	adminOnce sync.Once
	admin     *kadm.Client
	// controllers is the --controllers list every node is given.
	controllers string
	distinct    bool // whether nodes have addresses of their own
}

// Start starts an n-node cluster and waits until every node is ready.
func Start(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	if n < 1 || n > 200 {
		t.Fatalf("testcluster: %d nodes; want 1 to 200", n)
	}
	c := &Cluster{t: t}
	for _, o := range opts {
		o(&c.opts)
	}
	bin := Binary(t)
	hosts, distinct := loopbackHosts(n, canListen)
	c.distinct = distinct
	if !distinct {
		t.Logf("testcluster: cannot bind 127.0.0.11; all nodes use 127.0.0.1 with distinct ports")
	}
	c.logDir = t.TempDir()
	ports, err := freePorts(hosts, 3)
	if err != nil {
		t.Fatalf("testcluster: probing free ports: %v", err)
	}
	var voters []string
	for i := range n {
		node := c.newNode(int32(i+1), hosts[i], ports[i], bin)
		if c.opts.controllerOnly[node.ID] {
			node.Roles = "controller"
		}
		voters = append(voters, fmt.Sprintf("%d@%s", node.ID, node.ControllerAddr))
		c.nodes = append(c.nodes, node)
	}
	c.controllers = strings.Join(voters, ",")
	for _, node := range c.nodes {
		node.args = c.args(node)
	}
	// Registered after the TempDirs, so it runs before they are removed.
	t.Cleanup(c.cleanup)

	// The nodes wait for a controller quorum while starting: start them all,
	// then wait for each.
	for _, node := range c.nodes {
		if err := node.start(); err != nil {
			t.Fatalf("testcluster: starting node %d: %v", node.ID, err)
		}
	}
	deadline := time.Now().Add(readyTimeout)
	for _, node := range c.nodes {
		if err := node.waitReady(deadline); err != nil {
			t.Fatalf("testcluster: node %d: %v\n%s", node.ID, err, node.logTail())
		}
	}
	return c
}

func (c *Cluster) newNode(id int32, host string, ports []int, bin string) *Node {
	return &Node{
		ID:             id,
		Host:           host,
		Roles:          "broker,controller",
		KafkaAddr:      net.JoinHostPort(host, strconv.Itoa(ports[0])),
		HTTPAddr:       net.JoinHostPort(host, strconv.Itoa(ports[1])),
		ControllerAddr: net.JoinHostPort(host, strconv.Itoa(ports[2])),
		DataDir:        c.t.TempDir(),
		LogPath:        filepath.Join(c.logDir, fmt.Sprintf("node-%d.log", id)),
		bin:            bin,
		c:              c,
	}
}

// args is a node's command line: the test defaults, then WithFlags.
func (c *Cluster) args(node *Node) []string {
	return append([]string{"server",
		"--node-id", strconv.Itoa(int(node.ID)),
		"--roles", node.Roles,
		"--data-dir", node.DataDir,
		"--kafka-addr", node.KafkaAddr,
		"--http-addr", node.HTTPAddr,
		"--controller-addr", node.ControllerAddr,
		"--controllers", c.controllers,
		"--cluster-id", ClusterID,
		"--broker-heartbeat-interval", "100ms",
		"--broker-session-timeout", "2s",
		"--replica-lag-time-max", "2s",
		"--shutdown-timeout", "20s",
		"--log-level", "info",
	}, c.opts.flags...)
}

// AddBroker starts a broker-only node (--roles broker) with the next node id
// against the running cluster's controllers, and waits until it is ready.
// extra flags come last. Call it from the test's goroutine.
func (c *Cluster) AddBroker(extra ...string) *Node {
	c.t.Helper()
	id := int32(len(c.nodes) + 1)
	host := "127.0.0.1"
	if c.distinct {
		host = fmt.Sprintf("127.0.0.%d", 10+id)
	}
	ports, err := freePorts([]string{host}, 3)
	if err != nil {
		c.t.Fatalf("testcluster: probing free ports: %v", err)
	}
	node := c.newNode(id, host, ports[0], Binary(c.t))
	node.Roles = "broker"
	node.args = append(c.args(node), extra...)
	c.nodes = append(c.nodes, node)
	if err := node.start(); err != nil {
		c.t.Fatalf("testcluster: starting node %d: %v", id, err)
	}
	node.WaitReady()
	return node
}

// Nodes returns every node, running or not, in id order.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns the node with id (1-based).
func (c *Cluster) Node(id int32) *Node {
	c.t.Helper()
	if id < 1 || int(id) > len(c.nodes) {
		c.t.Fatalf("testcluster: no node %d in a %d-node cluster", id, len(c.nodes))
	}
	return c.nodes[id-1]
}

// Bootstrap returns the Kafka addresses of every broker, for clients' seed lists.
func (c *Cluster) Bootstrap() []string {
	var addrs []string
	for _, n := range c.nodes {
		if n.IsBroker() {
			addrs = append(addrs, n.KafkaAddr)
		}
	}
	return addrs
}

// Client returns a client seeded with every node and closed at cleanup. Its
// defaults suit failover tests (metadata refreshed at most every 100ms, retries
// every 50ms); opts come after them and override them.
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(c.Bootstrap()...),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}
	cl, err := kgo.NewClient(append(append(base, c.opts.clientOpts...), opts...)...)
	if err != nil {
		c.t.Fatalf("testcluster: client: %v", err)
	}
	c.clients.Lock()
	c.clients.all = append(c.clients.all, cl)
	c.clients.Unlock()
	return cl
}

// Admin returns an admin client over a Client shared by the whole test.
func (c *Cluster) Admin() *kadm.Client {
	c.t.Helper()
	c.adminOnce.Do(func() { c.admin = kadm.NewClient(c.Client()) })
	return c.admin
}

// Stop shuts nodes down cleanly, all at once: SIGTERM to each (a paused node is
// resumed first to receive it), then waits for each to exit, which it must do
// with status 0 within 30s.
func (c *Cluster) Stop(nodes ...*Node) {
	c.t.Helper()
	procs := make([]*process, len(nodes))
	for i, n := range nodes {
		procs[i] = n.running("stopping")
		if n.Paused() {
			n.Resume()
		}
	}
	for i, n := range nodes {
		n.note("SIGTERM")
		if err := procs[i].signal(syscall.SIGTERM, false); err != nil {
			c.t.Fatalf("testcluster: stopping node %d: %v", n.ID, err)
		}
	}
	deadline := time.Now().Add(stopTimeout)
	for i, n := range nodes {
		p := procs[i]
		if !p.wait(time.Until(deadline)) {
			p.signal(syscall.SIGKILL, true)
			c.t.Fatalf("testcluster: node %d did not exit within %v of SIGTERM", n.ID, stopTimeout)
		}
		if code := p.exitCode(); code != 0 {
			c.t.Fatalf("testcluster: node %d exited with status %d after SIGTERM (%v)", n.ID, code, p.err)
		}
	}
}

// logTailLines is how much of each node's log a failed test shows.
const logTailLines = 150

// cleanup kills every node still running and closes the clients; after a
// failure it first shows the end of every node's log.
func (c *Cluster) cleanup() {
	c.clients.Lock()
	for _, cl := range c.clients.all {
		cl.Close()
	}
	c.clients.all = nil
	c.clients.Unlock()
	for _, n := range c.nodes {
		n.closeDirect()
		if p := n.current(); p != nil && !p.exited() {
			p.signal(syscall.SIGKILL, true)
			if !p.wait(10 * time.Second) {
				c.t.Errorf("testcluster: node %d (pid %d) survived SIGKILL", n.ID, p.cmd.Process.Pid)
			}
		}
	}
	if c.t.Failed() {
		for _, n := range c.nodes {
			c.t.Logf("testcluster: last %d lines of node %d's log (%s):\n%s", logTailLines, n.ID, n.LogPath, tail(n.LogPath, logTailLines))
		}
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// loopbackHosts picks an address per node: 127.0.0.11, .12, ... when the host
// can bind the first of them, else 127.0.0.1 for every node. distinct says which.
func loopbackHosts(n int, canBind func(host string) bool) (hosts []string, distinct bool) {
	distinct = canBind("127.0.0.11")
	for i := range n {
		if distinct {
			hosts = append(hosts, fmt.Sprintf("127.0.0.%d", 11+i))
		} else {
			hosts = append(hosts, "127.0.0.1")
		}
	}
	return hosts, distinct
}

func canListen(host string) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// freePorts returns k ports per host, free now and outside the ephemeral range,
// all distinct even where hosts repeat.
func freePorts(hosts []string, k int) ([][]int, error) {
	all, err := freeport.Ports(len(hosts)*k, hosts...)
	if err != nil {
		return nil, err
	}
	ports := make([][]int, len(hosts))
	for i := range hosts {
		ports[i] = all[i*k : (i+1)*k]
	}
	return ports, nil
}
