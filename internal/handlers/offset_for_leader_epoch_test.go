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
