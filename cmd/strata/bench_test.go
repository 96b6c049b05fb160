package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-stream/strata/internal/bench"
	"github.com/strata-stream/strata/internal/certs/certstest"
	"github.com/strata-stream/strata/internal/cli"
	"github.com/strata-stream/strata/internal/config"
)

// runBenchCmd runs "strata bench ARGS" against the shared node.
func runBenchCmd(t *testing.T, args ...string) result {
	t.Helper()
	return runBenchEnv(t, map[string]string{cli.BrokersEnv: broker(t)}, args...)
}

// runBenchEnv runs "strata bench ARGS" with the environment variables vars.
func runBenchEnv(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := &clientEnv{
		stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
		getenv: func(k string) string { return vars[k] },
	}
	root := &cobra.Command{Use: "strata", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newBenchCmd(env))
	root.SetArgs(append([]string{"bench"}, args...))
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: cli.ExitCode(err), err: err}
}

// benchJSON runs a bench mode that has to succeed and decodes its JSON result.
func benchJSON(t *testing.T, args ...string) bench.Result {
	t.Helper()
	r := runBenchCmd(t, append(args, "--output", "json")...)
	if r.code != 0 {
		t.Fatalf("strata bench %s: %s", strings.Join(args, " "), r)
	}
	var res bench.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("output is not one JSON document: %v\n%s", err, r.stdout)
	}
	return res
}

// checkSane fails unless the result counted every record once and its latency
// percentiles are ordered.
func checkSane(t *testing.T, res bench.Result, mode string, records int64, size int) {
	t.Helper()
	l := res.Latency
	switch {
	case res.Mode != mode:
		t.Fatalf("mode %q, want %q", res.Mode, mode)
	case res.Records != records || res.Bytes != records*int64(size) || res.Failed != 0:
		t.Fatalf("%s: %d records, %d bytes, %d failed; want %d records of %d B", mode, res.Records, res.Bytes, res.Failed, records, size)
	case res.ElapsedSeconds <= 0 || res.RecordsPerSec <= 0 || res.MBPerSec <= 0:
		t.Fatalf("%s: no throughput: %+v", mode, res)
	case l.Count == 0 || l.Min < 0 || l.Min > l.P50 || l.P50 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max:
		t.Fatalf("%s: latency percentiles not ordered: %+v", mode, l)
	}
}

func TestBenchModes(t *testing.T) {
	topic := topicName(t)
	common := []string{"--topic", topic, "--partitions", "2", "--record-size", "200"}

	res := benchJSON(t, append([]string{"produce", "--count", "2000", "--acks", "1", "--compression", "lz4", "--producers", "2"}, common...)...)
	checkSane(t, res, "produce", 2000, 200)
	if res.Partitions != 2 || res.Latency.Count != 2000 || res.LingerMS != 10 {
		t.Fatalf("produce: %+v", res)
	}

	res = benchJSON(t, append([]string{"produce", "--count", "1000", "--acks", "all", "--rate", "2000", "--batch-max-bytes", "16384"}, common...)...)
	checkSane(t, res, "produce", 1000, 200)
	if res.BatchMaxBytes != 16384 {
		t.Fatalf("produce with --batch-max-bytes 16384: %+v", res)
	}

	// The topic holds 3000 records: consume reads them all, no prefill (so
	// no producer flag such as --record-size).
	res = benchJSON(t, "consume", "--consumers", "2", "--topic", topic)
	checkSane(t, res, "consume", 3000, 200)
	if res.Prefilled != 0 {
		t.Fatalf("consume prefilled %d records of a full topic", res.Prefilled)
	}

	res = benchJSON(t, append([]string{"e2e", "--count", "500", "--rate", "1000"}, common...)...)
	checkSane(t, res, "e2e", 500, 200)
	if res.Produced != 500 || res.TargetRate != 1000 || res.LingerMS != 0 {
		t.Fatalf("e2e: %+v", res)
	}
}

// TestBenchFanoutRaw: raw fan-out readers read every record a run delivers
// from a Strata node, and the table says they were raw.
func TestBenchFanoutRaw(t *testing.T) {
	topic := topicName(t)
	res := benchJSON(t, "produce", "--topic", topic, "--count", "1000", "--record-size", "200", "--fanout", "2", "--fanout-raw")
	checkSane(t, res, "produce", 1000, 200)
	if res.Fanout != 2 || !res.FanoutRaw || res.FanoutFewestRead != 1000 || res.FanoutFetches < 2 || res.FanoutFetchBytes < 2*1000*200 {
		t.Fatalf("raw fan-out: %+v", res)
	}
}

func TestBenchConsumePrefillsAndTable(t *testing.T) {
	topic := topicName(t)
	r := runBenchCmd(t, "consume", "--topic", topic, "--count", "300", "--producers", "2", "--acks", "1", "--record-size", "50")
	if r.code != 0 {
		t.Fatalf("%s", r)
	}
	for _, want := range []string{"consume", "prefilled", "300 records (untimed)", "records/s", "p50 / p99 / p99.9"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("table lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"produce", "--acks", "2"},
		{"produce", "--compression", "brotli"},
		{"produce", "--count", "0", "--duration", "0"},
		{"produce", "--producers", "0"},
		{"produce", "--linger", "-1ms"},
		{"produce", "--config", "novalue"},
		{"produce", "--fanout-raw"}, // raw readers need readers
		{"produce", "--fanout", "2", "--fanout-raw", "--tls"},
		{"e2e", "--record-size", "4"},
		{"consume", "--consumers", "0"},
		{"consume", "extra-arg"},
		{"tiered", "--rounds", "0"},
		{"tiered", "--read-records", "0"},
		{"tiered", "--segment-bytes", "-1"},
		{"share", "--ack", "maybe"},
		{"share", "--dead-letter-topic", "dlq.x"},
		{"connect", "--connectors", "0"},
		{"connect", "--count", "0", "--duration", "0"},
		{"connect", "--topic", "t"}, // connect moves no records
		// Flags that would do nothing in the mode.
		{"produce", "--consumers", "5"},                                  // no readers without --fanout
		{"produce", "--fanout", "2", "--fanout-raw", "--consumers", "2"}, // a raw reader is one connection per leader
		{"consume", "--rate", "100"},
		{"share", "--rate", "100"},
		{"consume", "--acks", "1"}, // producer flags shape --count's prefill only
		{"consume", "--producers", "2"},
		{"share", "--compression", "lz4"},
		{"share", "--record-size", "10"},
		{"nonsense"},
	} {
		r := runBenchCmd(t, args...)
		if r.code != 2 {
			t.Errorf("strata bench %s: %s; want exit status 2", strings.Join(args, " "), r)
		}
	}
}

// TestBenchHelpPerMode: each mode's --help lists only the flags it uses, and
// says when one is used only with another.
func TestBenchHelpPerMode(t *testing.T) {
	for _, tc := range []struct {
		mode          string
		want, without []string
	}{
		{"produce", []string{`--rate int`, `--producers int +producer`, `--consumers int +with --fanout`}, nil},
		{"consume", []string{`--consumers int +consumer`, `--acks string +with --count`, `--producers int +with --count`}, []string{`--rate`}},
		{"share", []string{`--consumers int +members`, `--linger duration +with --count`, `--record-size int +with --count`}, []string{`--rate`}},
		{"e2e", []string{`--rate int`, `--producers int +producer`, `--consumers int +consumer`}, []string{`--fanout`, `--transaction-records`}},
	} {
		r := runBenchCmd(t, tc.mode, "--help")
		if r.code != 0 {
			t.Fatalf("bench %s --help: %s", tc.mode, r)
		}
		for _, w := range tc.want {
			if !regexp.MustCompile(w).MatchString(r.stdout) {
				t.Errorf("bench %s --help lacks %q:\n%s", tc.mode, w, r.stdout)
			}
		}
		for _, w := range tc.without {
			if strings.Contains(r.stdout, w) {
				t.Errorf("bench %s --help offers %s:\n%s", tc.mode, w, r.stdout)
			}
		}
	}
}

func TestBenchConsumeEmptyTopicFails(t *testing.T) {
	r := runBenchCmd(t, "consume", "--topic", topicName(t))
	if r.code != 1 || !strings.Contains(r.err.Error(), "no records") {
		t.Fatalf("%s; want exit status 1 saying there are no records", r)
	}
}

// bench tiered against the shared node (remote storage on, fast uploads and
// cleaning): both topics produced, the tiered one read back from the store.
func TestBenchTiered(t *testing.T) {
	topic := topicName(t)
	r := runBenchCmd(t, "tiered", "--topic", topic, "--count", "3000", "--rounds", "1",
		"--segment-bytes", "1048576", "--local-retention-bytes", "1048576", "--read-records", "1000",
		"--broker-pid", strconv.Itoa(os.Getpid()), "--output", "json") // the shared node runs in this process
	if r.code != 0 {
		t.Fatalf("%s", r)
	}
	var res bench.TieredResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("output is not one JSON document: %v\n%s", err, r.stdout)
	}
	if len(res.Plain) != 1 || len(res.Tiered) != 1 {
		t.Fatalf("%d plain and %d tiered produce runs, want 1 each", len(res.Plain), len(res.Tiered))
	}
	checkSane(t, res.Plain[0], "produce", 3000, 1024)
	checkSane(t, res.Tiered[0], "produce", 3000, 1024)
	if res.RemoteRecords <= 0 || res.ProduceRatio <= 0 || len(res.RoundRatios) != 1 || res.RoundRatioMedian <= 0 {
		t.Fatalf("remote records %d, produce ratio %g, round ratios %v", res.RemoteRecords, res.ProduceRatio, res.RoundRatios)
	}
	if len(res.PlainCost) != 1 || len(res.TieredCost) != 1 || res.TieredCost[0].CPUSeconds <= 0 || res.TieredCost[0].CPUPerGB <= 0 ||
		res.CPUPerGBRatio <= 0 || res.LoadBefore == "" || res.LoadAfter == "" {
		t.Fatalf("broker costs plain %+v, tiered %+v, CPU ratio %g, load %q -> %q", res.PlainCost, res.TieredCost, res.CPUPerGBRatio, res.LoadBefore, res.LoadAfter)
	}
	want := min(1000, res.RemoteRecords)
	if len(res.Reads) != 4 {
		t.Fatalf("%d read passes, want 4", len(res.Reads))
	}
	for i, p := range res.Reads {
		if wantSrc := []string{"remote", "local"}[i%2]; p.Source != wantSrc || p.Pass != i/2+1 {
			t.Fatalf("read %d is %s pass %d, want %s pass %d", i, p.Source, p.Pass, wantSrc, i/2+1)
		}
		checkSane(t, p.Result, "consume", want, 1024)
	}
	if res.ReadRatioCold <= 0 || res.ReadRatioCached <= 0 {
		t.Fatalf("read ratios %g, %g", res.ReadRatioCold, res.ReadRatioCached)
	}
}

// TestBenchShare reads one topic with a share group each way (and a classic
// group), and dead-letters it: every record reaches the dead-letter topic.
func TestBenchShare(t *testing.T) {
	topic := topicName(t)
	common := []string{"--topic", topic, "--count", "3000", "--record-size", "200"}
	for _, tc := range []struct {
		ack     string
		members string
	}{{bench.ShareAccept, "2"}, {bench.ShareAckEach, "1"}, {bench.ShareClassic, "1"}} {
		res := benchJSON(t, append([]string{"share", "--ack", tc.ack, "--consumers", tc.members, "--group", topic + "-" + tc.ack}, common...)...)
		if res.Mode != "share" || res.ShareAck != tc.ack || res.Records <= 0 || res.Records > 3000 || res.RecordSize != 200 ||
			res.RecordsPerSec <= 0 || res.Latency.Count == 0 || res.Latency.P50 > res.Latency.P99 {
			t.Fatalf("share --ack %s: %+v", tc.ack, res)
		}
	}
	res := benchJSON(t, append([]string{"share", "--ack", "reject", "--group", topic + "-reject", "--dead-letter-topic", "dlq." + topic}, common...)...)
	if res.Records != 3000 || res.DeadLettered < 3000 || res.RecordsPerSec <= 0 {
		t.Fatalf("share --ack reject: %+v", res)
	}
}

// TestBenchOverSASLSSL: the bench modes run against a SASL_SSL listener
// (--tls-ca-file, SCRAM-SHA-512), and connect counts connections that
// complete TLS and SaslAuthenticate; with a wrong password every attempt
// fails and the run says so.
func TestBenchOverSASLSSL(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "bench")
	node := ca.Issue(t, "node", "broker-1")
	n := startOwnNode(t, func(cfg *config.Config) {
		cfg.TLSCertFile, cfg.TLSKeyFile = node.CertFile, node.KeyFile
		cfg.SASLMechanisms = "SCRAM-SHA-512"
		cfg.AddScram = []string{"SCRAM-SHA-512=[name=bench,password=bench-secret]"}
	})
	vars := map[string]string{cli.BrokersEnv: n.KafkaAddr(), cli.SASLPasswordEnv: "bench-secret"}
	secure := []string{"--tls-ca-file", ca.File, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "bench", "--output", "json"}
	run := func(vars map[string]string, args ...string) (bench.Result, result) {
		t.Helper()
		r := runBenchEnv(t, vars, append(args, secure...)...)
		var res bench.Result
		if r.stdout != "" {
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
				t.Fatalf("output is not one JSON document: %v\n%s", err, r.stdout)
			}
		}
		return res, r
	}
	res, r := run(vars, "produce", "--topic", "tls-bench", "--count", "300", "--record-size", "100")
	if r.code != 0 {
		t.Fatalf("produce over SASL_SSL: %s", r)
	}
	checkSane(t, res, "produce", 300, 100)
	// consume reads what produce wrote: --record-size only shapes a fill (--count).
	if res, r = run(vars, "consume", "--topic", "tls-bench"); r.code != 0 {
		t.Fatalf("consume over SASL_SSL: %s", r)
	}
	checkSane(t, res, "consume", 300, 100)

	res, r = run(vars, "connect", "--count", "20", "--connectors", "2")
	if r.code != 0 {
		t.Fatalf("connect over SASL_SSL: %s", r)
	}
	l := res.Latency
	if res.Mode != "connect" || res.Records != 20 || res.Failed != 0 || res.Connectors != 2 || res.RecordsPerSec <= 0 ||
		l.Count != 20 || l.Min <= 0 || l.P50 > l.Max {
		t.Fatalf("connect: %+v", res)
	}
	// Each connection logged in: the broker counted the logins (the produce
	// and consume runs' clients logged in too).
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := hc.Get("https://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`strata_sasl_authentications_total\{mechanism="SCRAM-SHA-512",result="success"\} (\d+)`).FindSubmatch(body)
	logins := -1
	if m != nil {
		logins, _ = strconv.Atoi(string(m[1]))
	}
	if logins < 20 {
		t.Fatalf("the broker counted %d SCRAM logins, fewer than the 20 connections", logins)
	}

	wrong := map[string]string{cli.BrokersEnv: n.KafkaAddr(), cli.SASLPasswordEnv: "wrong"}
	res, r = run(wrong, "connect", "--count", "3")
	if r.code != 1 || res.Records != 0 || res.Failed != 3 || !strings.Contains(r.err.Error(), "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("connect with a wrong password: %+v\n%s", res, r)
	}
}
