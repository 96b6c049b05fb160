package interop

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaConfigsIPQuotas: Kafka 4.4's kafka-configs manages connection
// creation rates of client addresses (KIP-612) on Strata as on Kafka: it sets
// one on an address and on the default entity (--entity-default), describes
// them, refuses another quota key on an address, and deletes one. The broker
// enforces the rate it set: of 15 connections opened at once from the address
// allowed 1 a second, the 10 s minimum window admits 10 and the broker closes
// the others unserved; another address, under the default, is served.
func TestKafkaConfigsIPQuotas(t *testing.T) {
	kafkatools.Require(t)
	tgt := startStrata(t)
	configs := func(args ...string) kafkatools.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), kafkatools.DefaultTimeout)
		defer cancel()
		res, err := kafkatools.Run(ctx, "kafka-configs", append([]string{"--bootstrap-server", tgt.bootstrap}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	mustConfigs := func(args ...string) string {
		t.Helper()
		res := configs(args...)
		if res.ExitCode != 0 {
			t.Fatalf("kafka-configs %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), res.ExitCode, res.Stdout, res.Stderr)
		}
		return res.Stdout
	}
	const limited = "127.0.0.5"
	out := mustConfigs("--alter", "--entity-type", "ips", "--entity-name", limited, "--add-config", "connection_creation_rate=1")
	expectContains(t, out, "Completed updating config for ip "+limited)
	mustConfigs("--alter", "--entity-type", "ips", "--entity-default", "--add-config", "connection_creation_rate=1000")
	out = mustConfigs("--describe", "--entity-type", "ips", "--entity-name", limited)
	expectContains(t, out, "connection_creation_rate=1.0")
	out = mustConfigs("--describe", "--entity-type", "ips")
	t.Logf("kafka-configs --describe --entity-type ips:\n%s", out)
	expectContains(t, out, limited)
	expectContains(t, out, "connection_creation_rate=1000.0")
	if res := configs("--alter", "--entity-type", "ips", "--entity-name", limited, "--add-config", "producer_byte_rate=1024"); res.ExitCode == 0 {
		t.Errorf("producer_byte_rate on an ip entity accepted:\n%s", res.Stdout)
	} else {
		t.Logf("producer_byte_rate on an ip: exit %d: %s", res.ExitCode, lastLines([]byte(res.Stderr+res.Stdout)))
	}

	dialFrom := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: time.Minute}
		nc, err := d.Dial("tcp", tgt.bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		_ = nc.SetDeadline(time.Now().Add(time.Minute))
		return nc
	}
	// served sends ApiVersions v0 and reports whether an answer came (or the
	// broker closed the connection instead).
	served := func(nc net.Conn) bool {
		t.Helper()
		if _, err := nc.Write([]byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}); err != nil {
			return false
		}
		var size [4]byte
		_, err := io.ReadFull(nc, size[:])
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("a connection from %s neither served nor closed", nc.LocalAddr())
		}
		return err == nil
	}
	// Open all 15 first (well within the 10 s window), then ask on each.
	var conns []net.Conn
	start := time.Now()
	for range 15 {
		conns = append(conns, dialFrom(limited))
	}
	if took := time.Since(start); took > 9*time.Second {
		t.Fatalf("dialling 15 connections took %v: the window's bound cannot be checked", took)
	}
	count := 0
	for _, nc := range conns {
		if served(nc) {
			count++
		}
	}
	if count != 10 {
		t.Fatalf("%d of 15 connections from %s served, want 10 (1/s over the 10 s minimum window)", count, limited)
	}
	if !served(dialFrom("127.0.0.6")) {
		t.Fatal("a connection from 127.0.0.6, under the default quota, was not served")
	}

	mustConfigs("--alter", "--entity-type", "ips", "--entity-name", limited, "--delete-config", "connection_creation_rate")
	if out := mustConfigs("--describe", "--entity-type", "ips", "--entity-name", limited); strings.Contains(out, "connection_creation_rate=1.0") {
		t.Errorf("the quota is still described after --delete-config:\n%s", out)
	}
	// The default (1000/s) now applies to the address: it is served again.
	if !served(dialFrom(limited)) {
		t.Fatalf("after --delete-config, a connection from %s was not served", limited)
	}
}
