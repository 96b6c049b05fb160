package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/goleak"

	"github.com/strata-stream/strata/internal/cli"
	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/server"
	"github.com/strata-stream/strata/internal/vfs"
)

// runMainEnv makes the test binary run main() instead of the tests: the exit-status
// tests start it as a subprocess to see what a shell would see.
const runMainEnv = "STRATA_CLI_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Args = append([]string{"strata"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	code := m.Run()
	shared.close()
	if code == 0 {
		// testcluster starts its node processes from one goroutine kept for
		// the life of the test process (see its spawner).
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/strata-stream/strata/internal/testcluster.startProcess.func1.1")); err != nil {
			fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// sharedNode is the one in-process node every test talks to: a node takes seconds to
// start.
type sharedNode struct {
	once sync.Once
	dir  string
	node *server.Node
	err  error
}

var shared sharedNode

func (s *sharedNode) close() {
	if s.node != nil {
		s.node.Close()
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// broker returns the Kafka address of the shared node, starting it on first use.
func broker(t *testing.T) string {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "strata-cli-test-")
		if shared.err != nil {
			return
		}
		cfg := config.Default()
		cfg.DataDir = shared.dir
		cfg.KafkaAddr = "127.0.0.1:0"
		cfg.HTTPAddr = "127.0.0.1:0"
		cfg.ControllerAddr = "127.0.0.1:0"
		cfg.RemoteStorage = "file://" + filepath.Join(shared.dir, "remote")
		cfg.RemoteUploadInterval = 50 * time.Millisecond
		cfg.LogCleanupInterval = 100 * time.Millisecond
		cfg.ShutdownTimeout = 5 * time.Second
		logger := slog.New(slog.NewTextHandler(io.Discard, nil))
		if os.Getenv("STRATA_TEST_LOG") != "" {
			logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		shared.node, shared.err = server.Start(ctx, cfg, logger, vfs.Default)
	})
	if shared.err != nil {
		t.Fatalf("starting the shared node: %v", shared.err)
	}
	return shared.node.KafkaAddr()
}

// result is what one command invocation printed and its exit status.
type result struct {
	stdout, stderr string
	code           int
	err            error
}

func (r result) String() string {
	return fmt.Sprintf("exit %d, err %v\nstdout:\n%s\nstderr:\n%s", r.code, r.err, r.stdout, r.stderr)
}

// invocation configures one in-process run of the client commands.
type invocation struct {
	ctx            context.Context // nil: a minute
	stdin          string
	stdinReader    io.Reader // instead of stdin
	env            map[string]string
	stdinTerminal  bool
	stdoutTerminal bool
	stderrTerminal bool
}

// testRoot is the command tree main.go builds, with the client commands bound to env.
func testRoot(env *clientEnv) *cobra.Command {
	root := &cobra.Command{Use: "strata", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newTopicCmd(env), newProduceCmd(env), newConsumeCmd(env), newConsumerGroupCmd(env), newClusterCmd(env), newTxnCmd(env), newUserCmd(env), newACLCmd(env), newTokenCmd(env), newBenchCmd(env))
	return root
}

func (in invocation) run(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	var stdin io.Reader = strings.NewReader(in.stdin)
	if in.stdinReader != nil {
		stdin = in.stdinReader
	}
	env := &clientEnv{
		stdin:          stdin,
		stdout:         &stdout,
		stderr:         &stderr,
		getenv:         func(k string) string { return in.env[k] },
		stdinTerminal:  in.stdinTerminal,
		stdoutTerminal: in.stdoutTerminal,
		stderrTerminal: in.stderrTerminal,
	}
	root := testRoot(env)
	root.SetArgs(args)
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetIn(env.stdin)
	ctx := in.ctx
	if ctx == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
	}
	err := root.ExecuteContext(ctx)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: cli.ExitCode(err), err: err}
}

// runAt runs a client command against the brokers at addr (found through
// STRATA_BROKERS), with stdin.
func runAt(t *testing.T, addr, stdin string, args ...string) result {
	t.Helper()
	return invocation{stdin: stdin, env: map[string]string{cli.BrokersEnv: addr}}.run(t, args...)
}

// run runs a client command against the shared node.
func run(t *testing.T, args ...string) result {
	t.Helper()
	return runAt(t, broker(t), "", args...)
}

// runIn is run with stdin.
func runIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return runAt(t, broker(t), stdin, args...)
}

// mustRunAt runs a command that has to succeed.
func mustRunAt(t *testing.T, addr string, args ...string) result {
	t.Helper()
	r := runAt(t, addr, "", args...)
	if r.code != 0 {
		t.Fatalf("strata %s: %s", strings.Join(args, " "), r)
	}
	return r
}

func mustRun(t *testing.T, args ...string) result {
	t.Helper()
	return mustRunAt(t, broker(t), args...)
}

// mustJSONAt runs a command with --output json that has to succeed and decodes its
// output into v.
func mustJSONAt(t *testing.T, addr string, v any, args ...string) {
	t.Helper()
	r := mustRunAt(t, addr, append(args, "--output", "json")...)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("strata %s: output is not JSON: %v\n%s", strings.Join(args, " "), err, r.stdout)
	}
}

func mustJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	mustJSONAt(t, broker(t), v, args...)
}

// topics numbers topic names: tests may run more than once against one node (-count).
var topics atomic.Int64

// topicName is a topic name unique to this run of the test.
func topicName(t *testing.T) string {
	name := strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name()))
	return fmt.Sprintf("%s-%d", name, topics.Add(1))
}
