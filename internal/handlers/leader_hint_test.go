package handlers

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
)

// TestLeaderHints: KIP-951. A Produce v10+ refused NOT_LEADER_OR_FOLLOWER
// names the partition's leader and epoch and lists its endpoint once; v9
// does not. A Fetch v16 refused NOT_LEADER_OR_FOLLOWER or
// FENCED_LEADER_EPOCH does the same; other errors and successes name no
// leader.
func TestLeaderHints(t *testing.T) {
	h := newErrorsHandlers(t)
	produce := func(version int16, parts ...int32) *kmsg.ProduceResponse {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(version)
		req.Acks, req.TimeoutMillis = 1, 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		for _, p := range parts {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, batchtest.Build(batchtest.Options{})
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return serve(t, h, req).(*kmsg.ProduceResponse)
	}
	type hint struct{ code, leader, epoch int32 }
	got := func(code int16, leader, epoch int32) hint { return hint{int32(code), leader, epoch} }

	resp := produce(10, 0, 1, 2, 9)
	want := []hint{{0, -1, -1}, {int32(kerr.NotLeaderForPartition.Code), 2, 0},
		{int32(kerr.NotLeaderForPartition.Code), 2, 5}, {int32(kerr.UnknownTopicOrPartition.Code), -1, -1}}
	for i, sp := range resp.Topics[0].Partitions {
		if g := got(sp.ErrorCode, sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch); g != want[i] {
			t.Errorf("produce v10 partition %d: (code, leader, epoch) %v, want %v", sp.Partition, g, want[i])
		}
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 || resp.Brokers[0].Port != 9093 || resp.Brokers[0].Host != "127.0.0.1" {
		t.Errorf("produce v10 endpoints %+v, want broker 2 at 127.0.0.1:9093 once", resp.Brokers)
	}
	resp = produce(9, 1)
	if sp := resp.Topics[0].Partitions[0]; sp.CurrentLeader.LeaderID != -1 || len(resp.Brokers) != 0 {
		t.Errorf("produce v9 named a leader: %+v, endpoints %+v", sp.CurrentLeader, resp.Brokers)
	}

	fetch := func(version int16, partition, epoch int32) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(version)
		req.ReplicaID, req.ReplicaState.ID, req.MaxBytes = -1, -1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "t", errTopicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = partition, epoch, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return serve(t, h, req).(*kmsg.FetchResponse)
	}
	for _, tc := range []struct {
		name             string
		version          int16
		partition, epoch int32
		want             hint
		endpoint         int32 // -1: none
	}{
		{"not hosted here", 16, 2, -1, hint{int32(kerr.NotLeaderForPartition.Code), 2, 5}, 2},
		{"an older leader epoch", 16, 0, 2, hint{int32(kerr.FencedLeaderEpoch.Code), 1, 3}, 1},
		{"a newer leader epoch", 16, 0, 4, hint{int32(kerr.UnknownLeaderEpoch.Code), -1, -1}, -1},
		{"served", 16, 0, 3, hint{0, -1, -1}, -1},
		{"v15", 15, 2, -1, hint{int32(kerr.NotLeaderForPartition.Code), -1, -1}, -1},
	} {
		resp := fetch(tc.version, tc.partition, tc.epoch)
		sp := resp.Topics[0].Partitions[0]
		if g := got(sp.ErrorCode, sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch); g != tc.want {
			t.Errorf("fetch %s: (code, leader, epoch) %v, want %v", tc.name, g, tc.want)
		}
		switch {
		case tc.endpoint < 0 && len(resp.Brokers) != 0:
			t.Errorf("fetch %s: endpoints %+v, want none", tc.name, resp.Brokers)
		case tc.endpoint >= 0 && (len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != tc.endpoint):
			t.Errorf("fetch %s: endpoints %+v, want broker %d", tc.name, resp.Brokers, tc.endpoint)
		}
	}
}
