package handlers

// ReadShareGroupState (key 84), v0: a share-partition leader reads the state of a
// share partition from its share coordinator (the leader of the key's partition
// of __share_group_state; package share's Coordinator) under the data
// partition's leader epoch. An epoch newer than the stored one is written first,
// so the older leader's writes are fenced from then on; an older one is
// FENCED_LEADER_EPOCH. A share partition without state is
// UNKNOWN_TOPIC_OR_PARTITION. NOT_COORDINATOR from a node that does not lead the
// key's partition. Needs CLUSTER_ACTION, else CLUSTER_AUTHORIZATION_FAILED per
// partition.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/share"
)

// ShareCoordinator is the share coordinator of this node (package share); each
// method answers a Kafka error code.
type ShareCoordinator interface {
	Initialize(ctx context.Context, k share.Key, stateEpoch int32, start int64) int16
	Read(ctx context.Context, k share.Key, leaderEpoch int32) (share.Snapshot, bool, int16)
	Summary(k share.Key) (share.Snapshot, bool, int16)
	Write(ctx context.Context, k share.Key, s share.Snapshot) int16
	Delete(ctx context.Context, k share.Key) int16
}

func (h *Handlers) readShareGroupState(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.ReadShareGroupStateRequest)
	allowed := h.authorizeCluster(ctx, c, kmsg.ACLOperationClusterAction)
	return waitFor(func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewReadShareGroupStateResponseTopic()
			st.TopicID = rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewReadShareGroupStateResponseTopicPartition()
				sp.Partition, sp.StateEpoch, sp.StartOffset = rp.Partition, -1, -1
				k := share.Key{Group: req.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
				sp.ErrorCode = h.shareStateCheck(allowed, k)
				if sp.ErrorCode == 0 {
					snap, found, code := h.cfg.ShareCoordinator.Read(ctx, k, rp.LeaderEpoch)
					switch {
					case code != 0:
						sp.ErrorCode = code
					case !found:
						sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					default:
						sp.StateEpoch, sp.StartOffset = snap.StateEpoch, snap.Start
						for _, b := range snap.Batches {
							sb := kmsg.NewReadShareGroupStateResponseTopicPartitionStateBatch()
							sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.First, b.Last, int8(b.State), b.DeliveryCount
							sp.StateBatches = append(sp.StateBatches, sb)
						}
					}
				}
				sp.ErrorMessage = errMessage(sp.ErrorCode)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	})
}
