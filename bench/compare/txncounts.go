package main

// Per-transaction counts on Strata (-txn-records rows, one node): the
// transactional rounds against Strata read its /metrics before and after,
// and writeTxnCountsTable prints, per transaction, the fsyncs of the run's
// data partition and of __transaction_state, the Kafka requests and the
// CONCURRENT_TRANSACTIONS answers. They are counts, so they mean the same on
// a loaded machine as on a quiet one; with several producers they show
// whether the producers' transactions share their fsyncs (group commit).
// The last transaction's marker may be written after the second read: one
// fsync in a run of hundreds of transactions.

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// txnStateTopic is Strata's (and Kafka's) transaction log.
const txnStateTopic = "__transaction_state"

// txnCounts are what one transactional run cost Strata, per transaction.
type txnCounts struct {
	Transactions float64 `json:"transactions"`
	DataFsyncs   float64 `json:"data_fsyncs"`  // of the run's topic
	StateFsyncs  float64 `json:"state_fsyncs"` // of __transaction_state, every partition
	// StatePartitions are the partitions of __transaction_state fsynced during
	// the run (in all, not per transaction): one per producer unless their
	// transactional ids share one.
	StatePartitions int                `json:"state_partitions"`
	Requests        map[string]float64 `json:"requests"` // by API
	// ConcurrentTransactions are CONCURRENT_TRANSACTIONS answers, of any API.
	ConcurrentTransactions float64 `json:"concurrent_transactions"`
}

// counterKey names one counter a scrape keeps.
type counterKey struct{ kind, label string }

// Counter kinds.
const (
	fsyncsOf   = "fsyncs"   // label: topic/partition
	requestsOf = "requests" // label: API
	errorsOf   = "errors"   // label: error name
)

// metricsClient reads /metrics pages: the node is local, a page small.
var metricsClient = &http.Client{Timeout: 10 * time.Second}

// scrapeCounters reads the counters txnCounts is made of from a /metrics page.
func scrapeCounters(url string) (map[counterKey]float64, error) {
	resp, err := metricsClient.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseCounters(resp.Body)
}

// parseCounters reads strata_log_fsync_seconds' counts, strata_requests_total
// and strata_request_errors_total from the text format.
func parseCounters(r io.Reader) (map[counterKey]float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := map[counterKey]float64{}
	for _, m := range families["strata_log_fsync_seconds"].GetMetric() {
		out[counterKey{fsyncsOf, label(m, "topic") + "/" + label(m, "partition")}] += float64(m.GetSummary().GetSampleCount())
	}
	for _, m := range families["strata_requests_total"].GetMetric() {
		out[counterKey{requestsOf, label(m, "api")}] += m.GetCounter().GetValue()
	}
	for _, m := range families["strata_request_errors_total"].GetMetric() {
		out[counterKey{errorsOf, label(m, "error")}] += m.GetCounter().GetValue()
	}
	return out, nil
}

// label is the value of m's label name ("" without it).
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// perTransaction is what happened between two scrapes, per transaction of
// txns, with topic the run's data topic.
func perTransaction(before, after map[counterKey]float64, txns int64, topic string) *txnCounts {
	if txns <= 0 {
		return nil
	}
	n := float64(txns)
	c := &txnCounts{Transactions: n, Requests: map[string]float64{}}
	for k, v := range after {
		d := v - before[k]
		if d <= 0 {
			continue
		}
		switch k.kind {
		case fsyncsOf:
			switch t, _, _ := strings.Cut(k.label, "/"); t {
			case topic:
				c.DataFsyncs += d / n
			case txnStateTopic:
				c.StateFsyncs += d / n
				c.StatePartitions++
			}
		case requestsOf:
			c.Requests[k.label] = d / n
		case errorsOf:
			if k.label == "CONCURRENT_TRANSACTIONS" {
				c.ConcurrentTransactions = d / n
			}
		}
	}
	return c
}

// writeTxnCountsTable prints, per transactional row, the medians over rounds
// of Strata's per-transaction counts.
func (p *pairing) writeTxnCountsTable(w io.Writer) {
	rows := 0
	for _, wl := range p.Workloads {
		var cs []*txnCounts
		for _, s := range p.Samples {
			if s.Workload == wl.name && s.System == "strata" && s.Err == "" && s.StrataTxnCounts != nil {
				cs = append(cs, s.StrataTxnCounts)
			}
		}
		if len(cs) == 0 {
			continue
		}
		if rows == 0 {
			fmt.Fprintln(w, "| Strata, per transaction (medians over rounds) | data fsyncs | `__transaction_state` fsyncs (partitions) | Produce | EndTxn | other requests | CONCURRENT_TRANSACTIONS |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
		}
		rows++
		of := func(f func(*txnCounts) float64) float64 {
			vs := make([]float64, len(cs))
			for i, c := range cs {
				vs[i] = f(c)
			}
			return median(vs)
		}
		other := func(c *txnCounts) float64 {
			sum := 0.0
			for api, v := range c.Requests {
				if api != "Produce" && api != "EndTxn" {
					sum += v
				}
			}
			return sum
		}
		parts := make([]float64, len(cs))
		for i, c := range cs {
			parts[i] = float64(c.StatePartitions)
		}
		slices.Sort(parts)
		fmt.Fprintf(w, "| %s | %.2f | %.2f (%s) | %.2f | %.2f | %.3f | %.3f |\n", wl.name,
			of(func(c *txnCounts) float64 { return c.DataFsyncs }), of(func(c *txnCounts) float64 { return c.StateFsyncs }),
			figures(slices.Compact(parts)),
			of(func(c *txnCounts) float64 { return c.Requests["Produce"] }), of(func(c *txnCounts) float64 { return c.Requests["EndTxn"] }),
			of(other), of(func(c *txnCounts) float64 { return c.ConcurrentTransactions }))
	}
	if rows > 0 {
		fmt.Fprintln(w)
	}
}
