package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/certs/certstest"
	"github.com/strata-stream/strata/internal/wait"
)

// serveTLS accepts connections on a loopback TLS listener, completes each
// handshake and sends the principal it derived back as one line.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	return serveTLSState(t, cfg, nil)
}

// serveTLSState is serveTLS that also sends each handshake's state to states
// when it is not nil.
func serveTLSState(t *testing.T, cfg *tls.Config, states chan<- tls.ConnectionState) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				tc := nc.(*tls.Conn)
				_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
				if err := tc.Handshake(); err != nil {
					return
				}
				if states != nil {
					states <- tc.ConnectionState()
				}
				var defaultMapper *certs.PrincipalMapper
				principal, _ := defaultMapper.Principal(tc.ConnectionState())
				_, _ = tc.Write([]byte(principal + "\n"))
			}()
		}
	}()
	return ln.Addr().String()
}

// handshake dials addr and returns the server's leaf CN and the principal the
// server reported.
func handshake(addr string, cfg *tls.Config) (serverCN, principal string, err error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	tc, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return "", "", err
	}
	defer tc.Close()
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 256)
	n, err := tc.Read(buf)
	if err != nil {
		return "", "", err
	}
	line := string(buf[:n])
	return tc.ConnectionState().PeerCertificates[0].Subject.CommonName, line[:len(line)-1], nil
}

func newReloader(t *testing.T, files certs.Files) *certs.Reloader {
	t.Helper()
	r, err := certs.New(files, time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestServerAndClientConfig(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "cluster")
	node := ca.Issue(t, "node", "node-1")
	srv := newReloader(t, certs.Files{CertFile: node.CertFile, KeyFile: node.KeyFile})
	addr := serveTLS(t, srv.ServerConfig())

	// A peer that trusts the cluster CA verifies the server; the connection has
	// no client certificate, so its principal is anonymous.
	peer := newReloader(t, certs.Files{CertFile: node.CertFile, KeyFile: node.KeyFile, CAFile: ca.File})
	cn, principal, err := handshake(addr, peer.DialConfig(addr))
	if err != nil || cn != "node-1" || principal != certs.Anonymous {
		t.Fatalf("handshake: cn %q principal %q err %v", cn, principal, err)
	}
	// Another CA's client refuses the server.
	other := certstest.NewCA(t, dir, "other")
	otherNode := other.Issue(t, "other-node", "intruder")
	stranger := newReloader(t, certs.Files{CertFile: otherNode.CertFile, KeyFile: otherNode.KeyFile, CAFile: other.File})
	if _, _, err := handshake(addr, stranger.DialConfig(addr)); err == nil {
		t.Fatal("a client trusting another CA accepted the server")
	}
	// The server's name is checked.
	c := peer.ClientConfig()
	c.ServerName = "broker.example.com"
	if _, _, err := handshake(addr, c); err == nil {
		t.Fatal("a certificate for another name was accepted")
	}
}

func TestMutualTLSPrincipal(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "cluster")
	node := ca.Issue(t, "node", "node-1")
	alice := ca.Issue(t, "alice", "alice")
	srv := newReloader(t, certs.Files{CertFile: node.CertFile, KeyFile: node.KeyFile, ClientCAFile: ca.File})
	if !srv.MutualTLS() {
		t.Fatal("MutualTLS false with a client CA file")
	}
	addr := serveTLS(t, srv.ServerConfig())

	client := newReloader(t, certs.Files{CertFile: alice.CertFile, KeyFile: alice.KeyFile, CAFile: ca.File})
	if _, principal, err := handshake(addr, client.DialConfig(addr)); err != nil || principal != "User:alice" {
		t.Fatalf("principal %q, err %v; want User:alice", principal, err)
	}
	// Without a client certificate the handshake fails.
	noCert := &tls.Config{RootCAs: mustPool(t, ca.File), ServerName: "127.0.0.1"}
	if _, _, err := handshake(addr, noCert); err == nil {
		t.Fatal("a client without a certificate got through")
	}
	// A certificate from another CA fails too.
	other := certstest.NewCA(t, dir, "other")
	mallory := other.Issue(t, "mallory", "alice")
	forged := newReloader(t, certs.Files{CertFile: mallory.CertFile, KeyFile: mallory.KeyFile, CAFile: ca.File})
	if _, _, err := handshake(addr, forged.DialConfig(addr)); err == nil {
		t.Fatal("a client certificate from another CA was accepted")
	}
}

func TestReloadOnChange(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "cluster")
	node := ca.Issue(t, "node", "generation-1")
	srv := newReloader(t, certs.Files{CertFile: node.CertFile, KeyFile: node.KeyFile})
	addr := serveTLS(t, srv.ServerConfig())
	client := &tls.Config{RootCAs: mustPool(t, ca.File), ServerName: "127.0.0.1"}
	if cn, _, err := handshake(addr, client); err != nil || cn != "generation-1" {
		t.Fatalf("first handshake: cn %q err %v", cn, err)
	}

	// A half-written rotation (a key that does not match the certificate) keeps
	// the loaded pair.
	good, err := os.ReadFile(node.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	stray := ca.Issue(t, "stray", "stray")
	strayKey, err := os.ReadFile(stray.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(node.KeyFile, strayKey, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if cn, _, err := handshake(addr, client); err != nil || cn != "generation-1" {
			t.Fatalf("during a broken rotation: cn %q err %v", cn, err)
		}
	}
	if err := os.WriteFile(node.KeyFile, good, 0o600); err != nil {
		t.Fatal(err)
	}

	// A complete rotation is picked up without a restart.
	ca.Issue(t, "node", "generation-2")
	wait.For(t, "the rotated certificate to be served", func() bool {
		cn, _, err := handshake(addr, client)
		if err != nil {
			t.Fatal(err)
		}
		return cn == "generation-2"
	})
}

func TestNewRejectsBadFiles(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "cluster")
	node := ca.Issue(t, "node", "node-1")
	for _, f := range []certs.Files{
		{CertFile: node.CertFile},
		{CertFile: node.CertFile, KeyFile: ca.File},
		{CertFile: node.CertFile, KeyFile: node.KeyFile, ClientCAFile: node.KeyFile},
		{CertFile: node.CertFile, KeyFile: node.KeyFile, CAFile: dir + "/missing.pem"},
	} {
		if _, err := certs.New(f, 0, nil); err == nil {
			t.Errorf("New(%+v) succeeded", f)
		}
	}
}

func mustPool(t *testing.T, path string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		t.Fatal(errors.New("no certificate in " + path))
	}
	return p
}
