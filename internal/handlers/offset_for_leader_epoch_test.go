package handlers

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
)

// TestOffsetForLeaderEpochAuthorization: as Kafka's
// handleOffsetForLeaderEpochRequest, CLUSTER_ACTION on the cluster or
// DESCRIBE on the topic lets anyone ask, whatever the replica id; a denied
// topic is TOPIC_AUTHORIZATION_FAILED. Strata asked a follower (replica id
// 0+) for CLUSTER_ACTION alone, answering CLUSTER_AUTHORIZATION_FAILED, and a
// consumer for DESCRIBE alone.
func TestOffsetForLeaderEpochAuthorization(t *testing.T) {
	describe, clusterAction := kmsg.ACLOperationDescribe, kmsg.ACLOperationClusterAction
	for _, tc := range []struct {
		name       string
		authorizer func() *acl.Authorizer
		replicaID  int32
		want       *kerr.Error
	}{
		{"consumer with describe", allowAnonymous(describe, resTopic, "t"), -1, nil},
		{"consumer with cluster action", allowAnonymous(clusterAction, resCluster, acl.ClusterName), -1, nil},
		{"consumer with neither", allowAnonymous(), -1, kerr.TopicAuthorizationFailed},
		{"follower with cluster action", allowAnonymous(clusterAction, resCluster, acl.ClusterName), 2, nil},
		{"follower with describe", allowAnonymous(describe, resTopic, "t"), 2, nil},
		{"follower with neither", allowAnonymous(), 2, kerr.TopicAuthorizationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newErrorsHandlersWith(t, Config{Authorizer: tc.authorizer})
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			req.SetVersion(4)
			req.ReplicaID = tc.replicaID
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, -1, 3
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			got := serve(t, h, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
			want := int16(0)
			if tc.want != nil {
				want = tc.want.Code
			}
			if got != want {
				t.Errorf("error %v, want %v", kerr.ErrorForCode(got), kerr.ErrorForCode(want))
			}
		})
	}
}

// TestLeaderEpochCheckedBeforeLeadership: as Kafka's Partition.getLocalLog, a
// replica this broker hosts as a follower checks the request's current
// leader epoch before its role: a newer epoch than it knows is
// UNKNOWN_LEADER_EPOCH (the client is ahead of this broker; it retries here)
// and only the current one NOT_LEADER_OR_FOLLOWER, for ListOffsets and
// OffsetForLeaderEpoch alike. Strata answered NOT_LEADER_OR_FOLLOWER first.
// Partition 1 of "t" is led by broker 2 at epoch 0 with a replica here.
func TestLeaderEpochCheckedBeforeLeadership(t *testing.T) {
	h := newErrorsHandlers(t)
	listOffsets := func(partition, epoch int32) int16 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(9)
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, -1, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return serve(t, h, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
	}
	endOffset := func(partition, epoch int32) int16 {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.SetVersion(4)
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, epoch, 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return serve(t, h, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
	}
	for _, tc := range []struct {
		name string
		got  int16
		want *kerr.Error
	}{
		{"ListOffsets, a follower, a newer epoch", listOffsets(1, 1), kerr.UnknownLeaderEpoch},
		{"ListOffsets, a follower, its epoch", listOffsets(1, 0), kerr.NotLeaderForPartition},
		{"ListOffsets, a follower, no epoch", listOffsets(1, -1), kerr.NotLeaderForPartition},
		{"ListOffsets, not hosted, a newer epoch", listOffsets(2, 9), kerr.NotLeaderForPartition},
		{"OffsetForLeaderEpoch, a follower, a newer epoch", endOffset(1, 1), kerr.UnknownLeaderEpoch},
		{"OffsetForLeaderEpoch, a follower, its epoch", endOffset(1, 0), kerr.NotLeaderForPartition},
		{"OffsetForLeaderEpoch, not hosted, a newer epoch", endOffset(2, 9), kerr.NotLeaderForPartition},
	} {
		if tc.got != tc.want.Code {
			t.Errorf("%s: %v, want %s", tc.name, kerr.ErrorForCode(tc.got), tc.want.Message)
		}
	}
}
