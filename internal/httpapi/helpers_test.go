package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/server"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// testNode is a real node on ephemeral loopback ports whose HTTP API a test
// drives; every exchange is checked against the OpenAPI document.
type testNode struct {
	*server.Node
	t    testing.TB
	base string
}

// shared is one node most tests use (each with its own topics and groups), started
// on first use and closed by TestMain.
var shared struct {
	once sync.Once
	node *server.Node
	err  error
	dir  string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.node != nil {
		shared.node.Close()
		os.RemoveAll(shared.dir)
	}
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		// A stopped node's Raft transport leaves its pooled connections to the other
		// voters open (hashicorp/raft's NetworkTransport.Close does not close them),
		// so after TestCluster a peer's handleConn still waits on one.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*NetworkTransport).handleConn")); err != nil {
			fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// sharedNode returns the shared node for t.
func sharedNode(t testing.TB) *testNode {
	t.Helper()
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "httpapi-test"); shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		shared.node, shared.err = server.Start(ctx, nodeConfig(shared.dir), testLogger(), vfs.Default)
	})
	if shared.err != nil {
		t.Fatalf("starting the shared node: %v", shared.err)
	}
	return &testNode{Node: shared.node, t: t, base: "http://" + shared.node.HTTPAddr()}
}

func nodeConfig(dir string) config.Config {
	cfg := config.Default()
	cfg.DataDir = dir
	cfg.KafkaAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.ControllerAddr = "127.0.0.1:0"
	cfg.AdvertisedKafkaAddr = ""
	cfg.GroupInitialDelay = 0
	cfg.OffsetsTopicPartition = 3
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

func testLogger() *slog.Logger {
	if os.Getenv("STRATA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func startNode(t testing.TB, edit ...func(*config.Config)) *testNode {
	t.Helper()
	cfg := nodeConfig(t.TempDir())
	for _, e := range edit {
		e(&cfg)
	}
	return startNodeWith(t, cfg)
}

func startNodeWith(t testing.TB, cfg config.Config) *testNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := server.Start(ctx, cfg, testLogger(), vfs.Default)
	if err != nil {
		t.Fatalf("starting node: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return &testNode{Node: n, t: t, base: "http://" + n.HTTPAddr()}
}

// response is one HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the answer into v.
func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// errorCode is the code of an error answer.
func (r response) errorCode(t testing.TB) string {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	r.json(t, &e)
	if e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("not an error answer: %s", r.body)
	}
	return e.Error.Code
}

// do sends method path with body (nil: none; []byte or string: sent as is; else
// JSON-encoded), checks the exchange against the OpenAPI document and returns the
// answer.
func (n *testNode) do(method, path string, body any) response {
	n.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			n.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, n.base+path, bytes.NewReader(raw))
	if err != nil {
		n.t.Fatal(err)
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		n.t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, body: out}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		n.t.Fatalf("%s %s: %d with Content-Type %q: %s", method, path, r.status, ct, out)
	}
	checkExchange(n.t, method, path, raw, r)
	return r
}

// must is do expecting status.
func (n *testNode) must(status int, method, path string, body any) response {
	n.t.Helper()
	r := n.do(method, path, body)
	if r.status != status {
		n.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, status, r.body)
	}
	return r
}

// createTopic creates a topic over HTTP.
func (n *testNode) createTopic(name string, partitions int) {
	n.t.Helper()
	n.must(http.StatusCreated, "POST", "/topics", map[string]any{"topic": name, "partitions": partitions})
}

// kafka returns a franz-go client and admin on the node's Kafka listener.
func (n *testNode) kafka(opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	n.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.KafkaAddr())}, opts...)...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// waitInFlight waits until the node's strata_http_requests_in_flight for route
// (a pattern such as "POST /poll") is want.
func (n *testNode) waitInFlight(route string, want int) {
	n.t.Helper()
	line := fmt.Sprintf("strata_http_requests_in_flight{route=%q} %d", route, want)
	wait.For(n.t, line, func() bool {
		resp, err := http.Get(n.base + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return false
		}
		if want == 0 && !strings.Contains(string(b), fmt.Sprintf("strata_http_requests_in_flight{route=%q}", route)) {
			return true // never served: no series yet
		}
		return slices.Contains(strings.Split(string(b), "\n"), line)
	})
}
