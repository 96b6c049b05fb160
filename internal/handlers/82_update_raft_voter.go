package handlers

// UpdateRaftVoter (key 82), v0 (flexible; KIP-853): a controller voter tells
// the leader that its controller listener, or its supported kraft.version
// range, is not what the voter set records; Strata's voters send it when they
// start at another controller address than the one the quorum records
// (server/voter_address.go). Served on the controller listener and the
// controller link only, as Kafka serves it on its controllers, and answered by
// the node asked, not forwarded: checked in Kafka 4.4's order
// (KafkaRaftClient.handleUpdateVoterRequest, UpdateVoterHandler):
//   - INCONSISTENT_CLUSTER_ID for another cluster's id;
//   - FENCED_LEADER_EPOCH for a CurrentLeaderEpoch below this node's Raft
//     term, UNKNOWN_LEADER_EPOCH above it, NOT_LEADER_OR_FOLLOWER on a node
//     that does not lead;
//   - INVALID_REQUEST without a voter key (a negative node id or no directory
//     id), without an endpoint of the controller listener (CONTROLLER, as
//     AddRaftVoter), or with an invalid kraft.version range (a negative bound,
//     or max below min);
//   - then controller.UpdateVoter: REQUEST_TIMED_OUT while another voter
//     change is in flight, INVALID_REQUEST for a range without the finalized
//     kraft.version, VOTER_NOT_FOUND for a node that is not a voter or another
//     data directory than the recorded one.
//
// The voter's recorded endpoint becomes the request's controller listener.
// Every answer names the leader this node knows (CurrentLeader: id, epoch and
// controller listener; -1 and no endpoint when none), so that a sender that
// asked another voter, or named an old epoch, can ask the leader again.

import (
	"context"
	"errors"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/protocol"
)

// updateRaftVoterApi is UpdateRaftVoter's registry entry.
var updateRaftVoterApi = api{key: 82, min: 0, max: 0, serve: (*Handlers).updateRaftVoter}

func (h *Handlers) updateRaftVoter(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.UpdateRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.UpdateRaftVoterResponse)
	leader := h.cluster.RaftLeader()
	resp.CurrentLeader.LeaderID, resp.CurrentLeader.LeaderEpoch = leader.ID, leader.Epoch
	if host, port, err := net.SplitHostPort(leader.Addr); err == nil {
		if p, err := strconv.ParseUint(port, 10, 16); err == nil {
			resp.CurrentLeader.Host, resp.CurrentLeader.Port = host, int32(p)
		}
	}
	resp.ErrorCode = h.updateRaftVoterCode(ctx, req, leader.Epoch)
	return reply(resp)
}

// updateRaftVoterCode checks and applies req on a node in epoch.
func (h *Handlers) updateRaftVoterCode(ctx context.Context, req *kmsg.UpdateRaftVoterRequest, epoch int32) int16 {
	if code, _ := h.checkClusterID(req.ClusterID); code != 0 {
		return code
	}
	switch {
	case req.CurrentLeaderEpoch < epoch:
		return kerr.FencedLeaderEpoch.Code
	case req.CurrentLeaderEpoch > epoch:
		return kerr.UnknownLeaderEpoch.Code
	case !h.cluster.IsLeader():
		return kerr.NotLeaderForPartition.Code
	}
	listeners := make([]kmsg.AddRaftVoterRequestListener, len(req.Listeners))
	for i, l := range req.Listeners {
		listeners[i] = kmsg.AddRaftVoterRequestListener(l)
	}
	addr, ok := voterControllerAddr(listeners)
	versions := req.KRaftVersionFeature
	if req.VoterID < 0 || req.VoterDirectoryID == [16]byte{} || !ok ||
		versions.MinSupportedVersion < 0 || versions.MaxSupportedVersion < versions.MinSupportedVersion {
		return kerr.InvalidRequest.Code
	}
	level, _ := protocol.FeatureLevel("kraft.version")
	kraftOK := versions.MinSupportedVersion <= level && level <= versions.MaxSupportedVersion
	err := h.cluster.UpdateVoter(ctx, req.VoterID, req.VoterDirectoryID, addr, kraftOK)
	if errors.Is(err, controller.ErrNotController) {
		return kerr.NotLeaderForPartition.Code
	}
	return controllerErrorCode(err)
}
