package handlers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
)

func (c *planCluster) ElectLeaders(_ context.Context, parts []controller.TopicPartitionRef, typ controller.ElectionType) ([]controller.ElectResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, results := controller.PlanElectLeaders(c.img, parts, typ, nil)
	return results, c.apply(recs, false)
}

// TestElectLeadersTypes: ElectLeaders type 1 (unclean) elects a leaderless
// partition's live replica and answers a led one ELECTION_NOT_NEEDED and an
// unknown one UNKNOWN_TOPIC_OR_PARTITION; a type other than 0 and 1 is
// INVALID_REQUEST and elects nothing.
func TestElectLeadersTypes(t *testing.T) {
	img, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.RegisterBrokerRecord{BrokerID: 2, Epoch: 1, Host: "127.0.0.1", Port: 9093},
		&metadata.TopicRecord{Name: "t", ID: errTopicID},
		&metadata.PartitionRecord{TopicID: errTopicID, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
		&metadata.PartitionRecord{TopicID: errTopicID, Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{2}, Leader: 2},
		&metadata.FenceBrokerRecord{BrokerID: 2, Epoch: 1},
		&metadata.PartitionChangeRecord{TopicID: errTopicID, Partition: 1, BasePartitionEpoch: 0, Leader: metadata.NoLeader, LeaderEpoch: 1, ISR: []int32{2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &planCluster{img: img}
	h := New(Config{NodeID: 1, BrokerEpoch: func() int64 { return 1 }}, c, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	elect := func(typ int8, parts map[string][]int32) *kmsg.ElectLeadersResponse {
		req := kmsg.NewPtrElectLeadersRequest()
		req.SetVersion(2)
		req.ElectionType = typ
		for topic, ps := range parts {
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic, rt.Partitions = topic, ps
			req.Topics = append(req.Topics, rt)
		}
		return serve(t, h, req).(*kmsg.ElectLeadersResponse)
	}

	if resp := elect(2, map[string][]int32{"t": {1}}); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("election type 2: error %v, want INVALID_REQUEST", kerr.ErrorForCode(resp.ErrorCode))
	}
	if p := c.Image().Partition("t", 1); p.Leader != metadata.NoLeader {
		t.Fatalf("election type 2 changed t-1: %+v", p)
	}

	resp := elect(1, map[string][]int32{"t": {0, 1}, "nope": {0}})
	got := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			got[fmt.Sprintf("%s-%d", rt.Topic, p.Partition)] = p.ErrorCode
		}
	}
	want := map[string]int16{"t-0": kerr.ElectionNotNeeded.Code, "t-1": 0, "nope-0": kerr.UnknownTopicOrPartition.Code}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("unclean election of %s: error %v (answered %v), want %v", k, kerr.ErrorForCode(g), ok, kerr.ErrorForCode(w))
		}
	}
	if p := c.Image().Partition("t", 1); p.Leader != 1 || p.LeaderEpoch != 2 || len(p.ISR) != 1 || p.ISR[0] != 1 {
		t.Errorf("t-1 after the unclean election: %+v, want leader 1 at epoch 2 with isr [1]", p)
	}
}

// TestElectLeadersAnswersEveryTopic: as Kafka's controller, an election over
// every partition (null topics) answers every topic, one whose partitions all
// needed no election with no partitions (those are left out), and a named
// election answers each topic as listed, one with no partitions too.
func TestElectLeadersAnswersEveryTopic(t *testing.T) {
	settledID := metadata.UUID{13}
	img, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.RegisterBrokerRecord{BrokerID: 2, Epoch: 1, Host: "127.0.0.1", Port: 9093},
		// t-0 is led by 2, its preferred replica 1 in the ISR; t-1 by its preferred 2.
		&metadata.TopicRecord{Name: "t", ID: errTopicID},
		&metadata.PartitionRecord{TopicID: errTopicID, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2},
		&metadata.PartitionRecord{TopicID: errTopicID, Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2},
		&metadata.TopicRecord{Name: "settled", ID: settledID},
		&metadata.PartitionRecord{TopicID: settledID, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := New(Config{NodeID: 1, BrokerEpoch: func() int64 { return 1 }}, &planCluster{img: img}, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	answered := func(resp *kmsg.ElectLeadersResponse) map[string][]string {
		got := map[string][]string{}
		for _, rt := range resp.Topics {
			got[rt.Topic] = []string{}
			for _, p := range rt.Partitions {
				got[rt.Topic] = append(got[rt.Topic], fmt.Sprintf("%d:%v", p.Partition, kerr.ErrorForCode(p.ErrorCode)))
			}
		}
		return got
	}

	all := kmsg.NewPtrElectLeadersRequest()
	all.SetVersion(2)
	got := answered(serve(t, h, all).(*kmsg.ElectLeadersResponse))
	want := map[string][]string{"t": {"0:<nil>"}, "settled": {}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("every partition: answered %v, want %v", got, want)
	}

	named := kmsg.NewPtrElectLeadersRequest()
	named.SetVersion(2)
	for _, topic := range []string{"settled", "t"} {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic = topic
		if topic == "t" {
			rt.Partitions = []int32{1}
		}
		named.Topics = append(named.Topics, rt)
	}
	got = answered(serve(t, h, named).(*kmsg.ElectLeadersResponse))
	want = map[string][]string{"settled": {}, "t": {"1:" + fmt.Sprint(kerr.ElectionNotNeeded)}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("named partitions: answered %v, want %v", got, want)
	}
}
