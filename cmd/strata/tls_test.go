package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/certs/certstest"
	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/server"
	"github.com/strata-stream/strata/internal/vfs"
)

// TestClientCommandsOverMutualTLS: the client commands reach a node that
// requires client certificates with --tls-ca-file, --tls-cert-file and
// --tls-key-file, and get nowhere without them.
func TestClientCommandsOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "cluster")
	node := ca.Issue(t, "node", "broker-1")
	admin := ca.Issue(t, "admin", "admin")
	n := startOwnNode(t, func(cfg *config.Config) {
		cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile = node.CertFile, node.KeyFile, ca.File
	})
	addr := n.KafkaAddr()
	tlsArgs := []string{"--tls-ca-file", ca.File, "--tls-cert-file", admin.CertFile, "--tls-key-file", admin.KeyFile}

	mustRunAt(t, addr, append([]string{"topic", "create", "secured"}, tlsArgs...)...)
	r := mustRunAt(t, addr, append([]string{"topic", "list"}, tlsArgs...)...)
	if !strings.Contains(r.stdout, "secured") {
		t.Fatalf("topic list over mTLS:\n%s", r.stdout)
	}
	for _, args := range [][]string{
		{"topic", "list", "--timeout", "2s"},                           // plaintext
		{"topic", "list", "--timeout", "2s", "--tls-ca-file", ca.File}, // no client certificate
	} {
		if r := runAt(t, addr, "", args...); r.code == 0 {
			t.Errorf("strata %s succeeded against an mTLS node:\n%s", strings.Join(args, " "), r)
		}
	}
	if r := runAt(t, addr, "", "topic", "list", "--tls-cert-file", admin.CertFile); r.code != 2 {
		t.Errorf("--tls-cert-file without --tls-key-file: exit %d, want 2 (usage)", r.code)
	}
}

// startOwnNode starts a node of its own (not the shared one) with the settings
// adjust makes, on ephemeral loopback ports; it stops at cleanup.
func startOwnNode(t *testing.T, adjust func(*config.Config)) *server.Node {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.KafkaAddr, cfg.HTTPAddr, cfg.ControllerAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.ShutdownTimeout = 5 * time.Second
	adjust(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := server.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), vfs.Default)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}
