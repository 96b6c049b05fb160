package main

// `strata dev cluster`: a local multi-node cluster for development. Each node is
// a separate `strata server` process re-executed from this binary, with its own
// data dir and log file under one base dir:
//
//	<base-dir>/cluster.json   the layout (cluster id, every node's addresses), so
//	                          that the same base dir starts the same cluster again
//	<base-dir>/node-N/        node N's --data-dir
//	<base-dir>/node-N.log     node N's stdout and stderr, appended across runs
//
// The command owns its children: they run in their own process groups (a Ctrl-C
// in the terminal reaches only this process, which stops them in order) and get
// SIGTERM if this process dies (Pdeathsig).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

const (
	devMaxNodes     = 99
	devReadyTimeout = 60 * time.Second
	// devStopTimeout covers the nodes' --shutdown-timeout (10s unless overridden).
	devStopTimeout = 40 * time.Second
)

type devClusterFlags struct {
	nodes      int
	baseDir    string
	basePort   int
	advertise  string
	logLevel   string
	streamLogs bool
}

func devCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:                        "dev",
		Short:                      "Developer tools: run a local multi-node cluster",
		RunE:                       unknownSubcommand(processEnv()),
		SuggestionsMinimumDistance: 2,
	}
	cmd.AddCommand(devClusterCmd())
	return cmd
}

func devClusterCmd() *cobra.Command {
	f := &devClusterFlags{}
	cmd := &cobra.Command{
		Use:   "cluster [-- SERVER FLAGS...]",
		Short: "Run a local N-node cluster, one strata server process per node, until interrupted",
		Long: `Run a local cluster of --nodes nodes, each a separate "strata server" process
(every node a broker and a controller voter) with its own data dir and log file
under --base-dir. It waits until every node is ready, prints how to connect, and on
Ctrl-C or SIGTERM stops every node cleanly.

Ports: with --base-port P node N listens on P+N-1 (Kafka), P+100+N-1 (controller)
and P+200+N-1 (HTTP); without it, on free ports. Nodes listen on and advertise
--advertise. Without --base-dir the cluster lives in a temporary directory that is
removed when it stops; with one it is kept, and running the command again on the
same --base-dir restarts the same cluster with its data.

Nodes get --shutdown-timeout 10s. Flags after -- are passed to every "strata
server" after the ones the command sets, so they override them (see strata server
--help).`,
		Example: `  strata dev cluster
  strata dev cluster --nodes 5 --base-dir ./dev --base-port 19092
  strata dev cluster --stream-logs -- --broker-session-timeout 3s --log-level debug`,
	}
	fl := cmd.Flags()
	fl.IntVarP(&f.nodes, "nodes", "n", 3, "number of nodes (1-99)")
	fl.StringVar(&f.baseDir, "base-dir", "", "directory for data dirs and logs (default: a temporary one, removed on exit)")
	fl.IntVar(&f.basePort, "base-port", 0, "first Kafka port (default: free ports)")
	fl.StringVar(&f.advertise, "advertise", "127.0.0.1", "host every node listens on and advertises to clients")
	fl.StringVar(&f.logLevel, "log-level", "info", "nodes' log level: debug, info, warn or error")
	fl.BoolVar(&f.streamLogs, "stream-logs", false, "also copy the nodes' logs to stderr, each line prefixed with its node")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if dash := cmd.ArgsLenAtDash(); (dash < 0 && len(args) > 0) || dash > 0 {
			return fmt.Errorf("unexpected argument %q: server flags go after --", args[0])
		}
		return runDevCluster(cmd.Context(), f, cmd.Flags().Changed, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// devLayout is where a dev cluster's nodes live; it is kept in
// <base-dir>/cluster.json.
type devLayout struct {
	ClusterID string    `json:"cluster_id"`
	Host      string    `json:"host"`
	BasePort  int       `json:"base_port"` // 0: the ports were picked free
	Nodes     []devNode `json:"nodes"`
}

type devNode struct {
	ID         int32  `json:"id"`
	Kafka      string `json:"kafka"`
	Controller string `json:"controller"`
	HTTP       string `json:"http"`
}

// planDevLayout assigns addresses to n nodes on host: from basePort (Kafka
// basePort+i, controller +100, HTTP +200) or, with basePort 0, free ports.
func planDevLayout(n int, host string, basePort int, clusterID string) (devLayout, error) {
	if n < 1 || n > devMaxNodes {
		return devLayout{}, fmt.Errorf("--nodes %d: want 1 to %d", n, devMaxNodes)
	}
	if host == "" {
		return devLayout{}, errors.New("--advertise must not be empty")
	}
	if basePort < 0 || basePort > 65535-200-(n-1) {
		return devLayout{}, fmt.Errorf("--base-port %d: want 1 to %d for %d nodes (0: free ports)", basePort, 65535-200-(n-1), n)
	}
	l := devLayout{ClusterID: clusterID, Host: host, BasePort: basePort}
	var ports []int
	if basePort == 0 {
		var err error
		if ports, err = freeDevPorts(host, 3*n); err != nil {
			return devLayout{}, fmt.Errorf("finding free ports on %s: %w", host, err)
		}
	}
	for i := range n {
		kafka, ctrl, web := basePort+i, basePort+100+i, basePort+200+i
		if basePort == 0 {
			kafka, ctrl, web = ports[3*i], ports[3*i+1], ports[3*i+2]
		}
		l.Nodes = append(l.Nodes, devNode{
			ID:         int32(i + 1),
			Kafka:      net.JoinHostPort(host, strconv.Itoa(kafka)),
			Controller: net.JoinHostPort(host, strconv.Itoa(ctrl)),
			HTTP:       net.JoinHostPort(host, strconv.Itoa(web)),
		})
	}
	return l, nil
}

// freeDevPorts returns k distinct ports nobody listens on at host right now.
func freeDevPorts(host string, k int) ([]int, error) {
	var ports []int
	for range k {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		defer ln.Close() // held until all are picked, so they differ
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// serverArgs is node i's `strata server` command line.
func (l devLayout) serverArgs(i int, baseDir, logLevel string, extra []string) []string {
	var voters []string
	for _, n := range l.Nodes {
		voters = append(voters, fmt.Sprintf("%d@%s", n.ID, n.Controller))
	}
	n := l.Nodes[i]
	return append([]string{"server",
		"--node-id", strconv.Itoa(int(n.ID)),
		"--data-dir", filepath.Join(baseDir, fmt.Sprintf("node-%d", n.ID)),
		"--kafka-addr", n.Kafka,
		"--controller-addr", n.Controller,
		"--http-addr", n.HTTP,
		"--controllers", strings.Join(voters, ","),
		"--cluster-id", l.ClusterID,
		"--log-level", logLevel,
		"--shutdown-timeout", "10s",
	}, extra...)
}

func (l devLayout) bootstrap() string {
	var addrs []string
	for _, n := range l.Nodes {
		addrs = append(addrs, n.Kafka)
	}
	return strings.Join(addrs, ",")
}

const devLayoutFile = "cluster.json"

// devLayoutFor returns the layout stored in baseDir, checked against the flags
// the user gave, or plans and stores a new one.
func devLayoutFor(baseDir string, f *devClusterFlags, changed func(string) bool) (devLayout, error) {
	path := filepath.Join(baseDir, devLayoutFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		id := make([]byte, 6)
		if _, err := rand.Read(id); err != nil {
			return devLayout{}, err
		}
		l, err := planDevLayout(f.nodes, f.advertise, f.basePort, "strata-dev-"+hex.EncodeToString(id))
		if err != nil {
			return devLayout{}, err
		}
		b, err := json.MarshalIndent(l, "", "  ")
		if err != nil {
			return devLayout{}, err
		}
		return l, os.WriteFile(path, append(b, '\n'), 0o644)
	}
	if err != nil {
		return devLayout{}, err
	}
	var l devLayout
	if err := json.Unmarshal(b, &l); err != nil || len(l.Nodes) == 0 || l.ClusterID == "" {
		return devLayout{}, fmt.Errorf("%s is not a dev cluster layout (%v)", path, err)
	}
	mismatch := func(flag string, stored, given any) error {
		return fmt.Errorf("%s holds a cluster with %s %v, not %v: leave the flag out or use another --base-dir", path, flag, stored, given)
	}
	switch {
	case changed("nodes") && f.nodes != len(l.Nodes):
		return devLayout{}, mismatch("--nodes", len(l.Nodes), f.nodes)
	case changed("base-port") && f.basePort != l.BasePort:
		return devLayout{}, mismatch("--base-port", l.BasePort, f.basePort)
	case changed("advertise") && f.advertise != l.Host:
		return devLayout{}, mismatch("--advertise", l.Host, f.advertise)
	}
	return l, nil
}

// devProc is one running node.
type devProc struct {
	node devNode
	log  string
	cmd  *exec.Cmd
	done chan struct{} // closed once reaped; err is then set
	err  error
}

func (p *devProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func runDevCluster(ctx context.Context, f *devClusterFlags, changed func(string) bool, extra []string, stdout, stderr io.Writer) (err error) {
	// Pdeathsig fires when the thread that started a child exits: keep this
	// goroutine on one thread until every child is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	baseDir, temporary := f.baseDir, f.baseDir == ""
	if temporary {
		if baseDir, err = os.MkdirTemp("", "strata-dev-"); err != nil {
			return err
		}
		defer os.RemoveAll(baseDir)
	} else if err := os.MkdirAll(baseDir, 0o755); err != nil {
		return err
	}
	if baseDir, err = filepath.Abs(baseDir); err != nil {
		return err
	}
	layout, err := devLayoutFor(baseDir, f, changed)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary to run the nodes: %w", err)
	}

	var logMu sync.Mutex // serialises prefixed lines on stderr
	procs := make([]*devProc, len(layout.Nodes))
	defer func() {
		if stopErr := stopDevNodes(procs, stdout); err == nil {
			err = stopErr
		}
	}()
	started := time.Now()
	for i, n := range layout.Nodes {
		p := &devProc{node: n, log: filepath.Join(baseDir, fmt.Sprintf("node-%d.log", n.ID)), done: make(chan struct{})}
		logFile, err := os.OpenFile(p.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		p.cmd = exec.Command(exe, layout.serverArgs(i, baseDir, f.logLevel, extra)...)
		var out io.Writer = logFile
		if f.streamLogs {
			out = io.MultiWriter(logFile, &linePrefixer{w: stderr, mu: &logMu, prefix: fmt.Sprintf("node %d | ", n.ID)})
		}
		p.cmd.Stdout, p.cmd.Stderr = out, out
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		err = p.cmd.Start()
		logFile.Close() // the child (or the copying goroutine) has its own
		if err != nil {
			return fmt.Errorf("starting node %d: %w", n.ID, err)
		}
		procs[i] = p
		go func() {
			p.err = p.cmd.Wait()
			close(p.done)
		}()
	}

	fmt.Fprintf(stdout, "strata dev cluster: %d nodes, cluster id %s\n", len(layout.Nodes), layout.ClusterID)
	if temporary {
		fmt.Fprintf(stdout, "data and logs in %s (temporary: removed on exit; --base-dir keeps them)\n\n", baseDir)
	} else {
		fmt.Fprintf(stdout, "data and logs in %s\n\n", baseDir)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "node\tpid\tkafka\tcontroller\thttp\tlog")
	for _, p := range procs {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\thttp://%s\t%s\n", p.node.ID, p.cmd.Process.Pid, p.node.Kafka, p.node.Controller, p.node.HTTP, p.log)
	}
	tw.Flush()

	if err := waitDevReady(ctx, procs); err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while starting: the deferred stop says the rest
		}
		return err
	}
	fmt.Fprintf(stdout, "\nall %d nodes ready in %v\n\n", len(procs), time.Since(started).Round(100*time.Millisecond))
	fmt.Fprintf(stdout, "bootstrap servers: %s\n", layout.bootstrap())
	fmt.Fprintf(stdout, "console:           http://%s/console/\n\n", layout.Nodes[0].HTTP)
	fmt.Fprintf(stdout, "try:\n  export STRATA_BROKERS=%s\n", layout.bootstrap())
	fmt.Fprintf(stdout, "  strata cluster status\n")
	fmt.Fprintf(stdout, "  strata topic create demo --partitions 3 --replication-factor %d -c min.insync.replicas=%d\n", min(3, len(procs)), min(2, len(procs)))
	fmt.Fprintf(stdout, "  printf 'a\\nb\\nc\\n' | strata produce demo\n")
	fmt.Fprintf(stdout, "  strata consume demo\n\n")
	fmt.Fprintf(stdout, "Ctrl-C stops every node.\n")

	// Run until interrupted; a node that dies on its own is reported, the rest
	// keep running.
	exits := make(chan *devProc, len(procs))
	for _, p := range procs {
		go func() {
			select {
			case <-p.done:
				exits <- p
			case <-ctx.Done():
			}
		}()
	}
	for alive := len(procs); alive > 0; alive-- {
		select {
		case <-ctx.Done():
			return nil
		case p := <-exits:
			fmt.Fprintf(stdout, "node %d exited unexpectedly (%v); see %s\n", p.node.ID, p.err, p.log)
		}
	}
	return errors.New("every node has exited")
}

// waitDevReady polls every node's /readyz until it answers 200.
func waitDevReady(ctx context.Context, procs []*devProc) error {
	client := &http.Client{Timeout: 3 * time.Second}
	deadline := time.Now().Add(devReadyTimeout)
	for _, p := range procs {
		for {
			if p.exited() {
				return fmt.Errorf("node %d exited while starting (%v); see %s", p.node.ID, p.err, p.log)
			}
			resp, err := client.Get("http://" + p.node.HTTP + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node %d not ready after %v; see %s", p.node.ID, devReadyTimeout, p.log)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// stopDevNodes sends SIGTERM to every running node at once, waits for each, and
// kills (SIGKILL) any that outlives devStopTimeout or all of them on another
// Ctrl-C.
func stopDevNodes(procs []*devProc, stdout io.Writer) error {
	var running []*devProc
	for _, p := range procs {
		if p != nil && !p.exited() {
			running = append(running, p)
		}
	}
	if len(running) == 0 {
		return nil
	}
	fmt.Fprintf(stdout, "\nstopping %d nodes (Ctrl-C again kills them)\n", len(running))
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt)
	defer signal.Stop(again)
	for _, p := range running {
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.NewTimer(devStopTimeout)
	defer deadline.Stop()
	var errs []error
	for _, p := range running {
		select {
		case <-p.done:
		case <-deadline.C:
			killDevNodes(running)
			<-p.done
		case <-again:
			killDevNodes(running)
			<-p.done
		}
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			errs = append(errs, fmt.Errorf("node %d: %v; see %s", p.node.ID, p.err, p.log))
			fmt.Fprintf(stdout, "node %d stopped with %v; see %s\n", p.node.ID, p.err, p.log)
			continue
		}
		fmt.Fprintf(stdout, "node %d stopped\n", p.node.ID)
	}
	return errors.Join(errs...)
}

// killDevNodes sends SIGKILL to the process group of every node still running.
func killDevNodes(procs []*devProc) {
	for _, p := range procs {
		if !p.exited() {
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}

// linePrefixer writes whole lines to w, each starting with prefix; mu is shared
// by every prefixer on the same w so lines never interleave.
type linePrefixer struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix string
	buf    []byte // an unfinished line
}

func (l *linePrefixer) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	var out []byte
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		out = append(out, l.prefix...)
		out = append(out, l.buf[:i+1]...)
		l.buf = l.buf[i+1:]
	}
	if len(out) == 0 {
		return len(p), nil
	}
	l.buf = append([]byte(nil), l.buf...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
