package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/certs/certstest"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// logLines returns the JSON log lines in logs whose attributes include every
// one of want.
func logLines(t *testing.T, logs *wait.Buffer, want map[string]any) []map[string]any {
	var out []map[string]any
	for line := range strings.Lines(logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		match := true
		for k, v := range want {
			match = match && m[k] == v
		}
		if match {
			out = append(out, m)
		}
	}
	return out
}

// httpCall is one request to a node's HTTP listener as user (none: "").
type httpCall struct {
	method, path, body string
	user, password     string
}

// TestHTTPAuth runs a node with TLS, SCRAM and ACLs and walks its HTTP API and
// console as nobody, as a super user and as alice, who may write and read topic
// orders and read group app: health stays open; everything else needs
// credentials (401 with a challenge, the same for a wrong password and an
// unknown user, counted and audited); alice gets 403 with Kafka's error name
// wherever her ACLs do not reach, although the node's embedded clients are a
// super user.
func TestHTTPAuth(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "cluster")
	leaf := ca.Issue(t, "node", "node")
	cfg := nodeConfig(dir)
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCAFile = leaf.CertFile, leaf.KeyFile, ca.File
	cfg.SASLMechanisms = "SCRAM-SHA-512"
	cfg.InterBrokerSASL = "SCRAM-SHA-512=[name=broker,password=broker-secret]"
	cfg.AddScram = []string{"SCRAM-SHA-512=[name=admin,password=admin-secret]", "SCRAM-SHA-256=[name=alice,password=alice-secret]"}
	cfg.Authorizer, cfg.SuperUsers = "acl", "User:admin"
	cfg.GroupInitialDelay, cfg.OffsetsTopicPartition = 0, 1
	logs := &wait.Buffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg, slog.New(slog.NewJSONHandler(logs, nil)), vfs.Default)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	base := "https://" + n.HTTPAddr()
	do := func(c httpCall) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, c.method, base+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.user != "" {
			req.SetBasicAuth(c.user, c.password)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	expect := func(c httpCall, status int, contains string) string {
		t.Helper()
		got, body, _ := do(c)
		if got != status || !strings.Contains(body, contains) {
			t.Fatalf("%s %s as %q: %d %s, want %d containing %q", c.method, c.path, c.user, got, body, status, contains)
		}
		return body
	}
	const admin, alice = "admin", "alice"
	as := func(user string) (string, string) {
		return user, map[string]string{admin: "admin-secret", alice: "alice-secret"}[user]
	}
	call := func(user, method, path, body string) httpCall {
		u, p := as(user)
		return httpCall{method: method, path: path, body: body, user: u, password: p}
	}

	// Open by design, and nothing else.
	expect(httpCall{method: "GET", path: "/healthz"}, 200, "ok")
	expect(httpCall{method: "GET", path: "/readyz"}, 200, "ready")
	expect(httpCall{method: "GET", path: "/metrics"}, 200, "strata_")
	_, _, hdr := do(httpCall{method: "GET", path: "/topics"})
	if got := hdr.Values("WWW-Authenticate"); len(got) != 1 || !strings.HasPrefix(got[0], "Basic ") {
		t.Fatalf("challenge %q", got)
	}
	expect(httpCall{method: "GET", path: "/topics"}, 401, "SASL_AUTHENTICATION_FAILED")
	expect(httpCall{method: "GET", path: "/console/"}, 401, "Sign-in required")
	_, wrongPassword, _ := do(httpCall{method: "GET", path: "/topics", user: alice, password: "guess"})
	_, unknownUser, _ := do(httpCall{method: "GET", path: "/topics", user: "mallory", password: "guess"})
	if wrongPassword != unknownUser {
		t.Fatalf("wrong password answered %q, unknown user %q", wrongPassword, unknownUser)
	}

	// The super user administers; alice gets ACLs through the Kafka API.
	expect(call(admin, "POST", "/topics", `{"topic":"orders","partitions":1}`), 201, `"orders"`)
	expect(call(admin, "POST", "/topics", `{"topic":"secret","partitions":1}`), 201, `"secret"`)
	kcl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.DialTLSConfig(&tls.Config{RootCAs: roots}),
		kgo.SASL(scram.Auth{User: admin, Pass: "admin-secret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("orders").Operations(kadm.OpWrite, kadm.OpRead),
		kadm.NewACLs().Allow("User:alice").AllowHosts("*").Groups("app").Operations(kadm.OpRead),
	} {
		if res, err := kadm.NewClient(kcl).CreateACLs(ctx, b); err != nil || res[0].Err != nil {
			t.Fatalf("CreateACLs: %v %+v", err, res)
		}
	}
	wait.For(t, "the ACLs in the image", func() bool { return len(n.ctrl.Image().ACLs()) == 3 })

	// alice, within and beyond her ACLs.
	expect(call(alice, "POST", "/produce", `{"topic":"orders","value":"one"}`), 200, `"offset":0`)
	expect(call(alice, "POST", "/topics/orders/records", `{"records":[{"value":"two"}]}`), 200, `"offset":1`)
	expect(call(alice, "POST", "/produce", `{"topic":"secret","value":"x"}`), 403, "TOPIC_AUTHORIZATION_FAILED")
	expect(call(alice, "POST", "/topics/secret/records", `{"records":[{"value":"x"}]}`), 403, "TOPIC_AUTHORIZATION_FAILED")
	if body := expect(call(alice, "GET", "/topics", ""), 200, `"orders"`); strings.Contains(body, "secret") {
		t.Fatalf("alice's topic list shows secret: %s", body)
	}
	expect(call(alice, "GET", "/topics/secret", ""), 403, "TOPIC_AUTHORIZATION_FAILED")
	expect(call(alice, "POST", "/topics", `{"topic":"mine"}`), 403, "TOPIC_AUTHORIZATION_FAILED")
	expect(call(alice, "DELETE", "/topics/orders", ""), 403, "TOPIC_AUTHORIZATION_FAILED")
	expect(call(alice, "GET", "/poll?topic=orders&group=app&consumer=c1&timeout_ms=5000", ""), 200, `"one"`)
	expect(call(alice, "GET", "/poll?topic=orders&group=other", ""), 403, "GROUP_AUTHORIZATION_FAILED")
	expect(call(alice, "GET", "/poll?topic=secret&group=app", ""), 403, "TOPIC_AUTHORIZATION_FAILED")
	expect(call(alice, "POST", "/commit", `{"group":"app","consumer":"c1"}`), 200, `"committed":true`)
	expect(call(alice, "POST", "/commit", `{"group":"other","topic":"orders","partition":0,"offset":1}`), 403, "GROUP_AUTHORIZATION_FAILED")
	expect(call(alice, "POST", "/groups/app/seek", `{"topic":"secret","to":"earliest"}`), 403, "TOPIC_AUTHORIZATION_FAILED")
	expect(call(alice, "GET", "/groups/other", ""), 403, "GROUP_AUTHORIZATION_FAILED")
	if body := expect(call(admin, "GET", "/groups", ""), 200, `"app"`); !strings.Contains(body, `"app"`) {
		t.Fatal(body)
	}
	expect(call(alice, "DELETE", "/groups/app/consumers/c1", ""), 200, `"closed":true`)
	// The console: alice may see her topic's page and records, not the cluster.
	expect(call(alice, "GET", "/console/topics/orders", ""), 200, "orders")
	expect(call(alice, "GET", "/console/topics/secret/records", ""), 403, "may not READ")
	expect(call(alice, "GET", "/console/", ""), 403, "Not allowed")
	expect(call(admin, "GET", "/console/", ""), 200, "")

	// Failures are counted and audited with audit=true.
	if got := httpAuthCount(t, n, "basic", "failure"); got != 2 {
		t.Fatalf("%v failed basic authentications counted, want 2", got)
	}
	if got := logLines(t, logs, map[string]any{"audit": true, "event": "authentication", "listener": "http", "result": "failure"}); len(got) != 2 {
		t.Fatalf("%d audit lines of failed HTTP logins, want 2: %v", len(got), got)
	}
	if got := logLines(t, logs, map[string]any{"audit": true, "event": "authorization", "result": "denied", "principal": "User:alice"}); len(got) < 10 {
		t.Fatalf("%d audit lines of alice's refusals, want at least 10", len(got))
	}
}

// httpAuthCount reads strata_http_authentications_total for scheme and result.
func httpAuthCount(t *testing.T, n *Node, scheme, result string) float64 {
	t.Helper()
	return counterValue(t, n, "strata_http_authentications_total", map[string]string{"scheme": scheme, "result": result})
}
