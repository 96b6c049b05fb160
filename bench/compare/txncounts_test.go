package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/bench"
)

// metricsPage is a /metrics page of a Strata node in the shape it has
// (other families and most help text left out), with fsyncs of the run's
// topic, of another topic and of __transaction_state, each count given.
func metricsPage(counts map[string]int) string {
	var pairs []string
	for k, v := range counts {
		pairs = append(pairs, k, strconv.Itoa(v))
	}
	return strings.NewReplacer(pairs...).Replace(`# HELP strata_log_fsync_seconds Time to fsync the partition's log.
# TYPE strata_log_fsync_seconds summary
strata_log_fsync_seconds_sum{partition="0",topic="__transaction_state"} 0.011
strata_log_fsync_seconds_count{partition="0",topic="__transaction_state"} @STATE0
strata_log_fsync_seconds_sum{partition="1",topic="__transaction_state"} 0.011
strata_log_fsync_seconds_count{partition="1",topic="__transaction_state"} @STATE1
strata_log_fsync_seconds_sum{partition="2",topic="__transaction_state"} 0
strata_log_fsync_seconds_count{partition="2",topic="__transaction_state"} 0
strata_log_fsync_seconds_sum{partition="0",topic="txn1000-r1"} 0.002
strata_log_fsync_seconds_count{partition="0",topic="txn1000-r1"} @DATA
strata_log_fsync_seconds_sum{partition="0",topic="txn1000-r10"} 0.002
strata_log_fsync_seconds_count{partition="0",topic="txn1000-r10"} @OTHER
# TYPE strata_requests_total counter
strata_requests_total{api="EndTxn"} @ENDTXN
strata_requests_total{api="Metadata"} @METADATA
strata_requests_total{api="Produce"} @PRODUCE
# TYPE strata_request_errors_total counter
strata_request_errors_total{api="AddPartitionsToTxn",error="CONCURRENT_TRANSACTIONS"} @CONCURRENT
strata_request_errors_total{api="Produce",error="NOT_LEADER_OR_FOLLOWER"} 3
`)
}

// TestTxnCounts: two scrapes of /metrics around a run make its counts per
// transaction: the run's topic's fsyncs (not another's), every
// __transaction_state partition's and how many were fsynced, the requests
// by API and the CONCURRENT_TRANSACTIONS answers (no other error).
func TestTxnCounts(t *testing.T) {
	scrape := func(counts map[string]int) map[counterKey]float64 {
		t.Helper()
		c, err := parseCounters(strings.NewReader(metricsPage(counts)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := scrape(map[string]int{"@STATE0": 5, "@STATE1": 7, "@DATA": 1, "@OTHER": 50,
		"@PRODUCE": 3, "@ENDTXN": 0, "@METADATA": 2, "@CONCURRENT": 1})
	after := scrape(map[string]int{"@STATE0": 105, "@STATE1": 107, "@DATA": 81, "@OTHER": 90,
		"@PRODUCE": 403, "@ENDTXN": 200, "@METADATA": 4, "@CONCURRENT": 11})
	got := perTransaction(before, after, 200, "txn1000-r1")
	want := txnCounts{Transactions: 200, DataFsyncs: 0.4, StateFsyncs: 1, StatePartitions: 2,
		Requests: map[string]float64{"Produce": 2, "EndTxn": 1, "Metadata": 0.01}, ConcurrentTransactions: 0.05}
	if got == nil || got.Transactions != want.Transactions || got.DataFsyncs != want.DataFsyncs || got.StateFsyncs != want.StateFsyncs ||
		got.StatePartitions != want.StatePartitions || got.ConcurrentTransactions != want.ConcurrentTransactions ||
		len(got.Requests) != len(want.Requests) {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	for api, v := range want.Requests {
		if got.Requests[api] != v {
			t.Errorf("%s requests per transaction %v, want %v", api, got.Requests[api], v)
		}
	}
	if perTransaction(before, after, 0, "txn1000-r1") != nil {
		t.Error("counts of a run without transactions")
	}
	if _, err := parseCounters(strings.NewReader("strata_requests_total{api=\"Produce\" 3\n")); err == nil {
		t.Error("a malformed page parsed")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, metricsPage(map[string]int{"@STATE0": 5, "@STATE1": 7, "@DATA": 1, "@OTHER": 50,
			"@PRODUCE": 3, "@ENDTXN": 0, "@METADATA": 2, "@CONCURRENT": 1}))
	}))
	defer srv.Close()
	if c, err := scrapeCounters(srv.URL + "/metrics"); err != nil || c[counterKey{requestsOf, "Produce"}] != 3 || c[counterKey{fsyncsOf, "__transaction_state/1"}] != 7 {
		t.Errorf("scraped %v, %v", c, err)
	}
	if _, err := scrapeCounters(srv.URL + "/nothing"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a missing page: %v", err)
	}

	// The table: medians over Strata's rounds, per transactional row.
	wls := txnWorkloads([]int{1000}, []int{4}, 1)
	p := &pairing{Workloads: append([]workload{plainRow(1, 1)}, wls...)}
	for i, data := range []float64{0.4, 0.6, 0.5} {
		c := *got
		c.DataFsyncs, c.StatePartitions = data, 2+i%2
		p.add(sample{Workload: wls[1].name, System: "strata", Value: 1, Result: bench.Result{}, StrataTxnCounts: &c})
	}
	p.add(sample{Workload: wls[1].name, System: "kafka", Value: 1})
	var out bytes.Buffer
	p.writeTxnCountsTable(&out)
	row := "| produce 1 KiB in 1000-record transactions, acks=all, 4 producers | 0.50 | 1.00 (2 / 3) | 2.00 | 1.00 | 0.010 | 0.050 |"
	if !strings.Contains(out.String(), row) || strings.Count(out.String(), "\n") != 4 {
		t.Fatalf("table lacks %q, or has more rows:\n%s", row, out.String())
	}
}
