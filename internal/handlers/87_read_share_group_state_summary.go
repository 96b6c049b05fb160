package handlers

// ReadShareGroupStateSummary (key 87), v0-v1: the group coordinator asks the share
// coordinator (the leader of the key's partition of __share_group_state) for the
// start offset, state epoch and leader epoch of share partitions, to answer
// DescribeShareGroupOffsets. Unlike ReadShareGroupState it is no share-partition
// leader's load: it fences nothing and a share partition without state is not an
// error. As Kafka 4.4 answers (checked side by side, interop/cmd/sharecompare):
//   - without CLUSTER_ACTION every partition is CLUSTER_AUTHORIZATION_FAILED;
//   - an empty group id is answered with no topics;
//   - a negative partition is INVALID_REQUEST, a topic id or partition the
//     metadata lacks UNKNOWN_TOPIC_OR_PARTITION, each with Kafka's message;
//   - a share partition without state has start offset -1, state and leader
//     epoch 0; a state no leader has read yet has leader epoch 0 (Kafka's
//     default; Strata stores -1 there).
// A partition whose state partition this node does not lead is NOT_COORDINATOR.
//   v1: DeliveryCompleteCount (KIP-1226), -1 when there is no state.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/share"
)

// msgNegativePartition is Kafka's message for a negative partition in the
// share-state APIs.
const msgNegativePartition = "The partition id cannot be a negative number."

func (h *Handlers) readShareGroupStateSummary(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.ReadShareGroupStateSummaryRequest)
	allowed := h.authorizeCluster(ctx, c, kmsg.ACLOperationClusterAction)
	img := h.cluster.Image()
	return waitFor(func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
		if allowed && req.GroupID == "" {
			return resp
		}
		for _, rt := range req.Topics {
			st := kmsg.NewReadShareGroupStateSummaryResponseTopic()
			st.TopicID = rt.TopicID
			t := img.TopicByID(metadata.UUID(rt.TopicID))
			for _, rp := range rt.Partitions {
				sp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
				sp.Partition = rp.Partition
				var msg string
				switch {
				case !allowed:
					sp.ErrorCode, msg = kerr.ClusterAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Description
				case h.cfg.ShareCoordinator == nil:
					sp.ErrorCode, msg = kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorNotAvailable.Description
				case rp.Partition < 0:
					sp.ErrorCode, msg = kerr.InvalidRequest.Code, msgNegativePartition
				case t == nil || int(rp.Partition) >= len(t.Partitions):
					sp.ErrorCode, msg = kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Description
				default:
					k := share.Key{Group: req.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
					snap, found, code := h.cfg.ShareCoordinator.Summary(k)
					switch {
					case code != 0:
						sp.ErrorCode = code
						if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
							msg = e.Description
						}
					case !found:
						sp.StartOffset = -1
					default:
						sp.StateEpoch, sp.LeaderEpoch, sp.StartOffset = snap.StateEpoch, max(snap.LeaderEpoch, 0), snap.Start
						sp.DeliveryCompleteCount = snap.DeliveryComplete
					}
				}
				if sp.ErrorCode != 0 {
					sp.ErrorMessage = &msg
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	})
}
