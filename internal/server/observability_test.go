package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHealthEndpoints: /healthz answers while the process runs; /readyz only while
// the node is started, registered and caught up with its metadata.
func TestHealthEndpoints(t *testing.T) {
	n := startNode(t, nodeConfig(t.TempDir()))
	base := "http://" + n.HTTPAddr()
	if status, body := httpGet(t, base+"/healthz"); status != http.StatusOK || body != "ok\n" {
		t.Fatalf("healthz: %d %q", status, body)
	}
	if status, body := httpGet(t, base+"/readyz"); status != http.StatusOK || body != "ready\n" {
		t.Fatalf("readyz on a started node: %d %q", status, body)
	}
	routes := n.httpRoutes()
	readyz := func() (int, string) {
		rec := httptest.NewRecorder()
		routes.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	n.ready.Store(false) // as during Start and Close
	if status, body := readyz(); status != http.StatusServiceUnavailable || !strings.Contains(body, "starting or stopping") {
		t.Fatalf("readyz while not started: %d %q", status, body)
	}
	n.ready.Store(true)
	if status, _ := readyz(); status != http.StatusOK {
		t.Fatalf("readyz after recovering: %d", status)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if status, _ := readyz(); status != http.StatusServiceUnavailable {
		t.Fatalf("readyz after Close: %d", status)
	}
}

// TestHealthWhileStarting: the HTTP listener is bound before the node waits
// for its controller quorum: /healthz answers at once, /readyz and every
// other route 503 with what the start waits for (here a broker-only node
// registering with a voter that is not there), and a start given up closes
// the listener. The old start bound it last, so a node stuck in its start
// (TestPromotedBrokerOnlyRestartsAsActiveController) refused connections
// like one that had died.
func TestHealthWhileStarting(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.NodeID, cfg.Roles, cfg.ClusterID = 4, "broker", "c"
	cfg.HTTPAddr, cfg.KafkaAddr = freeAddr(t), freeAddr(t)
	cfg.Controllers = "1@" + freeAddr(t) // nothing listens there
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		n, err := Start(ctx, cfg, testLogger(), vfs.Default)
		if err == nil {
			n.Close()
			err = errors.New("started without a controller quorum")
		}
		done <- err
	}()
	c := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, string) {
		resp, err := c.Get("http://" + cfg.HTTPAddr + path)
		if err != nil {
			return -1, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var last string
	wait.For(t, "/readyz to say that the node registers", func() bool {
		status, body := get("/readyz")
		last = fmt.Sprint(status, " ", body)
		return status == http.StatusServiceUnavailable && strings.Contains(body, "starting: registering broker 4")
	})
	t.Logf("/readyz while starting: %s", strings.TrimSpace(last))
	if status, body := get("/healthz"); status != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz while starting: %d %q", status, body)
	}
	if status, body := get("/metrics"); status != http.StatusServiceUnavailable || !strings.Contains(body, "registering broker 4") {
		t.Fatalf("/metrics while starting: %d %q", status, body)
	}
	cancel()
	select {
	case err := <-done:
		if !strings.Contains(err.Error(), "registering broker") {
			t.Fatalf("the start ended with %v, want the registration given up", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not return within 30s of its context ending")
	}
	if status, body := get("/healthz"); status != -1 {
		t.Fatalf("/healthz after the start was given up: %d %q, want no listener", status, body)
	}
}

// TestObservabilityRoutes: /metrics and the console on the HTTP listener; pprof
// only on the opt-in admin listener.
func TestObservabilityRoutes(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.AdminAddr = "127.0.0.1:0"
	n := startNode(t, cfg)
	base := "http://" + n.HTTPAddr()
	status, body := httpGet(t, base+"/metrics")
	if status != http.StatusOK || !strings.Contains(body, "strata_controller_active 1") {
		t.Fatalf("/metrics: %d\n%s", status, body)
	}
	if status, body := httpGet(t, base+"/console/"); status != http.StatusOK || !strings.Contains(body, "Brokers") {
		t.Fatalf("/console/: %d", status)
	}
	if status, _ := httpGet(t, base+"/debug/pprof/"); status != http.StatusNotFound {
		t.Fatalf("pprof on the public listener: %d", status)
	}
	if n.AdminAddr() == "" {
		t.Fatal("admin listener not started")
	}
	status, body = httpGet(t, "http://"+n.AdminAddr()+"/debug/pprof/goroutine?debug=1")
	if status != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("pprof goroutines: %d\n%.200s", status, body)
	}

	plain := startNode(t, nodeConfig(t.TempDir()))
	if plain.AdminAddr() != "" {
		t.Fatalf("admin listener %q started without --admin-addr", plain.AdminAddr())
	}
}

// metricValue reads an unlabelled sample from a /metrics page.
func metricValue(t *testing.T, body, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no %s on the metrics page", name)
	return 0
}

// TestClusterHealthMetrics: on three nodes, exactly one reports itself the active
// controller; a crashed follower leaves the partition's ISR (the leader reports it
// under-replicated) and, restarted, rejoins it (the leader counts an expand). The
// shrink is counted only when the leader made it: the controller may fence the
// crashed broker first and remove it itself.
func TestClusterHealthMetrics(t *testing.T) {
	c := startCluster(t, 3)
	defer func() { // one graceful shutdown after another waits on a shrinking quorum
		for i := range c.nodes {
			c.crash(i)
		}
	}()
	ctx := context.Background()
	_, adm := c.client()
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "health"); err != nil {
		t.Fatal(err)
	}
	cl, _ := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("health"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	scrape := func(i int) string {
		_, body := httpGet(t, "http://"+c.nodes[i].HTTPAddr()+"/metrics")
		return body
	}
	wait.For(t, "one active controller", func() bool {
		active := 0.0
		for i := range c.nodes {
			active += metricValue(t, scrape(i), "strata_controller_active")
		}
		return active == 1
	})
	leader := c.leaderOf(adm, "health", 0)
	follower := (leader + 1) % 3
	if m := scrape(leader); metricValue(t, m, "strata_partitions_under_replicated") != 0 || metricValue(t, m, "strata_partitions_led") != 1 {
		t.Fatalf("before the crash:\n%s", m)
	}
	c.crash(follower)
	wait.For(t, "the partition under-replicated on its leader", func() bool {
		return metricValue(t, scrape(leader), "strata_partitions_under_replicated") == 1
	})
	t.Logf("ISR shrinks counted by the leader: %v", metricValue(t, scrape(leader), "strata_isr_shrinks_total"))
	if err := c.start(follower); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the follower back in the ISR", func() bool {
		m := scrape(leader)
		return metricValue(t, m, "strata_isr_expands_total") >= 1 && metricValue(t, m, "strata_partitions_under_replicated") == 0
	})
}
