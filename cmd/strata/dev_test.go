package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestPlanDevLayout(t *testing.T) {
	l, err := planDevLayout(3, "127.0.0.1", 19092, "id")
	if err != nil {
		t.Fatal(err)
	}
	want := []devNode{
		{1, "127.0.0.1:19092", "127.0.0.1:19192", "127.0.0.1:19292"},
		{2, "127.0.0.1:19093", "127.0.0.1:19193", "127.0.0.1:19293"},
		{3, "127.0.0.1:19094", "127.0.0.1:19194", "127.0.0.1:19294"},
	}
	if fmt.Sprint(l.Nodes) != fmt.Sprint(want) || l.bootstrap() != "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094" {
		t.Fatalf("layout %+v", l)
	}
	args := strings.Join(l.serverArgs(1, "/b", "debug", []string{"--log-level", "warn"}), " ")
	for _, w := range []string{
		"server --node-id 2 --data-dir /b/node-2 --kafka-addr 127.0.0.1:19093",
		"--controllers 1@127.0.0.1:19192,2@127.0.0.1:19193,3@127.0.0.1:19194 --cluster-id id",
		"--shutdown-timeout 10s --log-level warn", // the user's flags come last and win
	} {
		if !strings.Contains(args, w) {
			t.Errorf("args %q lack %q", args, w)
		}
	}

	free, err := planDevLayout(4, "127.0.0.1", 0, "id")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, n := range free.Nodes {
		for _, a := range []string{n.Kafka, n.Controller, n.HTTP} {
			if seen[a] || strings.HasSuffix(a, ":0") {
				t.Fatalf("free layout repeats or lacks a port: %+v", free.Nodes)
			}
			seen[a] = true
		}
	}

	for _, tc := range []struct {
		nodes, port int
		host        string
	}{
		{0, 0, "127.0.0.1"},
		{100, 0, "127.0.0.1"},
		{3, -1, "127.0.0.1"},
		{3, 65400, "127.0.0.1"},
		{3, 0, ""},
	} {
		if _, err := planDevLayout(tc.nodes, tc.host, tc.port, "id"); err == nil {
			t.Errorf("planDevLayout(%d, %q, %d): no error", tc.nodes, tc.host, tc.port)
		}
	}
}

func TestDevLayoutIsKept(t *testing.T) {
	dir := t.TempDir()
	f := &devClusterFlags{nodes: 3, basePort: 0, advertise: "127.0.0.1"}
	none := func(string) bool { return false }
	first, err := devLayoutFor(dir, f, none)
	if err != nil {
		t.Fatal(err)
	}
	again, err := devLayoutFor(dir, f, none)
	if err != nil || fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("second start: %+v, %v; want the stored %+v", again, err, first)
	}
	for _, tc := range []struct {
		flag string
		set  func(*devClusterFlags)
	}{
		{"nodes", func(f *devClusterFlags) { f.nodes = 5 }},
		{"base-port", func(f *devClusterFlags) { f.basePort = 19092 }},
		{"advertise", func(f *devClusterFlags) { f.advertise = "127.0.0.2" }},
	} {
		g := *f
		tc.set(&g)
		if _, err := devLayoutFor(dir, &g, func(name string) bool { return name == tc.flag }); err == nil || !strings.Contains(err.Error(), "--"+tc.flag) {
			t.Errorf("--%s differing from the stored layout: %v", tc.flag, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, devLayoutFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := devLayoutFor(dir, f, none); err == nil {
		t.Fatal("an empty layout file was accepted")
	}
}

func TestLinePrefixer(t *testing.T) {
	var out bytes.Buffer
	var mu sync.Mutex
	p := &linePrefixer{w: &out, mu: &mu, prefix: "node 1 | "}
	for _, chunk := range []string{"a", "b\nc", "\n", "d\ne\n", "tail"} {
		if n, err := p.Write([]byte(chunk)); err != nil || n != len(chunk) {
			t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
		}
	}
	if want := "node 1 | ab\nnode 1 | c\nnode 1 | d\nnode 1 | e\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}

// processGone reports whether pid no longer exists (a zombie counts as gone:
// it runs no code, and only its parent can reap it).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err == nil {
		i := bytes.LastIndexByte(b, ')')
		return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// TestDevCluster runs `strata dev cluster --nodes 3` as a shell would (this test
// binary re-executes main, and so do the nodes it starts), uses the cluster
// through the bootstrap list it prints, then sends it SIGTERM: it must stop
// every node and leave no process behind.
func TestDevCluster(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "dev", "cluster", "--nodes", "3", "--base-dir", dir,
		"--", "--broker-heartbeat-interval", "100ms", "--broker-session-timeout", "2s", "--shutdown-timeout", "5s")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var outMu sync.Mutex
	var out strings.Builder
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			outMu.Lock()
			out.WriteString(sc.Text() + "\n")
			outMu.Unlock()
			select {
			case lines <- sc.Text():
			default:
			}
		}
		exited <- cmd.Wait()
	}()
	output := func() string {
		outMu.Lock()
		defer outMu.Unlock()
		return out.String()
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill() // its nodes get SIGTERM (Pdeathsig)
				<-exited
			}
		}
	})

	// The table of nodes, then the bootstrap list once every node is ready.
	var pids []int
	var bootstrap string
	deadline := time.After(90 * time.Second)
	for bootstrap == "" {
		select {
		case line := <-lines:
			f := strings.Fields(line)
			if len(f) == 6 && f[0] == strconv.Itoa(len(pids)+1) {
				pid, err := strconv.Atoi(f[1])
				if err != nil {
					t.Fatalf("node line %q: %v", line, err)
				}
				pids = append(pids, pid)
			}
			if b, ok := strings.CutPrefix(line, "bootstrap servers: "); ok {
				bootstrap = b
			}
		case err := <-exited:
			t.Fatalf("dev cluster exited early: %v\nstdout:\n%s\nstderr:\n%s", err, output(), stderr.String())
		case <-deadline:
			t.Fatalf("no bootstrap list after 90s\nstdout:\n%s\nstderr:\n%s", output(), stderr.String())
		}
	}
	if len(pids) != 3 || len(strings.Split(bootstrap, ",")) != 3 {
		t.Fatalf("pids %v, bootstrap %q\n%s", pids, bootstrap, output())
	}

	// Use the cluster through what it printed.
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.DefaultProduceTopic("dev-demo"),
		kgo.ConsumeTopics("dev-demo"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	minISR := "2"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": &minISR}, "dev-demo"); err != nil {
		t.Fatalf("creating a topic with three replicas: %v", err)
	}
	var sent []*kgo.Record
	for i := range 30 {
		sent = append(sent, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%4), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := cl.ProduceSync(ctx, sent...).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
	got := map[string]bool{}
	for len(got) < len(sent) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", len(got), len(sent))
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	cl.Close()

	// SIGTERM: every node stops and the command exits.
	stopped = true
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var exitErr error
	select {
	case exitErr = <-exited:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("dev cluster still running 60s after SIGTERM\n%s", output())
	}
	for _, pid := range pids {
		if !processGone(pid) {
			t.Errorf("node process %d outlived the dev cluster", pid)
		}
	}
	for i := 1; i <= 3; i++ {
		if !strings.Contains(output(), fmt.Sprintf("node %d stopped", i)) {
			t.Errorf("no stop report for node %d", i)
		}
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("node-%d.log", i))); err != nil {
			t.Error(err)
		}
	}
	if exitErr != nil {
		t.Fatalf("dev cluster: %v\nstdout:\n%s\nstderr:\n%s", exitErr, output(), stderr.String())
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", output(), stderr.String())
	}
}
