package interop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/freeport"
	"github.com/strata-stream/strata/internal/server"
	"github.com/strata-stream/strata/internal/vfs"
)

// Environment switches of the suite.
const (
	// envTarget picks the broker: "strata" (default) or "kfake".
	envTarget = "STRATA_INTEROP_TARGET"
)

// target is a running broker the clients talk to.
type target struct {
	name      string
	bootstrap string
	// stop shuts the broker down and reports whether it did so cleanly.
	stop func() error
}

// startTarget starts the broker chosen by STRATA_INTEROP_TARGET, or skips the test.
// The broker is also stopped at cleanup if the test did not get to stop it.
func startTarget(t *testing.T) *target {
	t.Helper()
	var tgt *target
	switch name := os.Getenv(envTarget); name {
	case "kfake":
		tgt = startKfake(t)
	case "", "strata":
		tgt = startStrata(t)
	default:
		t.Fatalf("interop: %s=%q: want strata or kfake", envTarget, name)
	}
	stop := sync.OnceValue(tgt.stop)
	tgt.stop = stop
	t.Cleanup(func() { stop() })
	return tgt
}

func startKfake(t *testing.T) *target {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatalf("starting kfake: %v", err)
	}
	return &target{name: "kfake", bootstrap: c.ListenAddrs()[0], stop: func() error { c.Close(); return nil }}
}

// strataBinary builds cmd/strata once per test binary (see TestMain) and returns its path.
var strataBinary = func() func(t *testing.T) string {
	var (
		once sync.Once
		path string
		err  error
		out  []byte
	)
	return func(t *testing.T) string {
		once.Do(func() {
			path = filepath.Join(toolDir, "strata")
			cmd := exec.Command("go", "build", "-o", path, "./cmd/strata")
			cmd.Dir = ".."
			out, err = cmd.CombinedOutput()
		})
		if err != nil {
			t.Fatalf("building strata: %v\n%s", err, out)
		}
		return path
	}
}()

// startStrata runs a single strata node on free loopback ports, and waits until its
// Kafka listener answers ApiVersions.
func startStrata(t *testing.T) *target { return startStrataWith(t, nil) }

// startStrataWith is startStrata with more server flags; probe are the client
// options (TLS, SASL) the readiness probe needs to reach the Kafka listener.
func startStrataWith(t *testing.T, probe []kgo.Opt, flags ...string) *target {
	dir := t.TempDir()
	bin := strataBinary(t)

	kafkaAddr, httpAddr, controllerAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	logPath := filepath.Join(dir, "strata.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "server", "--node-id", "1", "--data-dir", filepath.Join(dir, "data"),
		"--kafka-addr", kafkaAddr, "--http-addr", httpAddr, "--controller-addr", controllerAddr)
	cmd.Args = append(cmd.Args, flags...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting strata: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logFile.Close() }()

	showLog := func() string {
		b, _ := os.ReadFile(logPath)
		return string(b)
	}
	stop := sync.OnceValue(func() error {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return fmt.Errorf("SIGTERM: %w", err)
		}
		select {
		case err := <-exited:
			if err != nil {
				return fmt.Errorf("strata exited uncleanly after SIGTERM: %w\n%s", err, showLog())
			}
			return nil
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("strata ignored SIGTERM for 30s; killed\n%s", showLog())
		}
	})

	// Stopped at the test's end whoever started it (tests that call startStrata
	// directly leaked the server past the run); an explicit stop comes first.
	t.Cleanup(func() { _ = stop() })
	if err := waitForAPIVersions(kafkaAddr, exited, 60*time.Second, probe...); err != nil {
		stop()
		t.Fatalf("strata never answered ApiVersions on %s: %v\n%s", kafkaAddr, err, showLog())
	}
	return &target{name: "strata", bootstrap: kafkaAddr, stop: stop}
}

// freeAddr returns a loopback address free now, outside the ephemeral range.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// waitForAPIVersions polls addr with ApiVersions until it answers without error, the
// process exits, or the deadline passes.
func waitForAPIVersions(addr string, exited <-chan error, wait time.Duration, opts ...kgo.Opt) error {
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		last = apiVersions(addr, opts...)
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return last
		}
		select {
		case err := <-exited:
			return fmt.Errorf("process exited (%v) while waiting; last probe: %w", err, last)
		case <-tick.C:
		}
	}
}

func apiVersions(addr string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-interop", "0"
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 {
		return fmt.Errorf("ApiVersions error code %d", resp.ErrorCode)
	}
	if len(resp.ApiKeys) == 0 {
		return errors.New("ApiVersions listed no API keys")
	}
	return nil
}

// createTopics creates the topics with 3 partitions and replication factor 1, then
// waits until metadata shows every partition with a leader.
func createTopics(t *testing.T, bootstrap string, partitions int32, topics ...string) {
	t.Helper()
	createTopicsWith(t, bootstrap, partitions, nil, topics...)
}

// createTopicsWith is createTopics with the topic configs configs.
func createTopicsWith(t *testing.T, bootstrap string, partitions int32, configs map[string]*string, topics ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	res, err := adm.CreateTopics(ctx, partitions, 1, configs, topics...)
	if err != nil {
		t.Fatalf("CreateTopics: %v", err)
	}
	for _, r := range res.Sorted() {
		if r.Err != nil {
			t.Fatalf("creating topic %s: %v (%s)", r.Topic, r.Err, r.ErrMessage)
		}
	}

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		md, err := adm.Metadata(ctx, topics...)
		if err == nil && topicsReady(md, partitions, topics) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topics %v not ready with %d led partitions: last metadata error %v", topics, partitions, err)
		case <-tick.C:
		}
	}
}

func topicsReady(md kadm.Metadata, partitions int32, topics []string) bool {
	for _, name := range topics {
		td, ok := md.Topics[name]
		if !ok || td.Err != nil || int32(len(td.Partitions)) != partitions {
			return false
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
	}
	return true
}

// lastLines keeps the end of a client's stderr for a failure message.
func lastLines(b []byte) string {
	const max = 4000
	b = bytes.TrimSpace(b)
	if len(b) > max {
		return "..." + string(b[len(b)-max:])
	}
	return string(b)
}

// startNodeInProcess starts one Strata node in this process, its data under dir,
// on ephemeral ports, with the config set changes; it is closed at the test's end.
func startNodeInProcess(t *testing.T, ctx context.Context, dir string, set func(*config.Config)) *server.Node {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.KafkaAddr, cfg.HTTPAddr, cfg.ControllerAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.ShutdownTimeout = 5 * time.Second
	set(&cfg)
	n, err := server.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), vfs.Default)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}
