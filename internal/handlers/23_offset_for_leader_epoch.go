package handlers

// OffsetForLeaderEpoch (key 23), v2-v4. Clients use it to detect log truncation
// after a leader change (KIP-320): for the requested epoch the answer is the largest
// epoch at or below it and the offset where that epoch ended.
//   v2: current leader epoch (fencing, checked before leadership as in Kafka:
//   see leaderPartitionAt); v3: replica id; v4+: flexible.
// As in Kafka, CLUSTER_ACTION on the cluster or DESCRIBE on the topic lets any
// caller ask, a consumer or a follower alike (TOPIC_AUTHORIZATION_FAILED else).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) offsetForLeaderEpoch(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	img := h.cluster.Image()
	describable := h.topicCheck(ctx, c, kmsg.ACLOperationDescribe)
	if h.authorizeCluster(ctx, c, kmsg.ACLOperationClusterAction) {
		describable = func(string) bool { return true }
	}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			if !describable(rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p, err := h.leaderPartitionAt(img, rt.Topic, rp.Partition, rp.CurrentLeaderEpoch)
			if err == nil {
				sp.LeaderEpoch, sp.EndOffset, err = p.EndOffsetForEpoch(rp.LeaderEpoch)
			}
			sp.ErrorCode = errorCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}
