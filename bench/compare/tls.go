package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/bench"
)

// The TLS rows (-tls, issue 16): 1 KiB produce (acks=all) and consume over each
// system's PLAINTEXT listener and over SSL, so that Strata's cost of TLS is set
// against Kafka's own in the same run. Kafka's broker has an SSL listener beside
// PLAINTEXT (ssl.keystore.type=PEM); Strata has one Kafka listener, so a second,
// fresh Strata node with --tls-cert-file serves SSL, started for these rows and
// stopped after them. One self-signed P-256 certificate serves both, made with
// openssl as bench/tls.sh makes it. Every run gives records/s and the CPU
// seconds per GB of values of the broker process behind the listener; each
// round runs a system's PLAINTEXT and SSL runs back to back, and the summary
// gives each system's SSL over PLAINTEXT ratios.

// benchTLS is the certificate of the -tls rows.
type benchTLS struct {
	certFile, keyFile string // PEM, for Strata's --tls-cert-file and --tls-key-file
	keystore          string // the key, then the certificate, in one PEM file: Kafka's
	roots             *x509.CertPool
}

// newBenchTLS makes the certificate and key in dir.
func newBenchTLS(ctx context.Context, dir string) (*benchTLS, error) {
	b := &benchTLS{certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem"),
		keystore: filepath.Join(dir, "keystore.pem")}
	cmd := exec.CommandContext(ctx, "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
		"-nodes", "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
		"-keyout", b.keyFile, "-out", b.certFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("making the TLS certificate with openssl: %w\n%s", err, out)
	}
	key, err := os.ReadFile(b.keyFile)
	if err != nil {
		return nil, err
	}
	cert, err := os.ReadFile(b.certFile)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(string(key), "BEGIN PRIVATE KEY") {
		return nil, errors.New("openssl wrote no unencrypted PKCS#8 key, which Kafka's PEM key store needs")
	}
	if err := os.WriteFile(b.keystore, append(key, cert...), 0o600); err != nil {
		return nil, err
	}
	b.roots = x509.NewCertPool()
	if !b.roots.AppendCertsFromPEM(cert) {
		return nil, fmt.Errorf("%s holds no PEM certificate", b.certFile)
	}
	return b, nil
}

// clientOpts are the client options that reach an SSL listener.
func (b *benchTLS) clientOpts() []kgo.Opt {
	return []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: b.roots, MinVersion: tls.VersionTLS12})}
}

// tlsListeners are the listeners of the TLS rows, in the order each round runs them.
var tlsListeners = []string{"PLAINTEXT", "SSL"}

const tlsCPUMetric = "broker CPU s per GB"

func runTLS(ctx context.Context, o options, p *pairing, brokers map[string]*system) error {
	dir, err := os.MkdirTemp(o.workdir, "strata-tls-node-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	strataSSL, err := startStrata(ctx, o.strata, dir, 1, o.sec)
	if err != nil {
		return fmt.Errorf("the TLS Strata node: %w", err)
	}
	defer strataSSL.stop()
	logf("[%s] strata TLS node up at %s in %s", p.Name, strataSSL.seeds[0], strataSSL.startup.Round(time.Millisecond))
	kafkaSSL := *brokers["kafka"]
	kafkaSSL.seeds, kafkaSSL.clientOpts = kafkaSSL.sslSeeds, o.sec.clientOpts()
	over := map[string]map[string]*system{
		"PLAINTEXT": brokers,
		"SSL":       {"strata": strataSSL, "kafka": &kafkaSSL},
	}

	t := &extraTable{
		Title: "TLS: 1 KiB, one partition, over PLAINTEXT and over SSL (a self-signed P-256 certificate)",
		Note: "Kafka serves both listeners from one broker; Strata's SSL listener is a second, fresh node " +
			"(one Kafka listener per node), and its CPU is that node's. The consume rows re-read one topic " +
			"per listener, filled and read once (untimed, not charged) before the first round.",
	}
	p.Extras = append(p.Extras, t)
	wls := []workload{
		{name: "produce 1 KiB, acks=all", slug: "tls-p1k", mode: "produce", size: 1024, acks: bench.AcksAll},
		{name: "consume 1 KiB", slug: "tls-c1k", mode: "consume", size: 1024, acks: bench.AcksAll},
	}
	onListener := func(wl workload, listener string) workload {
		wl.slug += "-" + strings.ToLower(listener)
		return wl
	}
	for _, wl := range wls {
		if wl.mode == "consume" {
			var targets []consumeTarget
			for _, sys := range []string{"strata", "kafka"} {
				for _, listener := range tlsListeners {
					on := over[listener][sys]
					targets = append(targets, consumeTarget{name: sys + " over " + listener,
						wl: onListener(wl, listener), seeds: on.seeds, opts: on.clientOpts})
				}
			}
			unfilled := prepareConsume(ctx, o, targets)
			for _, t := range targets {
				if err := unfilled[t.name]; err != nil {
					return fmt.Errorf("prefilling %s on %s: %w", t.wl.slug, t.name, err)
				}
			}
		}
		for round := 1; round <= o.rounds; round++ {
			for _, sys := range []string{"strata", "kafka"} {
				for _, listener := range tlsListeners {
					lwl := onListener(wl, listener)
					on := over[listener]
					err := runOnce(ctx, p, on, t, wl.name+" over "+listener, sys, round,
						func(ctx context.Context, sys string, seeds []string, round int) ([]measure, any, error) {
							return tlsRun(ctx, o, lwl, round, on[sys])
						})
					if err != nil {
						return err
					}
				}
			}
		}
	}
	for _, wl := range wls {
		t.Summary = append(t.Summary, tlsSummary(t, wl.name))
	}
	return nil
}

// tlsRun is one run of a TLS row against b, with the CPU b's processes used.
func tlsRun(ctx context.Context, o options, wl workload, round int, b *system) ([]measure, any, error) {
	before, cpuErr := b.cpuSeconds()
	res, err := runWorkload(ctx, o, wl, round, b.seeds, b.clientOpts...)
	after, cpuErr2 := b.cpuSeconds()
	ms := []measure{{metric: "records/s", value: res.RecordsPerSec}}
	if cpuErr == nil && cpuErr2 == nil && res.Bytes > 0 {
		ms = append(ms, measure{metric: tlsCPUMetric, value: (after - before) / (float64(res.Bytes) / 1e9), lowerIsBetter: true})
	}
	return ms, res, err
}

// tlsSummary gives each system's SSL over PLAINTEXT ratios of a workload's
// medians: throughput, and broker CPU per GB.
func tlsSummary(t *extraTable, name string) string {
	ratio := func(metric, sys string) string {
		plain := median(t.values(name+" over PLAINTEXT", metric, sys))
		ssl := median(t.values(name+" over SSL", metric, sys))
		if plain <= 0 || ssl <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", ssl/plain)
	}
	say := func(sys string) string {
		return fmt.Sprintf("%s records/s, %s CPU per GB", ratio("records/s", sys), ratio(tlsCPUMetric, sys))
	}
	return fmt.Sprintf("%s, SSL over PLAINTEXT (medians): Strata %s; Kafka %s.", name, say("strata"), say("kafka"))
}
