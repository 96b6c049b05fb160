package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/certs/certstest"
	"github.com/strata-stream/strata/internal/config"
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
}
