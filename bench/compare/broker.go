package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// broker is one broker process the harness started.
type broker struct {
	name    string // "strata" or "kafka"
	addr    string // Kafka listener, host:port
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	waitErr error         // read after exited is closed
	startup time.Duration // process start to the first good ApiVersions + Metadata
	logPath string
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

// freePorts asks the kernel for n free loopback ports. Another process could take
// one before the broker binds it; the broker would then fail to start, loudly.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// kafkaProperties is a single-node KRaft broker+controller on loopback.
// flushEveryMessage sets log.flush.interval.messages=1: fsync on every append,
// before the produce is acknowledged (Kafka's flush.messages=1 for every topic).
func kafkaProperties(dir string, kafkaPort, controllerPort int, flushEveryMessage bool) string {
	lines := []string{
		"process.roles=broker,controller",
		"node.id=1",
		fmt.Sprintf("controller.quorum.voters=1@127.0.0.1:%d", controllerPort),
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", kafkaPort, controllerPort),
		fmt.Sprintf("advertised.listeners=PLAINTEXT://127.0.0.1:%d", kafkaPort),
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=PLAINTEXT",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs=" + filepath.Join(dir, "data"),
		"num.partitions=1",
		"offsets.topic.replication.factor=1",
		"share.coordinator.state.topic.replication.factor=1",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"group.initial.rebalance.delay.ms=0",
	}
	if flushEveryMessage {
		lines = append(lines, "log.flush.interval.messages=1")
	}
	return strings.Join(lines, "\n") + "\n"
}

// kafkaClusterID is a random Kafka cluster id (a UUID in URL-safe base64).
func kafkaClusterID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// startKafka formats a fresh log dir under dir (untimed) and starts the broker.
func startKafka(ctx context.Context, java, jars, dir string, flushEveryMessage bool) (*broker, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	props := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(props, []byte(kafkaProperties(dir, ports[0], ports[1], flushEveryMessage)), 0o644); err != nil {
		return nil, err
	}
	log4j := filepath.Join(dir, "log4j2.properties")
	if err := os.WriteFile(log4j, []byte(kafkaLog4j), 0o644); err != nil {
		return nil, err
	}
	cp := filepath.Join(jars, "*")
	logOpt := "-Dlog4j2.configurationFile=" + log4j
	format := exec.CommandContext(ctx, java, logOpt, "-cp", cp, "kafka.tools.StorageTool",
		"format", "-t", kafkaClusterID(), "-c", props)
	if out, err := format.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("formatting Kafka's log dir: %w\n%s", err, out)
	}
	args := append(append([]string{}, kafkaJVMOpts...), logOpt, "-cp", cp, "kafka.Kafka", props)
	return start(ctx, "kafka", fmt.Sprintf("127.0.0.1:%d", ports[0]), filepath.Join(dir, "kafka.log"), java, args...)
}

// startStrata starts a fresh single Strata node with its defaults.
func startStrata(ctx context.Context, bin, dir string) (*broker, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	kafka := fmt.Sprintf("127.0.0.1:%d", ports[0])
	return start(ctx, "strata", kafka, filepath.Join(dir, "strata.log"), bin, "server",
		"--data-dir", filepath.Join(dir, "data"),
		"--kafka-addr", kafka,
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--controller-addr", fmt.Sprintf("127.0.0.1:%d", ports[2]))
}

// startupBound is how long a broker may take to answer.
const startupBound = 90 * time.Second

// start runs the process with its output in logPath and waits until it answers
// ApiVersions and a Metadata request naming at least one broker.
func start(ctx context.Context, name, addr, logPath, bin string, args ...string) (*broker, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	b := &broker{name: name, addr: addr, cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		b.waitErr = cmd.Wait()
		close(b.exited)
	}()
	deadline := began.Add(startupBound)
	for {
		err := probe(ctx, addr)
		if err == nil {
			b.startup = time.Since(began)
			return b, nil
		}
		select {
		case <-b.exited:
			return nil, fmt.Errorf("%s exited during start-up (%v); see %s", name, b.waitErr, logPath)
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.stop()
			return nil, fmt.Errorf("%s did not answer within %s (last: %v); see %s", name, startupBound, err, logPath)
		}
		time.Sleep(10 * time.Millisecond) // polling a process we cannot be told about
	}
}

// probe sends ApiVersions and Metadata on a fresh connection.
func probe(ctx context.Context, addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(200*time.Millisecond),
		kgo.RequestRetries(0), kgo.RetryTimeout(0))
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
	if len(md.Brokers) == 0 {
		return errors.New("metadata lists no broker")
	}
	return nil
}

// alive reports an error if the process has exited.
func (b *broker) alive() error {
	select {
	case <-b.exited:
		return fmt.Errorf("%s exited (%v); see %s", b.name, b.waitErr, b.logPath)
	default:
		return nil
	}
}

// memory reads VmRSS and VmHWM (peak RSS) of the process, in KiB.
func (b *broker) memory() (rss, peak int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.cmd.Process.Pid))
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

// stop ends the process: SIGTERM, then SIGKILL after a grace period.
func (b *broker) stop() {
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(30 * time.Second):
		b.cmd.Process.Kill()
		<-b.exited
	}
}
