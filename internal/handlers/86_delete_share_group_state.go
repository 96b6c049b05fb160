package handlers

// DeleteShareGroupState (key 86), v0: the state of share partitions is deleted at
// their share coordinator (a tombstone in __share_group_state; the next load
// finds none). NOT_COORDINATOR from a node that does not lead the key's
// partition. Needs CLUSTER_ACTION, else CLUSTER_AUTHORIZATION_FAILED per
// partition.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/share"
)

func (h *Handlers) deleteShareGroupState(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DeleteShareGroupStateRequest)
	allowed := h.authorizeCluster(ctx, c, kmsg.ACLOperationClusterAction)
	return waitFor(func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewDeleteShareGroupStateResponseTopic()
			st.TopicID = rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
				sp.Partition = rp.Partition
				k := share.Key{Group: req.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
				sp.ErrorCode = h.shareStateCheck(allowed, k)
				if sp.ErrorCode == 0 {
					sp.ErrorCode = h.cfg.ShareCoordinator.Delete(ctx, k)
				}
				sp.ErrorMessage = errMessage(sp.ErrorCode)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	})
}
