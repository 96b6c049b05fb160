package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/certs/certstest"
	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/wait"
)

// TestClusterMutualTLS runs three nodes with client certificates required on
// every listener: Raft, the controller link and replica fetching only work if
// the nodes talk TLS to each other with their certificates. A client with a
// certificate from the cluster CA produces with acks=all and every replica
// agrees; a plaintext client and one without a certificate get nowhere.
func TestClusterMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "cluster")
	c := startCluster(t, 3, func(i int, cfg *config.Config) {
		leaf := ca.Issue(t, fmt.Sprintf("node-%d", i+1), fmt.Sprintf("broker-%d", i+1))
		cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile = leaf.CertFile, leaf.KeyFile, ca.File
	})
	alice := ca.Issue(t, "alice", "alice")
	aliceCerts, err := certs.New(certs.Files{CertFile: alice.CertFile, KeyFile: alice.KeyFile, CAFile: ca.File}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	tlsOpt := kgo.DialTLSConfig(aliceCerts.ClientConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cl, adm := c.client(tlsOpt, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("secure"))
	minISR := "3"
	if _, err := adm.CreateTopic(ctx, 2, 3, map[string]*string{"min.insync.replicas": &minISR}, "secure"); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := range 100 {
		rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consumer, _ := c.client(tlsOpt, kgo.ConsumeTopics("secure"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < len(rs); {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d: %v", got, len(rs), err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		got += len(fs.Records())
	}
	for p := range int32(2) {
		c.checkAgreement(t, "secure", p)
	}

	// Without TLS, or without a client certificate, nothing is answered.
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	_, plainAdm := c.client(kgo.RequestRetries(0))
	if _, err := plainAdm.ListTopics(short); err == nil {
		t.Fatal("a plaintext client listed topics")
	}
	noCert := &tls.Config{RootCAs: x509.NewCertPool()}
	noCert.RootCAs.AddCert(ca.Cert)
	_, anonAdm := c.client(kgo.DialTLSConfig(noCert), kgo.RequestRetries(0))
	if _, err := anonAdm.ListTopics(short); err == nil {
		t.Fatal("a client without a certificate listed topics")
	}
	// So on the controller listener (--bootstrap-controller): over its TLS,
	// with a certificate.
	if code, err := describeQuorumAt(ctx, c.nodes[1].raftAddr, tlsOpt); err != nil || code != 0 {
		t.Fatalf("DescribeQuorum on node 2's controller listener with a certificate: %v, %v", kerr.ErrorForCode(code), err)
	}
	if _, err := describeQuorumAt(short, c.nodes[1].raftAddr, kgo.DialTLSConfig(noCert)); err == nil {
		t.Fatal("a client without a certificate described the quorum on the controller listener")
	}
	if _, err := describeQuorumAt(short, c.nodes[1].raftAddr); err == nil {
		t.Fatal("a plaintext client described the quorum on the controller listener")
	}

	// The HTTP listener is TLS too.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: aliceCerts.ClientConfig()}, Timeout: 10 * time.Second}
	resp, err := hc.Get("https://" + c.nodes[0].HTTPAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "ok") {
		t.Fatalf("GET /healthz over TLS: %d %q", resp.StatusCode, body)
	}

	// The HTTP API's embedded clients reach the Kafka listener with the node's
	// certificate, and a member's requests that reach another node are forwarded
	// over TLS to the node that holds it.
	poll := func(node int) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", "https://"+c.nodes[node].HTTPAddr()+"/poll",
			strings.NewReader(`{"group":"secure-http","topic":"secure","max_records":500,"timeout_ms":10000}`))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("poll via node %d: %d %s", node+1, resp.StatusCode, b)
		}
		var ans struct{ Records []json.RawMessage }
		if err := json.Unmarshal(b, &ans); err != nil {
			t.Fatal(err)
		}
		if got := resp.Header.Get("Strata-Consumer-Node"); got != c.nodes[0].HTTPAddr() {
			t.Fatalf("poll via node %d: Strata-Consumer-Node %q, want node 1's %q", node+1, got, c.nodes[0].HTTPAddr())
		}
		return len(ans.Records), b
	}
	read := 0
	for i := 0; read < len(rs); i++ {
		if i == 20 {
			t.Fatalf("the HTTP member read %d of %d records in 20 polls", read, len(rs))
		}
		n, _ := poll(i % 2) // node 1 holds the member; node 2 forwards
		read += n
	}
	if read != len(rs) {
		t.Fatalf("the HTTP member read %d records, want %d", read, len(rs))
	}
}

// TestSASLUsersOverTheKafkaAPI: --add-scram creates the first admin; the admin
// manages users with AlterUserScramCredentials and DescribeUserScramCredentials
// (what kafka-configs --entity-type users does); a new user logs in with
// SCRAM-SHA-512 and PLAIN, a deleted one no longer can, and wrong passwords get
// SASL_AUTHENTICATION_FAILED.
func TestSASLUsersOverTheKafkaAPI(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.SASLMechanisms = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"
	cfg.SASLPlainWithoutTLS = true
	cfg.AddScram = []string{"SCRAM-SHA-256=[name=admin,password=admin-secret]"}
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, adm := n.client(t, kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism()))

	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("creating alice: %v %v", err, res.Error())
	}
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || described.Error() != nil {
		t.Fatalf("describe: %v %v", err, described.Error())
	}
	if a := described["alice"]; len(a.CredInfos) != 1 || a.CredInfos[0].Mechanism != kadm.ScramSha512 || a.CredInfos[0].Iterations != 4096 {
		t.Fatalf("alice described as %+v", described["alice"])
	}
	if _, ok := described["admin"]; !ok {
		t.Fatalf("admin missing from %+v", described)
	}
	if d, err := adm.DescribeUserSCRAMs(ctx, "nobody"); err != nil || !errors.Is(d["nobody"].Err, kerr.ResourceNotFound) {
		t.Fatalf("describe nobody: %v %+v", err, d)
	}

	login := func(opt kgo.Opt) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), opt, kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		_, err = kadm.NewClient(cl).ListTopics(ctx)
		return err
	}
	for name, opt := range map[string]kgo.Opt{
		"SCRAM-SHA-512": kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		"PLAIN":         kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
	} {
		if err := login(opt); err != nil {
			t.Errorf("alice over %s: %v", name, err)
		}
	}
	if err := login(kgo.SASL(scram.Auth{User: "alice", Pass: "guess"}.AsSha512Mechanism())); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("wrong password: %v", err)
	}
	if err := login(kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("a mechanism alice has no credential for: %v", err)
	}
	if got := authCount(t, n.Node, "SCRAM-SHA-512", "failure"); got != 1 {
		t.Errorf("strata_sasl_authentications_total{SCRAM-SHA-512,failure} = %v, want 1", got)
	}

	del, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || del.Error() != nil {
		t.Fatalf("deleting alice: %v %v", err, del.Error())
	}
	if err := login(kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("deleted user: %v", err)
	}
	// The credential survives a restart (it is in the metadata log), and
	// --add-scram does not replace an existing one.
	n.Close()
	cfg.AddScram = []string{"SCRAM-SHA-256=[name=admin,password=another]"}
	n = startNode(t, cfg)
	if err := login(kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism())); err != nil {
		t.Errorf("admin after restart: %v", err)
	}
}

// TestClusterSASLSSL: three nodes with TLS and SASL (SASL_SSL); replica fetchers
// authenticate with the inter-broker credential; a SCRAM client writes with
// acks=all and every replica agrees.
func TestClusterSASLSSL(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "cluster")
	c := startCluster(t, 3, func(i int, cfg *config.Config) {
		leaf := ca.Issue(t, fmt.Sprintf("node-%d", i+1), fmt.Sprintf("broker-%d", i+1))
		cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCAFile = leaf.CertFile, leaf.KeyFile, ca.File
		cfg.SASLMechanisms = "SCRAM-SHA-512"
		cfg.InterBrokerSASL = "SCRAM-SHA-512=[name=broker,password=broker-secret]"
		cfg.AddScram = []string{"SCRAM-SHA-512=[name=app,password=app-secret]"}
		cfg.Authorizer, cfg.SuperUsers = "acl", "User:app"
	})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	opts := []kgo.Opt{
		kgo.DialTLSConfig(&tls.Config{RootCAs: roots}),
		kgo.SASL(scram.Auth{User: "app", Pass: "app-secret"}.AsSha512Mechanism()),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := c.client(append(opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("sasl"))...)
	minISR := "3"
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": &minISR}, "sasl"); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := range 50 {
		rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.checkAgreement(t, "sasl", 0)

	// ACLs created through any node (forwarded to the active controller) reach
	// every node's authorizer.
	for i, node := range c.nodes {
		ncl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(node.KafkaAddr()))...)
		if err != nil {
			t.Fatal(err)
		}
		res, err := kadm.NewClient(ncl).CreateACLs(ctx, kadm.NewACLs().Allow(fmt.Sprintf("User:reader-%d", i)).AllowHosts("*").Topics("sasl").Operations(kadm.OpRead))
		ncl.Close()
		if err != nil || len(res) != 1 || res[0].Err != nil {
			t.Fatalf("CreateACLs through node %d: %v %+v", i+1, err, res)
		}
	}
	for _, node := range c.nodes {
		wait.For(t, "every ACL on every node", func() bool { return len(node.ctrl.Image().ACLs()) == 3 })
	}

	// The HTTP API asks for the same users, and a member's poll that reaches
	// another node is forwarded there with the caller's credentials.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 20 * time.Second}
	defer hc.CloseIdleConnections()
	poll := func(node int, user string) (status int, holder string, body []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "POST", "https://"+c.nodes[node].HTTPAddr()+"/poll",
			strings.NewReader(`{"group":"sasl-http","topic":"sasl","max_records":100,"timeout_ms":5000}`))
		if user != "" {
			req.SetBasicAuth(user, "app-secret")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Strata-Consumer-Node"), body
	}
	if status, _, _ := poll(1, ""); status != http.StatusUnauthorized {
		t.Fatalf("poll without credentials: %d", status)
	}
	if status, _, body := poll(0, "app"); status != http.StatusOK {
		t.Fatalf("poll via node 1: %d %s", status, body)
	}
	// A node that cannot list the group's members right now (its coordinator
	// slow or moving) answers 503 CONSUMER_LOOKUP_FAILED, to be retried; it never
	// serves the member itself.
	var status int
	var holder string
	var body []byte
	wait.For(t, "a poll via node 2 not refused for a failed member lookup", func() bool {
		status, holder, body = poll(1, "app")
		return status != http.StatusServiceUnavailable || !strings.Contains(string(body), `"CONSUMER_LOOKUP_FAILED"`)
	})
	if status != http.StatusOK || holder != c.nodes[0].HTTPAddr() {
		t.Fatalf("poll via node 2: %d %s, held by %q, want node 1's %q", status, body, holder, c.nodes[0].HTTPAddr())
	}
}

// authCount reads strata_sasl_authentications_total for mechanism and result.
func authCount(t *testing.T, n *Node, mechanism, result string) float64 {
	t.Helper()
	return counterValue(t, n, "strata_sasl_authentications_total", map[string]string{"mechanism": mechanism, "result": result})
}

// counterValue reads the counter name of n's metrics with exactly labels (0
// when it has not been counted).
func counterValue(t *testing.T, n *Node, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := n.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
