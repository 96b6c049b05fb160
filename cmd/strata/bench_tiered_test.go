package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-stream/strata/internal/bench"
	"github.com/strata-stream/strata/internal/cli"
)

// TestBenchTieredConfig: the Config a bench tiered command line gives, or the
// usage error it is refused with, before any broker is asked.
func TestBenchTieredConfig(t *testing.T) {
	for _, tc := range []struct {
		args         []string
		count        int64
		duration     time.Duration
		wantErrMatch string
	}{
		{args: nil, duration: 5 * time.Second},
		{args: []string{"--duration", "2s"}, duration: 2 * time.Second},
		// --duration is the length of a run without --count: none with it.
		{args: []string{"--count", "1000"}, count: 1000},
		{args: []string{"--count", "1000", "--duration", "2s"}, wantErrMatch: "--duration"},
		{args: []string{"--broker-pid", "2147483647"}, wantErrMatch: "--broker-pid 2147483647"},
	} {
		f := &benchTieredFlags{}
		cmd := &cobra.Command{}
		f.bind(cmd)
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		cfg, err := f.config(bench.Config{Brokers: []string{"127.0.0.1:1"}, Acks: bench.AcksAll}, cmd.Flags())
		if tc.wantErrMatch != "" {
			if cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), tc.wantErrMatch) {
				t.Errorf("%v: %v, want a usage error with %q", tc.args, err, tc.wantErrMatch)
			}
			continue
		}
		if err != nil || cfg.Count != tc.count || cfg.Duration != tc.duration {
			t.Errorf("%v: count %d, duration %v (%v); want count %d, duration %v", tc.args, cfg.Count, cfg.Duration, err, tc.count, tc.duration)
		}
	}
}

// TestBenchTieredProgress: the steps of a run go to stderr as progress lines,
// and not at all with --progress none or (in auto) with --output json. The
// run fails at once after its first round's runs: no settle timeout is short
// enough for the brokers' uploads.
func TestBenchTieredProgress(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		steps bool
	}{
		{[]string{"--progress", "lines"}, true},
		{[]string{"--progress", "lines", "--output", "json"}, true},
		{[]string{"--progress", "none"}, false},
		{[]string{"--output", "json"}, false},
	} {
		args := append([]string{"tiered", "--topic", topicName(t), "--count", "10", "--rounds", "1", "--settle-timeout", "1ns"}, tc.args...)
		r := runBenchCmd(t, args...)
		if r.code != 1 || !strings.Contains(r.err.Error(), "not settled") {
			t.Fatalf("%v: %s; want the settle to fail", tc.args, r)
		}
		if got := strings.Contains(r.stderr, "round 1, plain topic"); got != tc.steps {
			t.Errorf("%v: steps on stderr %v, want %v:\n%s", tc.args, got, tc.steps, r.stderr)
		}
	}
}
