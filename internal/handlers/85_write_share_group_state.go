package handlers

// WriteShareGroupState (key 85), v0-v1: a share-partition leader writes the state
// of a share partition at its share coordinator. A write of an older state epoch
// than the stored one is FENCED_STATE_EPOCH (the offsets were reset), of an older
// leader epoch FENCED_LEADER_EPOCH (a newer leader has read the state); the
// writer then reloads. v1's DeliveryCompleteCount is stored with the state and
// is what the share-group lag subtracts (a v0 write, or -1, has it counted off the
// state's batches). NOT_COORDINATOR from a node that does not lead the key's
// partition of __share_group_state. Needs CLUSTER_ACTION, else
// CLUSTER_AUTHORIZATION_FAILED per partition.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/share"
)

func (h *Handlers) writeShareGroupState(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.WriteShareGroupStateRequest)
	allowed := h.authorizeCluster(ctx, c, kmsg.ACLOperationClusterAction)
	return waitFor(func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewWriteShareGroupStateResponseTopic()
			st.TopicID = rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
				sp.Partition = rp.Partition
				k := share.Key{Group: req.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
				sp.ErrorCode = h.shareStateCheck(allowed, k)
				if sp.ErrorCode == 0 {
					snap := share.Snapshot{StateEpoch: rp.StateEpoch, LeaderEpoch: rp.LeaderEpoch, Start: rp.StartOffset}
					for _, b := range rp.StateBatches {
						snap.Batches = append(snap.Batches, share.StateBatch{First: b.FirstOffset, Last: b.LastOffset,
							State: share.RecordState(b.DeliveryState), DeliveryCount: b.DeliveryCount})
					}
					snap.DeliveryComplete = rp.DeliveryCompleteCount
					if req.Version < 1 || snap.DeliveryComplete < 0 {
						snap.DeliveryComplete = share.CountDeliveryComplete(snap.Start, snap.Batches)
					}
					sp.ErrorCode = h.cfg.ShareCoordinator.Write(ctx, k, snap)
				}
				sp.ErrorMessage = errMessage(sp.ErrorCode)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	})
}
