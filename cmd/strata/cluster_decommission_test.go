package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
)

func TestPlanDecommission(t *testing.T) {
	rack := func(s string) *string { return &s }
	brokers := func(racks ...string) []kadm.BrokerDetail {
		var bs []kadm.BrokerDetail
		for i, r := range racks {
			b := kadm.BrokerDetail{NodeID: int32(i + 1)}
			if r != "" {
				b.Rack = rack(r)
			}
			bs = append(bs, b)
		}
		return bs
	}
	topics := func(assignments ...[]int32) kadm.TopicDetails {
		ps := kadm.PartitionDetails{}
		for i, a := range assignments {
			ps[int32(i)] = kadm.PartitionDetail{Topic: "t", Partition: int32(i), Replicas: a}
		}
		return kadm.TopicDetails{"t": {Topic: "t", Partitions: ps}}
	}
	for _, tc := range []struct {
		name    string
		brokers []kadm.BrokerDetail
		topics  kadm.TopicDetails
		node    int32
		want    [][]int32 // the new replicas of each moved partition
		err     string
	}{
		{name: "nothing on the node", brokers: brokers("", "", "", ""), topics: topics([]int32{1, 2, 3}), node: 4},
		{name: "the replacement takes the node's place", brokers: brokers("", "", "", ""),
			topics: topics([]int32{4, 1, 2}, []int32{1, 4, 3}), node: 4, want: [][]int32{{3, 1, 2}, {1, 2, 3}}},
		{name: "least loaded first, lowest id on a tie", brokers: brokers("", "", "", "", ""),
			topics: topics([]int32{5, 1}, []int32{5, 1}, []int32{2, 3}), node: 5, want: [][]int32{{4, 1}, {2, 1}}},
		{name: "a rack the other replicas do not use", brokers: brokers("a", "a", "b", "a"),
			topics: topics([]int32{1, 4}), node: 4, want: [][]int32{{1, 3}}},
		{name: "no broker left", brokers: brokers("", "", ""), topics: topics([]int32{1, 2, 3}), node: 3,
			err: "no broker left"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			moves, err := planDecommission(tc.brokers, tc.topics, tc.node)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got [][]int32
			for _, m := range moves {
				got = append(got, m.To)
			}
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("moves to %v, want %v", got, tc.want)
			}
		})
	}
}

// TestClusterDecommission: `strata cluster decommission 4 --output json` on a
// cluster of three nodes and two broker-only ones moves node 4's replicas
// to the other brokers, keeping each replication factor, unregisters it and
// exits 0; every record written before is read back. An unknown node fails.
func TestClusterDecommission(t *testing.T) {
	c := testcluster.Start(t, 3)
	c.AddBroker()
	c.AddBroker()
	addr := strings.Join(c.Bootstrap(), ",")
	c.CreateTopic("retire", [][]int32{{4, 1, 2}, {1, 4, 3}, {2, 3, 5}}, map[string]string{"min.insync.replicas": "2"})
	cl := c.Client(kgo.DefaultProduceTopic("retire"), kgo.RequiredAcks(kgo.AllISRAcks()))
	var recs []*kgo.Record
	for i := range 300 {
		recs = append(recs, &kgo.Record{Value: fmt.Append(nil, i), Partition: int32(i % 3)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	r := runAt(t, addr, "", "cluster", "decommission", "4", "--output", "json")
	if r.code != 0 {
		t.Fatalf("decommission 4: %s", r)
	}
	t.Logf("strata cluster decommission 4 --output json:\n%s%s", r.stderr, r.stdout)
	if !strings.Contains(r.stderr, "2 of 2 partitions moved") || !strings.Contains(r.stdout, `"unregistered": true`) {
		t.Fatalf("decommission 4 output: %s", r)
	}
	for p := range int32(3) {
		s, err := c.Partition(context.Background(), "retire", p)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Replicas) != 3 || slices.Contains(s.Replicas, 4) {
			t.Errorf("partition %d replicas %v after decommissioning 4", p, s.Replicas)
		}
	}
	readBack(t, c, "retire", len(recs), "the decommission")
	if r := runAt(t, addr, "", "cluster", "decommission", "9"); r.code == 0 {
		t.Errorf("decommission 9 (unknown): %s", r)
	}
}
