package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/bench"
	"github.com/strata-stream/strata/internal/cli"
	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/internal/wait"
)

func TestPickMoveBrokers(t *testing.T) {
	for _, tc := range []struct {
		ids          []int32
		from, to     int32
		wFrom, wTo   int32
		wantErrMatch string
	}{
		{ids: []int32{3, 1, 2}, from: -1, to: -1, wFrom: 1, wTo: 2},
		{ids: []int32{1, 2, 3}, from: 3, to: -1, wFrom: 3, wTo: 1}, // wraps round
		{ids: []int32{1, 2, 3}, from: 2, to: 1, wFrom: 2, wTo: 1},
		{ids: []int32{1}, from: -1, to: -1, wantErrMatch: "two brokers"},
		{ids: []int32{1, 2}, from: 5, to: -1, wantErrMatch: "--from 5"},
		{ids: []int32{1, 2}, from: 1, to: 7, wantErrMatch: "--to 7"},
		{ids: []int32{1, 2}, from: -1, to: 1, wantErrMatch: "--to 1"}, // --from defaults to 1
	} {
		from, to, err := pickMoveBrokers(tc.ids, tc.from, tc.to)
		if tc.wantErrMatch != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrMatch) {
				t.Errorf("%v --from %d --to %d: %v, want an error with %q", tc.ids, tc.from, tc.to, err, tc.wantErrMatch)
			}
			continue
		}
		if err != nil || from != tc.wFrom || to != tc.wTo {
			t.Errorf("%v --from %d --to %d: %d -> %d (%v), want %d -> %d", tc.ids, tc.from, tc.to, from, to, err, tc.wFrom, tc.wTo)
		}
	}
}

// TestBenchMoveFlags: bad flags are usage errors, before any connection.
func TestBenchMoveFlags(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--size-mib", "1"}, "--disk-dir is required"},
		{[]string{"--disk-dir", "/tmp", "--size-mib", "0"}, "--size-mib 0"},
		{[]string{"--disk-dir", "/tmp", "--size-mib", "9007199254740992"}, "--size-mib 9007199254740992: want 1 to"},
		{[]string{"--disk-dir", "/tmp", "--throttle", "-1"}, "--throttle -1"},
		{[]string{"--disk-dir", "/tmp", "--record-size", "0"}, "--record-size 0"},
		{[]string{"--disk-dir", "/tmp", "--latency-rate", "0"}, "--latency-rate 0"},
		{[]string{"--disk-dir", "/tmp", "--from", "2", "--to", "2"}, "both 2"},
		{[]string{"--disk-dir", "/tmp", "--wait", "0s"}, "--wait 0s"},
		{[]string{"--disk-dir", "/tmp", "--timeline", "-1s"}, "--timeline -1s"},
		{[]string{"--disk-dir", "/tmp", "--from", "-2"}, "--from -2"},
		{[]string{"--disk-dir", "/tmp", "--to", "-3"}, "--to -3"},
		{[]string{"--disk-dir", missing}, "--disk-dir " + missing},
		{[]string{"--disk-dir", file}, "--disk-dir " + file},
	} {
		r := runAt(t, "127.0.0.1:1", "", append([]string{"bench", "move"}, tc.args...)...)
		if r.code != 2 || r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("bench move %v: %s; want a usage error with %q", tc.args, r, tc.want)
		}
	}
}

// TestBenchMove runs `strata bench move` small on two strata processes: both
// moves complete (the partition ends where it started), the throttled one no
// faster than its throttle allows (the token bucket starts with one second's
// worth and may run one fetch into debt), the producer measured both times,
// the throttle cleared and both topics deleted.
func TestBenchMove(t *testing.T) {
	c := testcluster.Start(t, 2)
	// Each node is ready on its own; the bench needs both brokers in the
	// metadata of whichever node it asks.
	for _, n := range c.Nodes() {
		wait.For(t, fmt.Sprintf("node %d's metadata listing both brokers", n.ID), func() bool {
			resp, err := n.Request(context.Background(), kmsg.NewPtrMetadataRequest())
			return err == nil && len(resp.(*kmsg.MetadataResponse).Brokers) == 2
		})
	}
	addr := strings.Join(c.Bootstrap(), ",")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	in := invocation{ctx: ctx, env: map[string]string{cli.BrokersEnv: addr}}

	// A topic of the run that exists already is refused before anything is
	// measured or created.
	if _, err := c.Admin().CreateTopic(ctx, 1, 2, nil, "taken-latency"); err != nil {
		t.Fatal(err)
	}
	r := in.run(t, "bench", "move", "--topic", "taken", "--size-mib", "1", "--disk-dir", t.TempDir())
	if r.code != 2 || !strings.Contains(r.err.Error(), "taken-latency exists") || r.stderr != "" {
		t.Fatalf("bench move with its latency topic taken: %s; want a usage error and no step", r)
	}
	if topics, err := c.Admin().ListTopics(ctx); err != nil || topics.Has("taken") {
		t.Fatalf("bench move refused left its topic behind: %v (%v)", topics.Names(), err)
	}

	const throttle = 1_000_000
	r = in.run(t, "bench", "move",
		"--size-mib", "8", "--record-size", "4096", "--throttle", "1000000", "--latency-rate", "100",
		"--disk-dir", t.TempDir(), "--timeline", "1s", "--output", "json", "--progress", "lines", "--progress-interval", "1ns")
	if r.code != 0 {
		t.Fatalf("bench move: %s", r)
	}
	t.Logf("strata bench move:\n%s", r.stdout)
	for _, want := range []string{"bench move: raw disk", "bench move fill strata-bench-move-0: done, 2048 records", "bench move: moving it back"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, r.stderr)
		}
	}
	var res bench.MoveResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("output is not one JSON document: %v", err)
	}
	switch {
	case res.From != 1 || res.To != 2:
		t.Errorf("moved %d -> %d, want 1 -> 2", res.From, res.To)
	case res.Disk.Bytes != 8<<20 || res.Disk.MBPerSec <= 0:
		t.Errorf("disk %+v", res.Disk)
	case res.Unthrottled.Bytes < 8<<20 || res.Unthrottled.MBPerSec <= 0 || res.Throttled.Bytes != res.Unthrottled.Bytes:
		t.Errorf("moves of %+v and %+v, want the whole filled partition", res.Unthrottled, res.Throttled)
	case res.Throttle != throttle:
		t.Errorf("throttle %d", res.Throttle)
	case res.LatencyIdle.Count == 0 || res.LatencyMoving.Count == 0 || res.LatencyIdleFailed+res.LatencyMovingFailed > 0:
		t.Errorf("producer: idle %+v (%d failed), moving %+v (%d failed)", res.LatencyIdle, res.LatencyIdleFailed, res.LatencyMoving, res.LatencyMovingFailed)
	case res.ThrottledOfLimit <= 0 || res.UnthrottledOfDisk <= 0 || res.P99MovingOfIdle <= 0:
		t.Errorf("ratios %+v", res)
	}
	for _, run := range []struct {
		name    string
		windows []bench.Window
		count   int64
	}{{"idle", res.TimelineIdle, res.LatencyIdle.Count}, {"moving", res.TimelineMoving, res.LatencyMoving.Count}} {
		var n int64
		for _, w := range run.windows {
			n += int64(w.Count)
		}
		if len(run.windows) == 0 || n != run.count {
			t.Errorf("%s timeline: %d windows holding %d records, want the run's %d", run.name, len(run.windows), n, run.count)
		}
	}
	const fetchDebt = 4 << 20 // one follower fetch's worth of one partition
	if least := float64(res.Throttled.Bytes-throttle-fetchDebt) / throttle; res.Throttled.Seconds < least {
		t.Errorf("the throttled move took %.2f s, the throttle allows no less than %.2f s", res.Throttled.Seconds, least)
	}

	// A deletion reaches every broker's metadata a moment after it is answered.
	deadline := time.Now().Add(30 * time.Second)
	for {
		topics, err := c.Admin().ListTopics(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		names := topics.Names()
		if !slices.Contains(names, res.Topic) && !slices.Contains(names, res.LatencyTopic) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("topics left behind: %v", names)
		}
		time.Sleep(100 * time.Millisecond) // polling the brokers' metadata
	}
	checkThrottleCleared(t, c, "the run", 1, 2)
}
