package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strata-stream/strata/internal/vfs"
)

// TestLifecycleStopsNewestFirst: hand-offs run first, newest first, within
// half the budget; then the stops, newest first, a goroutine's step waiting
// for it to return; errors are joined; a second stop does nothing.
func TestLifecycleStopsNewestFirst(t *testing.T) {
	var got []string
	l := lifecycle{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	errA := errors.New("a failed")
	l.onStop("a", func(stopping) error { got = append(got, "stop a"); return errA })
	l.onHandoff("h1", func(s stopping) {
		d, ok := s.handoff.Deadline()
		if !ok || time.Until(d) > 5*time.Second || s.handoff.Err() != nil {
			t.Errorf("hand-off budget: deadline %v (set %v), err %v; want about half of 10s", time.Until(d), ok, s.handoff.Err())
		}
		got = append(got, "handoff h1")
	})
	stopG := make(chan struct{})
	exited := false
	var mu sync.Mutex
	l.goroutine("g", func() {
		<-stopG
		mu.Lock()
		exited = true
		mu.Unlock()
	}, func(stopping) { got = append(got, "stop g"); close(stopG) })
	l.onStop("b", func(stopping) error {
		got = append(got, "stop b")
		return nil
	})
	l.onHandoff("h2", func(stopping) { got = append(got, "handoff h2") })
	l.onStop("c", func(s stopping) error {
		mu.Lock()
		defer mu.Unlock()
		if exited {
			t.Error("goroutine g returned before c, registered after it, stopped")
		}
		got = append(got, "stop c")
		return nil
	})

	err := l.stop(true, true, 10*time.Second)
	if !errors.Is(err, errA) {
		t.Fatalf("stop: %v, want the error of a", err)
	}
	want := []string{"handoff h2", "handoff h1", "stop c", "stop b", "stop g", "stop a"}
	if !slices.Equal(got, want) {
		t.Fatalf("steps ran as %q, want %q", got, want)
	}
	mu.Lock()
	if !exited {
		t.Error("the goroutine's step returned before the goroutine")
	}
	mu.Unlock()
	if err := l.stop(true, true, 10*time.Second); err != nil || len(got) != len(want) {
		t.Fatalf("a second stop ran steps again (%q) or failed (%v)", got[len(want):], err)
	}
}

// TestLifecycleAbortHasNoBudget: an abort gives every step contexts that are
// already done, and says it is not graceful.
func TestLifecycleAbortHasNoBudget(t *testing.T) {
	l := lifecycle{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ran := 0
	check := func(s stopping) {
		ran++
		if s.graceful || s.handoff.Err() == nil || s.drain.Err() == nil {
			t.Errorf("abort: graceful %v, hand-off err %v, drain err %v", s.graceful, s.handoff.Err(), s.drain.Err())
		}
	}
	l.onHandoff("h", check)
	l.onStop("s", func(s stopping) error { check(s); return nil })
	if err := l.stop(false, true, time.Minute); err != nil {
		t.Fatal(err)
	}
	if ran != 2 {
		t.Fatalf("%d steps ran, want 2", ran)
	}
}

// lifecycleLog collects the lifecycle's step names from a node's log, by what
// happened to them.
type lifecycleLog struct {
	mu    sync.Mutex
	steps map[string][]string // message -> step names in order
}

func newLifecycleLog() *lifecycleLog { return &lifecycleLog{steps: map[string][]string{}} }

func (h *lifecycleLog) Enabled(context.Context, slog.Level) bool { return true }

func (h *lifecycleLog) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "lifecycle: ") {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "step" {
			h.mu.Lock()
			h.steps[r.Message] = append(h.steps[r.Message], a.Value.String())
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

func (h *lifecycleLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lifecycleLog) WithGroup(string) slog.Handler      { return h }

func (h *lifecycleLog) get(msg string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.steps[msg])
}

// reversed is s newest first.
func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// checkStoppedInReverse fails the test unless the node stopped exactly what it
// started, newest first, and handed off likewise.
func checkStoppedInReverse(t *testing.T, log *lifecycleLog) (started []string) {
	t.Helper()
	started = log.get("lifecycle: started")
	if got := log.get("lifecycle: stopped"); !slices.Equal(got, reversed(started)) {
		t.Errorf("stopped %q\nwant the reverse of what started: %q", got, reversed(started))
	}
	handoffs := log.get("lifecycle: hand-off registered")
	if got := log.get("lifecycle: handed off"); !slices.Equal(got, reversed(handoffs)) {
		t.Errorf("handed off %q\nwant the reverse of the registration: %q", got, reversed(handoffs))
	}
	return started
}

// TestNodeStopsInReverse: a node's Close stops every component it started,
// newest first: goroutines before what they use, coordinators' loaders
// before the coordinators, the HTTP API's hand-off before the controlled
// shutdown.
func TestNodeStopsInReverse(t *testing.T) {
	log := newLifecycleLog()
	cfg := nodeConfig(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := Start(ctx, cfg, slog.New(log), vfs.Default)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	started := checkStoppedInReverse(t, log)
	stopped := reversed(started)
	for _, c := range []struct{ first, then string }{
		{"kafka server", "replica manager"},
		{"metadata images", "replica manager"},
		{"ISR maintenance", "replica manager"},
		{"group offsets store", "group coordinator"},
		{"transaction state store", "transaction coordinator"},
		{"replica manager", "controller"},
		{"controller", "raft transport"},
		{"http routes", "replica manager"},
		{"controller", "http server"},
	} {
		i, j := slices.Index(stopped, c.first), slices.Index(stopped, c.then)
		if i < 0 || j < 0 || i > j {
			t.Errorf("%q (stopped %d) must stop before %q (stopped %d): %q", c.first, i, c.then, j, stopped)
		}
	}
	if got, want := log.get("lifecycle: handed off"), []string{"http api", "controlled shutdown"}; !slices.Equal(got, want) {
		t.Errorf("handed off %q, want %q", got, want)
	}
}

// TestNodeFailedStartStopsWhatStarted: a start that fails part-way (its admin
// address is taken, the last thing it opens) stops exactly what had started,
// newest first, and leaves nothing behind: no goroutine of its own runs on,
// and a node started next on the same data directory and ports comes up.
func TestNodeFailedStartStopsWhatStarted(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	// Fixed ports for the second start: take free ones, then release them.
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	cfg := nodeConfig(t.TempDir())
	cfg.KafkaAddr, cfg.ControllerAddr = free(), free()
	cfg.AdminAddr = taken.Addr().String()

	log := newLifecycleLog()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leftBefore := goleak.IgnoreCurrent()
	if n, err := Start(ctx, cfg, slog.New(log), vfs.Default); err == nil {
		n.Close()
		t.Fatal("started on a taken admin address")
	} else if !strings.Contains(err.Error(), "admin listener") {
		t.Fatalf("start failed at %v, want at the admin listener", err)
	}
	started := checkStoppedInReverse(t, log)
	for _, name := range []string{"http server", "controller", "replica manager", "kafka server", "broker heartbeats", "http routes"} {
		if !slices.Contains(started, name) {
			t.Errorf("%q never started before the failure: %q", name, started)
		}
	}
	if slices.Contains(started, "admin listener") {
		t.Errorf("the admin listener registered a stop though it never started: %q", started)
	}
	if err := goleak.Find(leftBefore); err != nil {
		t.Errorf("the failed start left goroutines running: %v", err)
	}

	taken.Close()
	n := startNode(t, cfg)
	if n.KafkaAddr() != cfg.KafkaAddr {
		t.Fatalf("restarted on %s, want %s", n.KafkaAddr(), cfg.KafkaAddr)
	}
}
