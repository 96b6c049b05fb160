package handlers

// RemoveRaftVoter (key 81), v0 (flexible; KIP-853): takes a node out of the
// controller voters, as `strata cluster remove-controller` asks. A removed
// voter that is a registered broker stays a non-voting member (Kafka's
// observer) until it is unregistered; another leaves the quorum. The active
// controller may remove itself: it steps down once the change commits, as in
// KIP-853 (controller.RemoveVoter). INCONSISTENT_CLUSTER_ID for another
// cluster's id; then, as Kafka 4.4 checks a request, INVALID_REQUEST ("Remove
// voter request didn't include a valid voter") without a voter key: a
// negative node id or a zero directory id. The directory id must be the one
// the quorum recorded for the voter (VOTER_NOT_FOUND otherwise, as KIP-853
// names a voter by id and directory; a voter whose directory is not recorded
// yet matches any). VOTER_NOT_FOUND also for a node that is not a voter and
// for the last voter, REQUEST_TIMED_OUT when too few of the voters left
// answer for the change to commit or while another voter change is in flight. A removal the forwarding node had to send
// again (its first attempt's outcome unknown) answers success, not
// VOTER_NOT_FOUND, when the node is no voter any more.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) removeRaftVoter(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.RemoveRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	if resp.ErrorCode, resp.ErrorMessage = h.checkClusterID(req.ClusterID); resp.ErrorCode != 0 {
		return reply(resp)
	}
	if req.VoterID < 0 || req.VoterDirectoryID == [16]byte{} {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("Remove voter request didn't include a valid voter")
		return reply(resp)
	}
	resp.ErrorCode, resp.ErrorMessage = h.voterChange(ctx, r, kerr.VoterNotFound.Code, func() error { return h.cluster.RemoveVoter(ctx, req.VoterID, req.VoterDirectoryID) })
	return reply(resp)
}
