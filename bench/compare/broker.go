package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/freeport"
)

// proc is one process the harness started.
type proc struct {
	name    string
	bin     string   // what was started, before any taskset
	args    []string // and its arguments
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	waitErr error         // read after exited is closed
	logPath string
}

// brokerCPUs, when set, is the CPU list every broker process runs on
// (-pin-brokers).
var brokerCPUs string

// spawn starts bin with its output in logPath, on brokerCPUs if set (taskset
// execs bin in place: the process keeps its pid).
func spawn(name, logPath, bin string, args ...string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	p := &proc{name: name, bin: bin, args: args, exited: make(chan struct{}), logPath: logPath}
	if brokerCPUs != "" {
		args = append([]string{"-c", brokerCPUs, bin}, args...)
		bin = "taskset"
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	p.cmd = cmd
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited (%v); see %s", p.name, p.waitErr, p.logPath)
	default:
		return nil
	}
}

// stopGrace is how long stop waits after SIGTERM before SIGKILL.
const stopGrace = 45 * time.Second

// stop ends the process: SIGTERM, then SIGKILL after stopGrace.
func (p *proc) stop() { p.stopWithin(stopGrace) }

// stopWithin ends the process: SIGTERM, then SIGKILL after grace. It says
// whether the process exited before the SIGKILL.
func (p *proc) stopWithin(grace time.Duration) bool {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return true
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.exited
		return false
	}
}

// system is one side of the comparison: its broker processes.
type system struct {
	name  string
	seeds []string // Kafka listeners, host:port
	// sslSeeds are Kafka's SSL listeners (-tls), host:port.
	sslSeeds []string
	// clientOpts are what a client needs to reach seeds (TLS), nil for none.
	clientOpts []kgo.Opt
	// metricsURL is a one-node Strata's /metrics page ("": none read).
	metricsURL string
	procs      []*proc       // what the harness started
	dir        string        // where its processes keep their data (and logs)
	pids       func() []int  // the broker processes whose memory counts
	startup    time.Duration // first process start to every broker answering
}

func (s *system) alive() error {
	for _, p := range s.procs {
		if err := p.alive(); err != nil {
			return err
		}
	}
	return nil
}

// stop stops every process at once: a cluster's nodes shut down together.
func (s *system) stop() {
	done := make(chan struct{})
	for _, p := range s.procs {
		go func() {
			p.stop()
			done <- struct{}{}
		}()
	}
	for range s.procs {
		<-done
	}
}

// memory sums VmRSS and VmHWM (peak RSS) over the broker processes, in KiB.
func (s *system) memory() (rss, peak int64, err error) {
	pids := s.pids()
	if len(pids) == 0 {
		return 0, 0, errors.New("no broker process found")
	}
	for _, pid := range pids {
		r, p, err := processMemory(pid)
		if err != nil {
			return 0, 0, fmt.Errorf("pid %d: %w", pid, err)
		}
		rss, peak = rss+r, peak+p
	}
	return rss, peak, nil
}

// processMemory reads VmRSS and VmHWM of one process from /proc, in KiB.
func processMemory(pid int) (rss, peak int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(data)) {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %q: %w", key, line, err)
		}
		if key == "VmRSS" {
			rss = kb
		} else {
			peak = kb
		}
	}
	if rss == 0 {
		return 0, 0, errors.New("no VmRSS in /proc status")
	}
	return rss, peak, nil
}

// childPIDs lists the children of pid (all its threads'), from /proc.
func childPIDs(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for f := range strings.FieldsSeq(string(data)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

func procPIDs(ps []*proc) func() []int {
	return func() []int {
		var out []int
		for _, p := range ps {
			out = append(out, p.cmd.Process.Pid)
		}
		return out
	}
}

// kafkaJVMOpts are what Kafka's own start scripts pass to the broker's JVM by
// default (kafka-server-start.sh heap, kafka-run-class.sh performance options).
var kafkaJVMOpts = []string{
	"-Xmx1G", "-Xms1G",
	"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
	"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
}

// kafkaLog4j sends Kafka's log, at its usual INFO level, to stdout (a file here).
const kafkaLog4j = `status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = STDOUT
`

// freePorts returns n loopback ports, free now and outside the ephemeral range.
// Another process could still take one before the broker binds it; the broker
// would then fail to start, loudly.
func freePorts(n int) ([]int, error) { return freeport.Ports(n) }

// kafkaNode is one KRaft node (broker and controller) of a loopback cluster.
type kafkaNode struct {
	id                        int
	kafkaPort, controllerPort int
	dir                       string
	// sslPort, when not 0, is an SSL listener beside PLAINTEXT, its key and
	// certificate read from keystore (-tls).
	sslPort  int
	keystore string
}

// kafkaProperties configures node n of a KRaft cluster of all; every node is a
// broker and a controller voter. flushEveryMessage sets
// log.flush.interval.messages=1: an fsync on every append, before the produce is
// acknowledged (Kafka's flush.messages=1 for every topic).
func kafkaProperties(n kafkaNode, all []kafkaNode, flushEveryMessage bool) string {
	var voters []string
	for _, v := range all {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", v.id, v.controllerPort))
	}
	internalRF := min(len(all), 3) // Kafka's default is 3, which one or two nodes cannot host
	listeners := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", n.kafkaPort)
	protocols := "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
	if n.sslPort != 0 {
		listeners += fmt.Sprintf(",SSL://127.0.0.1:%d", n.sslPort)
		protocols += ",SSL:SSL"
	}
	lines := []string{
		"process.roles=broker,controller",
		fmt.Sprintf("node.id=%d", n.id),
		"controller.quorum.voters=" + strings.Join(voters, ","),
		fmt.Sprintf("listeners=%s,CONTROLLER://127.0.0.1:%d", listeners, n.controllerPort),
		"advertised.listeners=" + listeners,
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=PLAINTEXT",
		"listener.security.protocol.map=" + protocols,
		"log.dirs=" + filepath.Join(n.dir, "data"),
		"num.partitions=1",
		fmt.Sprintf("offsets.topic.replication.factor=%d", internalRF),
		fmt.Sprintf("share.coordinator.state.topic.replication.factor=%d", internalRF),
		fmt.Sprintf("transaction.state.log.replication.factor=%d", internalRF),
		fmt.Sprintf("transaction.state.log.min.isr=%d", min(internalRF, 2)),
		"group.initial.rebalance.delay.ms=0",
		// A deleted topic's files freed a second after its deletion, not a
		// minute (the default), so that the harness's wait for them
		// (cleanup.go) is not a minute per run.
		"log.segment.delete.delay.ms=1000",
	}
	if flushEveryMessage {
		lines = append(lines, "log.flush.interval.messages=1")
	}
	if n.sslPort != 0 {
		// The private key (unencrypted PKCS#8) and the certificate in one PEM file.
		lines = append(lines, "ssl.keystore.type=PEM", "ssl.keystore.location="+n.keystore)
	}
	return strings.Join(lines, "\n") + "\n"
}

// kafkaClusterID is a random Kafka cluster id (a UUID in URL-safe base64).
// Like Kafka's Uuid.randomUuid it never starts with '-': kafka-storage format
// takes such an id for an option and exits (1 run in 64 failed so).
func kafkaClusterID() string {
	for {
		var b [16]byte
		rand.Read(b[:])
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

// startKafka formats fresh log dirs under dir (untimed) and starts a KRaft
// cluster of nodes nodes; with sec, each node also has an SSL listener.
func startKafka(ctx context.Context, java, jars, dir string, nodes int, flushEveryMessage bool, sec *benchTLS) (*system, error) {
	ports, err := freePorts(3 * nodes)
	if err != nil {
		return nil, err
	}
	all := make([]kafkaNode, nodes)
	for i := range all {
		all[i] = kafkaNode{id: i + 1, kafkaPort: ports[3*i], controllerPort: ports[3*i+1], dir: filepath.Join(dir, fmt.Sprintf("node-%d", i+1))}
		if sec != nil {
			all[i].sslPort, all[i].keystore = ports[3*i+2], sec.keystore
		}
	}
	log4j := filepath.Join(dir, "log4j2.properties")
	if err := os.WriteFile(log4j, []byte(kafkaLog4j), 0o644); err != nil {
		return nil, err
	}
	cp := filepath.Join(jars, "*")
	logOpt := "-Dlog4j2.configurationFile=" + log4j
	clusterID := kafkaClusterID()
	s := &system{name: "kafka", dir: dir}
	for _, n := range all {
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return nil, err
		}
		props := filepath.Join(n.dir, "server.properties")
		if err := os.WriteFile(props, []byte(kafkaProperties(n, all, flushEveryMessage)), 0o644); err != nil {
			return nil, err
		}
		format := exec.CommandContext(ctx, java, logOpt, "-cp", cp, "kafka.tools.StorageTool",
			"format", "-t", clusterID, "-c", props)
		if out, err := format.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("formatting Kafka node %d: %w\n%s", n.id, err, out)
		}
		s.seeds = append(s.seeds, fmt.Sprintf("127.0.0.1:%d", n.kafkaPort))
		if n.sslPort != 0 {
			s.sslSeeds = append(s.sslSeeds, fmt.Sprintf("127.0.0.1:%d", n.sslPort))
		}
	}
	began := time.Now()
	for _, n := range all {
		args := append(append([]string{}, kafkaJVMOpts...), logOpt, "-cp", cp, "kafka.Kafka", filepath.Join(n.dir, "server.properties"))
		p, err := spawn(fmt.Sprintf("kafka node %d", n.id), filepath.Join(n.dir, "kafka.log"), java, args...)
		if err != nil {
			s.stop()
			return nil, err
		}
		s.procs = append(s.procs, p)
	}
	s.pids = procPIDs(s.procs)
	return s, s.waitReady(ctx, began, nodes)
}

// startStrata starts fresh Strata: one `strata server` with its defaults, or a
// `strata dev cluster` of nodes nodes. With sec (one node only) its Kafka
// listener is TLS (--tls-cert-file): -tls's SSL node.
func startStrata(ctx context.Context, bin, dir string, nodes int, sec *benchTLS) (*system, error) {
	s := &system{name: "strata", dir: dir}
	if sec != nil && nodes != 1 {
		return nil, errors.New("a TLS Strata node is started for -nodes 1 only")
	}
	if nodes == 1 {
		ports, err := freePorts(3)
		if err != nil {
			return nil, err
		}
		s.seeds = []string{fmt.Sprintf("127.0.0.1:%d", ports[0])}
		began := time.Now()
		args := []string{"server",
			"--data-dir", filepath.Join(dir, "data"),
			"--kafka-addr", s.seeds[0],
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", ports[1]),
			"--controller-addr", fmt.Sprintf("127.0.0.1:%d", ports[2])}
		if sec != nil {
			args = append(args, "--tls-cert-file", sec.certFile, "--tls-key-file", sec.keyFile)
			s.clientOpts = sec.clientOpts()
		} else {
			s.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1])
		}
		p, err := spawn("strata", filepath.Join(dir, "strata.log"), bin, args...)
		if err != nil {
			return nil, err
		}
		s.procs = []*proc{p}
		s.pids = procPIDs(s.procs) // the slice, not a copy: a restart replaces its element
		return s, s.waitReady(ctx, began, 1)
	}
	base := filepath.Join(dir, "cluster")
	began := time.Now()
	p, err := spawn("strata dev cluster", filepath.Join(dir, "dev-cluster.log"), bin, "dev", "cluster",
		"--nodes", strconv.Itoa(nodes), "--base-dir", base)
	if err != nil {
		return nil, err
	}
	s.procs = []*proc{p}
	s.pids = func() []int { return childPIDs(p.cmd.Process.Pid) }
	// The layout file names the nodes' listeners; it is written before they start.
	deadline := began.Add(startupBound)
	for {
		var layout struct {
			Nodes []struct{ Kafka string } `json:"nodes"`
		}
		data, err := os.ReadFile(filepath.Join(base, "cluster.json"))
		if err == nil && json.Unmarshal(data, &layout) == nil && len(layout.Nodes) == nodes {
			for _, n := range layout.Nodes {
				s.seeds = append(s.seeds, n.Kafka)
			}
			break
		}
		if err := p.alive(); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("strata dev cluster wrote no layout within %s; see %s", startupBound, p.logPath)
		}
		time.Sleep(10 * time.Millisecond) // polling a file another process writes
	}
	return s, s.waitReady(ctx, began, nodes)
}

// startupBound is how long a system may take to answer.
const startupBound = 120 * time.Second

// waitReady polls until every seed answers ApiVersions and a Metadata request
// listing all brokers, and sets the startup time; on failure it stops the system.
func (s *system) waitReady(ctx context.Context, began time.Time, brokers int) error {
	deadline := began.Add(startupBound)
	for {
		err := probeAll(ctx, s.seeds, brokers, s.clientOpts...)
		if err == nil {
			s.startup = time.Since(began)
			return nil
		}
		if aerr := s.alive(); aerr != nil {
			s.stop()
			return fmt.Errorf("exited during start-up: %w", aerr)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.stop()
			return fmt.Errorf("%s did not answer within %s (last: %v)", s.name, startupBound, err)
		}
		time.Sleep(10 * time.Millisecond) // polling processes we cannot be told about
	}
}

func probeAll(ctx context.Context, seeds []string, brokers int, opts ...kgo.Opt) error {
	for _, addr := range seeds {
		if err := probe(ctx, addr, brokers, opts...); err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
	}
	return nil
}

// probe sends ApiVersions and Metadata to addr on a fresh connection, with
// opts (TLS) added to the client's.
func probe(ctx context.Context, addr string, brokers int, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTimeout(200 * time.Millisecond),
		kgo.RequestRetries(0), kgo.RetryTimeout(0)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl); err != nil {
		return err
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(md.Brokers) < brokers {
		return fmt.Errorf("metadata lists %d of %d brokers", len(md.Brokers), brokers)
	}
	return nil
}
