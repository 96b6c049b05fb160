package handlers

// InitializeShareGroupState (key 83), v0: a broker asks the share coordinator (the
// leader of the key's partition of __share_group_state) to start a new state
// epoch of share partitions at a start offset, nothing in flight. An epoch that
// is not newer than the stored one is FENCED_STATE_EPOCH; a coordinator that
// does not lead the key's partition answers NOT_COORDINATOR. Needs CLUSTER_ACTION
// (an inter-broker API), else CLUSTER_AUTHORIZATION_FAILED per partition.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/share"
)

func (h *Handlers) initializeShareGroupState(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.InitializeShareGroupStateRequest)
	allowed := h.authorizeCluster(ctx, c, kmsg.ACLOperationClusterAction)
	return waitFor(func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewInitializeShareGroupStateResponseTopic()
			st.TopicID = rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
				sp.Partition = rp.Partition
				k := share.Key{Group: req.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
				sp.ErrorCode = h.shareStateCheck(allowed, k)
				if sp.ErrorCode == 0 {
					sp.ErrorCode = h.cfg.ShareCoordinator.Initialize(ctx, k, rp.StateEpoch, rp.StartOffset)
				}
				sp.ErrorMessage = errMessage(sp.ErrorCode)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	})
}

// shareStateCheck is the code of a share-state request's partition before the
// coordinator sees it: CLUSTER_AUTHORIZATION_FAILED without CLUSTER_ACTION,
// COORDINATOR_NOT_AVAILABLE on a node without a share coordinator,
// INVALID_REQUEST for an empty group id or a negative partition.
func (h *Handlers) shareStateCheck(allowed bool, k share.Key) int16 {
	switch {
	case !allowed:
		return kerr.ClusterAuthorizationFailed.Code
	case h.cfg.ShareCoordinator == nil:
		return kerr.CoordinatorNotAvailable.Code
	case k.Group == "" || k.Partition < 0:
		return kerr.InvalidRequest.Code
	}
	return 0
}

// errMessage is a code's message for ErrorMessage fields (nil for no error).
func errMessage(code int16) *string {
	if code == 0 {
		return nil
	}
	s := kerr.ErrorForCode(code).Error()
	return &s
}
