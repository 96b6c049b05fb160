package testcluster

import (
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) { Main(m) }

func TestLoopbackHosts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		canBind  bool
		want     []string
		distinct bool
	}{
		{"distinct", true, []string{"127.0.0.11", "127.0.0.12", "127.0.0.13"}, true},
		{"fallback", false, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, distinct := loopbackHosts(3, func(string) bool { return tc.canBind })
			if !slices.Equal(got, tc.want) || distinct != tc.distinct {
				t.Fatalf("got %v distinct=%v, want %v distinct=%v", got, distinct, tc.want, tc.distinct)
			}
		})
	}
}

func TestFreePortsAreDistinctOnOneHost(t *testing.T) {
	ports, err := freePorts([]string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, ps := range ports {
		if len(ps) != 3 {
			t.Fatalf("got %v", ports)
		}
		for _, p := range ps {
			if p <= 0 || seen[p] {
				t.Fatalf("port %d repeated or invalid in %v", p, ports)
			}
			seen[p] = true
		}
	}
}

func TestHermeticEnv(t *testing.T) {
	got := hermeticEnv([]string{"PATH=/bin", "STRATA_NODE_ID=7", "HOME=/root", "STRATA_CONFIG=x"})
	if want := []string{"PATH=/bin", "HOME=/root"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestTail(t *testing.T) {
	path := t.TempDir() + "/log"
	if err := os.WriteFile(path, []byte("a\nb\nc\nd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := tail(path, 2); got != "c\nd\n" {
		t.Fatalf("tail = %q", got)
	}
}

// alive reports whether a process with pid exists (and is not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err == nil {
		i := strings.LastIndexByte(string(b), ')')
		return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
	}
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// TestNodeLifecycle drives one node through every lifecycle method, then checks
// that the cleanup of the (sub)test leaves no process behind.
func TestNodeLifecycle(t *testing.T) {
	var pids []int
	t.Run("cluster", func(t *testing.T) {
		c := Start(t, 1)
		n := c.Node(1)
		pids = append(pids, n.PID())
		if !strings.HasPrefix(n.KafkaAddr, n.Host+":") || n.Host == "" {
			t.Fatalf("kafka address %s is not on host %q", n.KafkaAddr, n.Host)
		}
		id, _, err := c.ActiveController(context.Background())
		if err != nil || id != 1 {
			t.Fatalf("active controller = %d, %v; want 1", id, err)
		}

		n.Pause()
		if !n.Paused() || !n.Running() {
			t.Fatal("paused node: want Paused and Running")
		}
		short := &http.Client{Timeout: 300 * time.Millisecond}
		if resp, err := short.Get("http://" + n.HTTPAddr + "/readyz"); err == nil {
			resp.Body.Close()
			t.Fatalf("a paused node answered /readyz with %d", resp.StatusCode)
		}
		n.Resume()
		n.WaitReady()

		n.Stop() // fails the test unless it exits 0
		if n.Running() {
			t.Fatal("stopped node still running")
		}
		n.Restart()
		pids = append(pids, n.PID())

		// Data written before a crash is there after the restart.
		cl := c.Client(kgo.DefaultProduceTopic("lifecycle"), kgo.AllowAutoTopicCreation())
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("kept")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		n.Kill()
		if n.Running() {
			t.Fatal("killed node still running")
		}
		n.Restart()
		pids = append(pids, n.PID())
		end, err := c.Admin().ListEndOffsets(context.Background(), "lifecycle")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := end.Lookup("lifecycle", 0); o.Offset != 1 {
			t.Fatalf("end offset after a crash and restart = %+v, want 1", o)
		}
		if !strings.Contains(tail(n.LogPath, 1000), "=== testcluster") {
			t.Fatal("the node's log does not record what the test did")
		}
	})
	for _, pid := range pids {
		if pid == 0 || alive(pid) {
			t.Errorf("process %d still alive after the cleanup", pid)
		}
	}
}
