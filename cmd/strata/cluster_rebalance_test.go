package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/rebalance"
	"github.com/strata-stream/strata/internal/testcluster"
)

// checkThrottleCleared fails t if one of the brokers still has a replication
// throttle rate after what.
func checkThrottleCleared(t *testing.T, c *testcluster.Cluster, what string, brokers ...int32) {
	t.Helper()
	configs, err := c.Admin().DescribeBrokerConfigs(context.Background(), brokers...)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range configs {
		for _, cfg := range rc.Configs {
			if strings.HasSuffix(cfg.Key, "replication.throttled.rate") && cfg.Value != nil && *cfg.Value != "9223372036854775807" {
				t.Errorf("broker %s keeps %s=%s after %s", rc.Name, cfg.Key, *cfg.Value, what)
			}
		}
	}
}

func TestRebalanceThrottled(t *testing.T) {
	brokers, leader, follower := rebalanceThrottled([]rebalance.Move{
		{Topic: "a", Partition: 0, From: []int32{1, 2}, To: []int32{3, 2}},
		{Topic: "a", Partition: 1, From: []int32{1, 2}, To: []int32{2, 1}}, // order only
		{Topic: "b", Partition: 2, From: []int32{2, 5}, To: []int32{2, 4}},
	})
	if !slices.Equal(brokers, []int32{1, 2, 3, 4, 5}) {
		t.Errorf("brokers %v", brokers)
	}
	wantLeader := map[string][]string{"a": {"0:1", "0:2"}, "b": {"2:2", "2:5"}}
	wantFollower := map[string][]string{"a": {"0:3"}, "b": {"2:4"}}
	if !maps.EqualFunc(leader, wantLeader, slices.Equal) || !maps.EqualFunc(follower, wantFollower, slices.Equal) {
		t.Errorf("leader %v follower %v, want %v %v", leader, follower, wantLeader, wantFollower)
	}
}

// TestClusterRebalance: six partitions on brokers 1 and 2 of a cluster of
// three nodes and a broker-only node 4. `strata cluster rebalance --dry-run`
// prints the plan and moves nothing; `strata cluster rebalance --throttle`
// moves them until every broker holds 3 replicas and leads 1 or 2
// partitions, showing progress, clears the throttle, and every record
// written before is read back. Run again, it finds nothing to move.
func TestClusterRebalance(t *testing.T) {
	c := testcluster.Start(t, 3)
	c.AddBroker()
	addr := strings.Join(c.Bootstrap(), ",")
	var assignment [][]int32
	for i := range 6 {
		assignment = append(assignment, [][]int32{{1, 2}, {2, 1}}[i%2])
	}
	c.CreateTopic("spread", assignment, nil)
	cl := c.Client(kgo.DefaultProduceTopic("spread"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 600 {
		recs = append(recs, &kgo.Record{Value: fmt.Append(nil, i), Partition: int32(i % 6)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	r := runAt(t, addr, "", "cluster", "rebalance", "--dry-run")
	t.Logf("strata cluster rebalance --dry-run:\n%s", r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "(dry run, nothing changed)") {
		t.Fatalf("dry run: %s", r)
	}
	if s, err := c.Partition(context.Background(), "spread", 0); err != nil || !slices.Equal(s.Replicas, []int32{1, 2}) {
		t.Fatalf("a dry run moved partition 0: %v %v", s, err)
	}

	r = runAt(t, addr, "", "cluster", "rebalance", "--throttle", "10000000", "--output", "json")
	t.Logf("strata cluster rebalance --throttle 10000000 --output json:\n%s%s", r.stderr, r.stdout)
	if r.code != 0 {
		t.Fatalf("rebalance: %s", r)
	}
	var out rebalanceJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("output %q: %v", r.stdout, err)
	}
	if !out.Completed || len(out.Moves) == 0 || out.Throttle != 10000000 {
		t.Fatalf("output %+v", out)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("%d of %d partitions moved", len(out.Moves), len(out.Moves))) {
		t.Errorf("no final progress line: %s", r.stderr)
	}
	replicas, leaders := map[int32]int{}, map[int32]int{}
	for p := range int32(6) {
		s, err := c.Partition(context.Background(), "spread", p)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Replicas) != 2 {
			t.Errorf("partition %d: replicas %v", p, s.Replicas)
		}
		for _, id := range s.Replicas {
			replicas[id]++
		}
		leaders[s.Replicas[0]]++
	}
	for id := int32(1); id <= 4; id++ {
		if replicas[id] != 3 || leaders[id] < 1 || leaders[id] > 2 {
			t.Errorf("broker %d: %d replicas, preferred leader of %d (all: %v %v)", id, replicas[id], leaders[id], replicas, leaders)
		}
	}
	checkThrottleCleared(t, c, "the rebalance", 1, 2, 3, 4)

	readBack(t, c, "spread", len(recs), "the rebalance")

	r = runAt(t, addr, "", "cluster", "rebalance")
	t.Logf("strata cluster rebalance:\n%s", r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "the cluster is balanced") {
		t.Errorf("second rebalance: %s", r)
	}
}
