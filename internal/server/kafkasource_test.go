package server

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/certs/certstest"
	"github.com/strata-stream/strata/internal/config"
)

// TestKafkaSourceHost: with --kafka-source-host, the node's own Kafka clients
// (replica fetchers, markers, the HTTP API's clients) connect from that
// address, over TLS when TLS is on. The fault-injection suite's proxies tell a
// node's fetches from clients' by it when TLS hides the client id.
func TestKafkaSourceHost(t *testing.T) {
	const source = "127.0.0.12"
	if ln, err := net.Listen("tcp", source+":0"); err != nil {
		t.Skipf("%s is not usable here: %v", source, err)
	} else {
		ln.Close()
	}
	ca := certstest.NewCA(t, t.TempDir(), "cluster")
	leaf := ca.Issue(t, "node", "broker-1")
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"plaintext", false}, {"tls", true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.KafkaSourceHost = source
			n := &Node{cfg: cfg}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			if tc.tls {
				if n.certs, err = certs.New(certs.Files{CertFile: leaf.CertFile, KeyFile: leaf.KeyFile, CAFile: ca.File}, 0, nil); err != nil {
					t.Fatal(err)
				}
				ln = tls.NewListener(ln, n.certs.ServerConfig())
			}
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(ln.Addr().String()), kgo.RequestRetries(0)}, n.kafkaClientOpts()...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			go cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrApiVersionsRequest()) // unanswered: only the connection counts
			c, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tc.tls {
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if err := c.(*tls.Conn).Handshake(); err != nil {
					t.Fatalf("TLS handshake: %v", err)
				}
			}
			if got := c.RemoteAddr().(*net.TCPAddr).IP.String(); got != source {
				t.Fatalf("the node's Kafka client connected from %s, want %s", got, source)
			}
		})
	}
}
