package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func parseExtras(t *testing.T, args ...string) (extraOptions, error) {
	t.Helper()
	var e extraOptions
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	e.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return e, e.parse()
}

func TestExtraOptions(t *testing.T) {
	e, err := parseExtras(t)
	if err != nil {
		t.Fatal(err)
	}
	if !e.base || e.share || len(e.ombRates) != 0 || e.fanout != 0 || len(e.javaTxnMillis) != 0 || !e.runsPairing("defaults") || !e.runsPairing("equal") {
		t.Fatalf("defaults: %+v", e)
	}
	if got := e.shareMembers; len(got) != 3 || got[0] != 1 || got[1] != 4 || got[2] != 16 {
		t.Fatalf("share members %v, want 1,4,16", got)
	}
	e, err = parseExtras(t, "-base=false", "-omb-rates", "1000,5000", "-pairings", "defaults", "-fanout", "5", "-java-txn", "100,20")
	if err != nil {
		t.Fatal(err)
	}
	if e.base || len(e.ombRates) != 2 || e.ombRates[1] != 5000 || e.runsPairing("equal") || !e.runsPairing("defaults") || e.fanout != 5 || len(e.javaTxnMillis) != 2 || e.javaTxnMillis[1] != 20 {
		t.Fatalf("%+v", e)
	}
	for _, bad := range [][]string{
		{"-pairings", "fast"},
		{"-omb-rates", "1000,-1"},
		{"-share-members", "0"},
		{"-share-records", "0"},
		{"-omb-duration", "0s"},
		{"-fanout", "-1"},
		{"-fanout-rate", "-1"},
		{"-java-txn", "100,0"},
		{"-java-txn-records", "0"},
	} {
		if _, err := parseExtras(t, bad...); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

// TestExtraTable: rows and metrics print in the order first measured, with
// medians, the ratio and every round; failed runs are listed, not counted.
func TestExtraTable(t *testing.T) {
	tb := &extraTable{Title: "T", Note: "a note", Summary: []string{"a summary"}}
	tb.add("row a", "strata", 1, []measure{{metric: "records/s", value: 300}, {metric: "p99 ms", value: 2, lowerIsBetter: true}}, nil)
	tb.add("row a", "kafka", 1, []measure{{metric: "records/s", value: 100}, {metric: "p99 ms", value: 8, lowerIsBetter: true}}, nil)
	tb.add("row a", "strata", 2, []measure{{metric: "records/s", value: 500}, {metric: "p99 ms", value: 4, lowerIsBetter: true}}, nil)
	tb.add("row a", "kafka", 2, nil, errors.New("broke"))
	tb.add("row b", "strata", 1, []measure{{metric: "records/s", value: 7}}, nil)
	var out bytes.Buffer
	tb.write(&out)
	got := out.String()
	for _, want := range []string{
		"##### T\n",
		"| row a | records/s | 400 | 100 | **4.00** | 300 / 500 | 100 |\n",
		"| row a | p99 ms | 3 | 8 | **0.38** | 2 / 4 | 8 |\n",
		"| row b | records/s | 7 | - | - | 7 |  |\n",
		"a summary\n",
		"a note\n",
		"- row a, kafka, round 2: broke\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "| row a | records/s") > strings.Index(got, "| row a | p99 ms") ||
		strings.Index(got, "| row a | p99 ms") > strings.Index(got, "| row b") {
		t.Errorf("rows out of order:\n%s", got)
	}
}
