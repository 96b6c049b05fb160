package console_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/console"
)

// blackhole is a Kafka address that accepts connections and never answers: a
// broker paused or wedged.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestPagesWithUnansweringBrokers: with brokers that take connections and never
// answer, the pages that go over the Kafka protocol answer within their bound,
// saying so; they waited for the client's retries, minutes.
func TestPagesWithUnansweringBrokers(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(blackhole(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cfg := imageConsole(t, "orders", 1).Config()
	cfg.Admin = kadm.NewClient(cl)
	cfg.AdminTimeout = time.Second
	srv := httptest.NewServer(console.New(cfg).Handler())
	t.Cleanup(srv.Close)
	for _, tt := range []struct {
		path   string
		status int
		want   string
	}{
		{"/console/", http.StatusOK, `id="topics-count">1<`},
		{"/console/groups", http.StatusOK, "Listing groups: no answer from the cluster within 1s"},
		{"/console/groups/g", http.StatusServiceUnavailable, "Describing the group failed"},
		{"/console/api/groups/g/lag", http.StatusServiceUnavailable, "error"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			c := &http.Client{Timeout: 15 * time.Second}
			resp, err := c.Get(srv.URL + tt.path)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.want) {
				t.Fatalf("answered %d, want %d with %q:\n%s", resp.StatusCode, tt.status, tt.want, b)
			}
		})
	}
}
