package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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
