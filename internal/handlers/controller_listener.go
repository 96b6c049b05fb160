package handlers

// The controller listener's Kafka clients (KIP-919: a tool's
// `--bootstrap-controller`). The controller listener (--controller-addr)
// carries Raft and the controller link; a connection that opens with a Kafka
// request is served here (controllerlink.Mux.Clients), with the Kafka
// listener's authentication and authorization, for the APIs a Kafka controller
// answers clients with that the tools send there: DescribeCluster (the
// controllers, as endpoint type 2), DescribeQuorum, UpdateFeatures (and
// ApiVersions' features), DescribeConfigs, AlterConfigs and
// IncrementalAlterConfigs, DescribeAcls, CreateAcls and DeleteAcls,
// UnregisterBroker, AddRaftVoter, RemoveRaftVoter and UnregisterController;
// and UpdateRaftVoter, which a Kafka controller serves its fellow voters.
// Any node's controller listener serves them, as any broker does, by passing
// what needs the active controller on to it.

import (
	"context"
	"net"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

// controllerListenerKeys are the keys served to clients on the controller
// listener, at the versions the Kafka listener serves them.
var controllerListenerKeys = []int16{29, 30, 31, 32, 33, 44, 55, 57, 60, 64, 80, 81, 94}

// controllerListenerApis is the controller listener's registry: the Kafka
// listener's entries for controllerListenerKeys, DescribeCluster answering
// for the controllers, and UpdateRaftVoter, which only a controller serves.
func controllerListenerApis() []api {
	var out []api
	for _, a := range allApis() {
		switch {
		case a.key == 60:
			a.serve = (*Handlers).describeControllers
		case !slices.Contains(controllerListenerKeys, a.key):
			continue
		}
		out = append(out, a)
	}
	return append(out, updateRaftVoterApi)
}

// ControllerListenerVersions is the controller listener's registry, for its
// protocol.Server.
func ControllerListenerVersions() []protocol.VersionRange {
	return versionsOf(controllerListenerApis())
}

// ControllerListenerHandler serves Kafka clients on the controller listener.
func (h *Handlers) ControllerListenerHandler() protocol.Handler {
	byKey := map[int16]api{}
	for _, a := range controllerListenerApis() {
		byKey[a.key] = a
	}
	return protocol.HandlerFunc(func(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
		return h.handle(byKey, ctx, c, r)
	})
}

// describeControllers is DescribeCluster on the controller listener: the
// controller voters at their controller listener addresses, as a Kafka
// controller answers it (endpoint type 2); a request for brokers (type 1) is
// MISMATCHED_ENDPOINT_TYPE (INVALID_REQUEST on v0, which has no endpoint type
// and so asks for brokers), any other type UNSUPPORTED_ENDPOINT_TYPE. The
// controller id is the active controller's, -1 while there is none. It needs
// ALTER on the cluster, as a Kafka controller's does (a broker's needs
// DESCRIBE).
func (h *Handlers) describeControllers(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if !h.authorizeCluster(ctx, c, kmsg.ACLOperationAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply(resp)
	}
	if !h.startClusterDescription(ctx, c, req, r.Version, resp, controllerEndpoint) {
		return reply(resp)
	}
	voters, err := h.cluster.VoterAddrs(ctx)
	if err != nil {
		resp.ErrorCode = controllerErrorCode(err)
		msg := err.Error()
		resp.ErrorMessage = &msg
		return reply(resp)
	}
	resp.ClusterID = h.cfg.ClusterID
	resp.ControllerID = h.cluster.LeaderID()
	for _, v := range voters {
		host, port, err := net.SplitHostPort(v.Addr)
		p, perr := strconv.ParseUint(port, 10, 16)
		if err != nil || perr != nil {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port = v.ID, host, int32(p)
		resp.Brokers = append(resp.Brokers, rb)
	}
	return reply(resp)
}
