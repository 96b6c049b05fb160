package testcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stopTimeout bounds a clean shutdown (SIGTERM until exit); the nodes' own
// --shutdown-timeout is 20s.
const stopTimeout = 30 * time.Second

// Node is one `strata server` process of a Cluster. Its addresses and
// directories stay the same across restarts.
type Node struct {
	ID             int32
	Host           string // the node's loopback address
	Roles          string // --roles: "broker,controller", "broker" or "controller"
	KafkaAddr      string
	HTTPAddr       string
	ControllerAddr string
	DataDir        string
	LogPath        string // stdout and stderr of every run, appended

	c    *Cluster
	bin  string
	args []string

	mu struct {
		sync.Mutex
		proc   *process // the latest run; nil before the first
		paused bool
		direct *kgo.Client // talks to this node only (Request)
	}
}

// IsBroker reports whether the node serves Kafka clients.
func (n *Node) IsBroker() bool { return n.Roles != "controller" }

// Args returns the command line the node runs with (after the binary).
func (n *Node) Args() []string { return append([]string(nil), n.args...) }

// PID is the process id of the node's latest run, or 0 before the first.
func (n *Node) PID() int {
	if p := n.current(); p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// StartedAt is when the node's latest run was started (its exec returned), or
// the zero time before the first.
func (n *Node) StartedAt() time.Time {
	if p := n.current(); p != nil {
		return p.started
	}
	return time.Time{}
}

// Running reports whether the node's process is alive (paused counts).
func (n *Node) Running() bool {
	p := n.current()
	return p != nil && !p.exited()
}

// Paused reports whether the node is stopped by Pause.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.paused && n.mu.proc != nil && !n.mu.proc.exited()
}

func (n *Node) current() *process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.proc
}

// start runs the binary once more with the node's arguments.
func (n *Node) start() error {
	if p := n.current(); p != nil && !p.exited() {
		return errors.New("already running")
	}
	f, err := os.OpenFile(n.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close() // the child has its own copy
	fmt.Fprintf(f, "=== testcluster %s: starting %s %s\n", stamp(), n.bin, strings.Join(n.args, " "))
	cmd := exec.Command(n.bin, n.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = hermeticEnv(os.Environ())
	p, err := startProcess(cmd)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.mu.proc, n.mu.paused = p, false
	n.mu.Unlock()
	return nil
}

// hermeticEnv drops STRATA_* variables: the server reads its settings from
// them, and a developer's shell must not change a test cluster.
func hermeticEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "STRATA_") {
			out = append(out, kv)
		}
	}
	return out
}

func stamp() string { return time.Now().Format("15:04:05.000") }

// note writes a line about what the test did into the node's log, so the log
// reads as a timeline.
func (n *Node) note(format string, args ...any) {
	f, err := os.OpenFile(n.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "=== testcluster %s: %s\n", stamp(), fmt.Sprintf(format, args...))
}

// running returns the live process or fails the test.
func (n *Node) running(what string) *process {
	n.c.t.Helper()
	p := n.current()
	if p == nil || p.exited() {
		n.c.t.Fatalf("testcluster: %s node %d: it is not running", what, n.ID)
	}
	return p
}

// Kill crashes the node: SIGKILL to its process group, then waits until it is
// gone. Like a crash, it leaves the page cache (and so unsynced writes) intact.
func (n *Node) Kill() {
	n.c.t.Helper()
	p := n.running("killing")
	n.note("SIGKILL")
	if err := p.signal(syscall.SIGKILL, true); err != nil {
		n.c.t.Fatalf("testcluster: killing node %d: %v", n.ID, err)
	}
	if !p.wait(10 * time.Second) {
		n.c.t.Fatalf("testcluster: node %d survived SIGKILL for 10s", n.ID)
	}
}

// Stop shuts the node down cleanly: see Cluster.Stop.
func (n *Node) Stop() {
	n.c.t.Helper()
	n.c.Stop(n)
}

// Pause stops the node's process (SIGSTOP) and returns once the kernel shows it
// stopped: a long GC pause or a stalled VM. Its connections stay open.
func (n *Node) Pause() {
	n.c.t.Helper()
	p := n.running("pausing")
	n.note("SIGSTOP")
	if err := p.signal(syscall.SIGSTOP, false); err != nil {
		n.c.t.Fatalf("testcluster: pausing node %d: %v", n.ID, err)
	}
	if err := p.waitState(true, 5*time.Second); err != nil {
		n.c.t.Fatalf("testcluster: pausing node %d: %v", n.ID, err)
	}
	n.mu.Lock()
	n.mu.paused = true
	n.mu.Unlock()
}

// Resume continues a paused node (SIGCONT) and returns once it runs again.
func (n *Node) Resume() {
	n.c.t.Helper()
	p := n.running("resuming")
	if err := p.signal(syscall.SIGCONT, false); err != nil {
		n.c.t.Fatalf("testcluster: resuming node %d: %v", n.ID, err)
	}
	if err := p.waitState(false, 5*time.Second); err != nil {
		n.c.t.Fatalf("testcluster: resuming node %d: %v", n.ID, err)
	}
	n.note("SIGCONT")
	n.mu.Lock()
	n.mu.paused = false
	n.mu.Unlock()
}

// Restart starts a node that is not running, with the same arguments and data
// dir, and waits until it is ready.
func (n *Node) Restart() {
	n.c.t.Helper()
	n.Start()
	n.WaitReady()
}

// Start starts a node that is not running, with the same arguments and data
// dir, and does not wait for it to be ready: for a node that waits for an
// operator's command before it serves (WaitReady waits for it).
func (n *Node) Start() {
	n.c.t.Helper()
	if err := n.start(); err != nil {
		n.c.t.Fatalf("testcluster: restarting node %d: %v", n.ID, err)
	}
}

// WaitReady waits until the node answers GET /readyz with 200. When it does
// not in time, the test fails with the end of that node's log: the cleanup
// shows every node's log, but a long run's output may be cut before it.
func (n *Node) WaitReady() {
	n.c.t.Helper()
	if err := n.waitReady(time.Now().Add(readyTimeout)); err != nil {
		n.c.t.Fatalf("testcluster: node %d: %v\n%s", n.ID, err, n.logTail())
	}
}

// notReadyLogLines is how much of its log a node that was not ready in time
// shows in the failure.
const notReadyLogLines = 60

// logTail is the end of the node's log, for a failure message.
func (n *Node) logTail() string {
	return fmt.Sprintf("last %d lines of node %d's log (%s):\n%s", notReadyLogLines, n.ID, n.LogPath, tail(n.LogPath, notReadyLogLines))
}

var readyClient = &http.Client{Timeout: 3 * time.Second}

func (n *Node) waitReady(deadline time.Time) error {
	url, hc := "http://"+n.HTTPAddr+"/readyz", readyClient
	if cfg := n.c.opts.readyTLS; cfg != nil {
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		url, hc = "https://"+n.HTTPAddr+"/readyz", &http.Client{Timeout: readyClient.Timeout, Transport: tr}
	}
	last := "no answer yet"
	for {
		p := n.current()
		if p == nil {
			return errors.New("never started")
		}
		if p.exited() {
			return fmt.Errorf("exited while starting (%v); see %s", p.err, n.LogPath)
		}
		resp, err := hc.Get(url)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready in time: GET %s: %s", url, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Request sends req to this node alone, on a connection of a client seeded with
// nothing else, and returns its answer. Safe from any goroutine.
func (n *Node) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	n.mu.Lock()
	if n.mu.direct == nil {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.KafkaAddr), kgo.RequestRetries(0)}, n.c.opts.clientOpts...)...)
		if err != nil {
			n.mu.Unlock()
			return nil, err
		}
		n.mu.direct = cl
	}
	cl := n.mu.direct
	n.mu.Unlock()
	brokers := cl.SeedBrokers()
	if len(brokers) != 1 {
		return nil, fmt.Errorf("node %d: client has %d seed brokers", n.ID, len(brokers))
	}
	return brokers[0].Request(ctx, req)
}

// closeDirect closes the client behind Request.
func (n *Node) closeDirect() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.direct != nil {
		n.mu.direct.Close()
		n.mu.direct = nil
	}
}
