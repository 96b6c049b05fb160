package server

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/wait"
)

// TestClusterShareConfigSetElsewhere: on three nodes, share.auto.offset.reset
// set through one node and read at once through a share partition led by
// another: the leader initialises the share partition only once its metadata
// holds what the active controller had committed (SyncMetadata over the
// controller link), so the group starts at the earliest offset and reads the
// records already there. (The ordering itself is tested deterministically in
// package share, TestInitialiseAfterMetadataSync, and package controller,
// TestWaitCommittedFollowerLag; this runs the real path between them.)
func TestClusterShareConfigSetElsewhere(t *testing.T) {
	c := startCluster(t, 3)
	cl, adm := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	leader := c.leaderOf(adm, "orders", 0)
	for range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	other := (leader + 1) % 3
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(metadata.ResourceGroup), "g"
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = metadata.GroupShareAutoOffsetReset, kmsg.StringPtr("earliest")
	r.Configs = append(r.Configs, rc)
	alter.Resources = append(alter.Resources, r)
	resp, err := alter.RequestWith(ctx, cl.Broker(other+1))
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("setting the group config through node %d: %v %+v", other+1, err, resp)
	}

	topicID := [16]byte(c.nodes[leader].ctrl.Image().Topic("orders").ID)
	joinShareGroup(t, cl, "g", "member-1", "orders", topicID)
	group, member := "g", "member-1"
	var got []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	epoch := int32(0)
	wait.For(t, "a share fetch on the leader", func() bool {
		req := kmsg.NewPtrShareFetchRequest()
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &group, &member, epoch
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = 1000, 1, 1<<20, 100, 100
		tp := kmsg.NewShareFetchRequestTopic()
		tp.TopicID = topicID
		tp.Partitions = append(tp.Partitions, kmsg.NewShareFetchRequestTopicPartition())
		req.Topics = append(req.Topics, tp)
		resp, err := req.RequestWith(ctx, cl.Broker(leader+1))
		if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("ShareFetch on node %d: %v %+v", leader+1, err, resp)
		}
		epoch++
		p := resp.Topics[0].Partitions[0]
		switch p.ErrorCode {
		case 0:
		case kerr.CoordinatorNotAvailable.Code: // retriable: the initialisation did not finish
			return false
		default:
			t.Fatalf("ShareFetch partition error %d", p.ErrorCode)
		}
		got = p.AcquiredRecords
		return true
	})
	n := int64(0)
	for _, a := range got {
		n += a.LastOffset - a.FirstOffset + 1
	}
	if len(got) == 0 || got[0].FirstOffset != 0 || n != 5 {
		t.Fatalf("acquired %+v, want offsets 0-4 (the group starts at the earliest offset)", got)
	}
}
