package protocol

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/certs/certstest"
)

func TestTLSListenerPrincipal(t *testing.T) {
	for _, l := range []struct {
		name string
		wrap func(net.Listener, *tls.Config) net.Listener
	}{{"tls.NewListener", tls.NewListener}, {"NewTLSListener", NewTLSListener}} {
		t.Run(l.name, func(t *testing.T) { testTLSListenerPrincipal(t, l.wrap) })
	}
}

func testTLSListenerPrincipal(t *testing.T, wrap func(net.Listener, *tls.Config) net.Listener) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "cluster")
	node := ca.Issue(t, "node", "broker-1")
	alice := ca.Issue(t, "alice", "alice")
	srvCerts, err := certs.New(certs.Files{CertFile: node.CertFile, KeyFile: node.KeyFile, ClientCAFile: ca.File}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var principals []string
	var sawTLS bool
	ts := serveOn(t, wrap(ln, srvCerts.ServerConfig()), HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		mu.Lock()
		principals = append(principals, c.Principal())
		sawTLS = c.TLS()
		mu.Unlock()
		return echoHandler(ctx, c, r)
	}), func(s *Server) { s.HandshakeTimeout = time.Second })

	cliCerts, err := certs.New(certs.Files{CertFile: alice.CertFile, KeyFile: alice.KeyFile, CAFile: ca.File}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.DialTLSConfig(cliCerts.ClientConfig()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	resp, err := cl.Request(ctx, metadataRequest("over-tls"))
	if err != nil {
		t.Fatal(err)
	}
	if topics := resp.(*kmsg.MetadataResponse).Topics; len(topics) != 1 || *topics[0].Topic != "over-tls" {
		t.Fatalf("metadata topics %+v", topics)
	}
	mu.Lock()
	if len(principals) == 0 || principals[0] != "User:alice" || !sawTLS {
		t.Errorf("principals %v, TLS %t; want User:alice over TLS", principals, sawTLS)
	}
	mu.Unlock()

	// A plaintext client gets no answer: its bytes are not a TLS handshake.
	plain := dial(t, ts.addr)
	plain.send(metadataRequest("plain"), 12, 1)
	plain.expectClosed()
	if err := ts.hooks.closeErr(t, plain.addr()); !errors.Is(err, ErrTLSHandshake) {
		t.Errorf("plaintext client closed with %v, want ErrTLSHandshake", err)
	}
	// A client that opens TCP and never says anything is cut at HandshakeTimeout.
	silent := dial(t, ts.addr)
	silent.expectClosed()
	if err := ts.hooks.closeErr(t, silent.addr()); !errors.Is(err, ErrTLSHandshake) {
		t.Errorf("silent client closed with %v, want ErrTLSHandshake", err)
	}
	// A client without a certificate cannot complete the mTLS handshake.
	noCert := &tls.Config{RootCAs: mustCertPool(t, ca), ServerName: "127.0.0.1"}
	nc, err := tls.Dial("tcp", ts.addr, noCert)
	if err == nil {
		_ = nc.SetDeadline(time.Now().Add(testTimeout))
		_, err = nc.Read(make([]byte, 1)) // TLS 1.3: the server's alert arrives after the client's Finished
		nc.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate was served")
	}
}

func mustCertPool(t *testing.T, ca *certstest.CA) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// TestTLSListenerMappedPrincipal: with Principals set, a client certificate's
// principal comes from the mapping rules, and a certificate no rule applies to
// is refused after the handshake with ErrAuthentication.
func TestTLSListenerMappedPrincipal(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "cluster")
	node := ca.Issue(t, "node", "broker-1")
	srvCerts, err := certs.New(certs.Files{CertFile: node.CertFile, KeyFile: node.KeyFile, ClientCAFile: ca.File}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := certs.ParsePrincipalMappingRules("RULE:^CN=(alice),O=strata-test$/svc-$1/U")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	principals := make(chan string, 10)
	ts := serveOn(t, NewTLSListener(ln, srvCerts.ServerConfig()), HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		principals <- c.Principal()
		return echoHandler(ctx, c, r)
	}), func(s *Server) { s.Principals = rules })

	clientConfig := func(cn string) *tls.Config {
		leaf := ca.Issue(t, cn, cn)
		r, err := certs.New(certs.Files{CertFile: leaf.CertFile, KeyFile: leaf.KeyFile, CAFile: ca.File}, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.DialConfig(ts.addr)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.DialTLSConfig(clientConfig("alice")))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := cl.Request(ctx, metadataRequest("mapped")); err != nil {
		t.Fatal(err)
	}
	if p := <-principals; p != "User:SVC-ALICE" {
		t.Errorf("principal %q, want User:SVC-ALICE", p)
	}

	bob, err := tls.Dial("tcp", ts.addr, clientConfig("bob"))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	_ = bob.SetDeadline(time.Now().Add(testTimeout))
	if _, err := bob.Read(make([]byte, 1)); err == nil {
		t.Fatal("a certificate no rule maps was served")
	}
	if err := ts.hooks.closeErr(t, bob.LocalAddr().String()); !errors.Is(err, ErrAuthentication) || !errors.Is(err, certs.ErrNoMatchingRule) {
		t.Errorf("closed with %v, want ErrAuthentication and ErrNoMatchingRule", err)
	}
	if len(principals) != 0 {
		t.Errorf("bob's connection reached the handler as %q", <-principals)
	}
}
