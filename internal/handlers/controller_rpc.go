package handlers

// Broker-to-controller APIs, served on the controller link (see controllerlink):
//   BrokerRegistration (62) v0-v4, BrokerHeartbeat (63) v0-v2, AlterPartition (56)
//   v0-v3, AllocateProducerIDs (67) v0, ControllerRegistration (70) v0, and the admin requests other brokers
//   forward (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
//   IncrementalAlterConfigs, ElectLeaders, AlterPartitionReassignments,
//   ListPartitionReassignments, DescribeQuorum, UnregisterBroker, AddRaftVoter,
//   RemoveRaftVoter, AlterUserScramCredentials, CreateAcls, DeleteAcls,
//   AlterClientQuotas, Create/Renew/ExpireDelegationToken), and UpdateRaftVoter
//   (82) v0, which voters send the leader and the node asked answers itself
//   (82_update_raft_voter.go). For the others a node that is not the active controller answers
//   NOT_CONTROLLER and the sender retries on the new one, except that a voter
//   passes a BrokerRegistration on to the active controller it knows
//   (passOn). The active controller's own node serves itself the same requests in process
//   (controllerlink.Local): there is one path to the controller.

import (
	"context"
	"errors"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/protocol"
)

// linkApis is the registry of the controller link.
var linkApis = []api{
	{key: 19, min: 2, max: 7, serve: (*Handlers).createTopics},
	{key: 20, min: 1, max: 6, serve: (*Handlers).deleteTopics},
	{key: 30, min: 1, max: 3, serve: (*Handlers).createAcls},
	{key: 31, min: 1, max: 3, serve: (*Handlers).deleteAcls},
	{key: 33, min: 0, max: 2, serve: (*Handlers).alterConfigs},
	{key: 37, min: 0, max: 3, serve: (*Handlers).createPartitions},
	{key: 38, min: 3, max: 3, serve: (*Handlers).createDelegationToken},
	{key: 39, min: 2, max: 2, serve: (*Handlers).renewDelegationToken},
	{key: 40, min: 2, max: 2, serve: (*Handlers).expireDelegationToken},
	{key: 43, min: 0, max: 2, serve: (*Handlers).electLeaders},
	{key: 44, min: 0, max: 1, serve: (*Handlers).incrementalAlterConfigs},
	{key: 45, min: 0, max: 1, serve: (*Handlers).alterPartitionReassignments},
	{key: 46, min: 0, max: 0, serve: (*Handlers).listPartitionReassignments},
	{key: 49, min: 0, max: 1, serve: (*Handlers).alterClientQuotas},
	{key: 51, min: 0, max: 0, serve: (*Handlers).alterUserScramCredentials},
	{key: 55, min: 0, max: 2, serve: (*Handlers).describeQuorum},
	{key: 56, min: 0, max: 3, serve: (*Handlers).alterPartition},
	{key: 62, min: 0, max: 4, serve: (*Handlers).brokerRegistration},
	{key: 63, min: 0, max: 2, serve: (*Handlers).brokerHeartbeat},
	{key: 64, min: 0, max: 0, serve: (*Handlers).unregisterBroker},
	{key: 67, min: 0, max: 0, serve: (*Handlers).allocateProducerIDs},
	{key: 70, min: 0, max: 0, serve: (*Handlers).controllerRegistration},
	{key: 80, min: 0, max: 1, serve: (*Handlers).addRaftVoter},
	{key: 81, min: 0, max: 0, serve: (*Handlers).removeRaftVoter},
	updateRaftVoterApi,
	{key: 94, min: 0, max: 0, serve: (*Handlers).unregisterController},
}

// LinkVersions is the controller link's registry, for its protocol.Server.
func LinkVersions() []protocol.VersionRange { return versionsOf(linkApis) }

// LinkMaxVersions is the version a link client sends for each key.
func LinkMaxVersions() map[int16]int16 {
	m := map[int16]int16{}
	for _, a := range linkApis {
		m[a.key] = a.max
	}
	return m
}

// LinkHandler serves the controller link.
func (h *Handlers) LinkHandler() protocol.Handler {
	byKey := map[int16]api{}
	for _, a := range linkApis {
		byKey[a.key] = a
	}
	return protocol.HandlerFunc(func(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
		a, ok := byKey[r.Key]
		if !ok {
			return protocol.Response{Msg: errorResponse(r.Msg)}
		}
		return a.serve(h, context.WithValue(ctx, onLinkKey{}, true), c, r)
	})
}

// onLinkKey marks the context of a request that arrived on the controller link.
type onLinkKey struct{}

// forwardIfNotController has the active controller serve an admin request
// that a client sent this node, through the node's one path to it (in process
// when it is this node), and answers with the controller's response. ok is
// false when the request arrived on the controller link and this node, the
// active controller, should serve it itself.
//
// No controller reachable, or an answer of NOT_CONTROLLER (the node asked
// lost the leadership), is retried on the new active controller; only when
// the retries run out does the client get NOT_CONTROLLER. Clients retry
// that answer for some requests only (franz-go not for UnregisterBroker, for
// one), and a Kafka broker never gives it for a forwarded request.
func (h *Handlers) forwardIfNotController(ctx context.Context, r *protocol.Request) (protocol.Response, bool) {
	resp, ok, _ := h.forward(ctx, r)
	return resp, ok
}

// forward is forwardIfNotController, also saying whether the request was sent
// more than once: an earlier attempt, its outcome unknown (a deposed
// controller may have committed it; an answer may have been lost), may have
// done what the answer to the last one says is done already.
func (h *Handlers) forward(ctx context.Context, r *protocol.Request) (resp protocol.Response, ok, resent bool) {
	if ctx.Value(onLinkKey{}) != nil {
		if h.cluster.IsLeader() {
			return protocol.Response{}, false, false
		}
		// Sent to us, but we are no longer the controller: never forward twice.
		return protocol.Response{Msg: notControllerResponse(r.Msg)}, true, false
	}
	answer, resent, err := controllerlink.Retry(ctx, h.ctrl, r.Msg, func() func() { return startWait(ctx) })
	if err != nil {
		h.log.Warn("forwarding to the active controller", "api", kmsg.NameForKey(r.Key), "err", err)
		return protocol.Response{Msg: notControllerResponse(r.Msg)}, true, resent
	}
	answer.SetVersion(r.Version)
	return protocol.Response{Msg: answer}, true, resent
}

// notControllerResponse answers every entry of an admin request with
// NOT_CONTROLLER, which clients retry after refreshing metadata.
func notControllerResponse(req kmsg.Request) kmsg.Response {
	code := kerr.NotController.Code
	resp := errorResponse(req)
	switch req := req.(type) {
	case *kmsg.CreateTopicsRequest:
		r := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.DeleteTopicsRequest:
		r := resp.(*kmsg.DeleteTopicsResponse)
		for _, name := range req.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			n := name
			rt.Topic, rt.ErrorCode = &n, code
			r.Topics = append(r.Topics, rt)
		}
		for _, t := range req.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.CreatePartitionsRequest:
		r := resp.(*kmsg.CreatePartitionsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.AlterConfigsRequest:
		r := resp.(*kmsg.AlterConfigsResponse)
		for _, rr := range req.Resources {
			res := kmsg.NewAlterConfigsResponseResource()
			res.ResourceType, res.ResourceName, res.ErrorCode = rr.ResourceType, rr.ResourceName, code
			r.Resources = append(r.Resources, res)
		}
	case *kmsg.ElectLeadersRequest:
		resp.(*kmsg.ElectLeadersResponse).ErrorCode = code
	case *kmsg.AlterPartitionAssignmentsRequest:
		failReassignments(req, resp.(*kmsg.AlterPartitionAssignmentsResponse), code, nil)
	case *kmsg.ListPartitionReassignmentsRequest:
		resp.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode = code
	case *kmsg.UnregisterBrokerRequest:
		resp.(*kmsg.UnregisterBrokerResponse).ErrorCode = code
	case *kmsg.UnregisterControllerRequest:
		resp.(*kmsg.UnregisterControllerResponse).ErrorCode = code
	case *kmsg.AddRaftVoterRequest:
		resp.(*kmsg.AddRaftVoterResponse).ErrorCode = code
	case *kmsg.RemoveRaftVoterRequest:
		resp.(*kmsg.RemoveRaftVoterResponse).ErrorCode = code
	case *kmsg.DescribeQuorumRequest:
		// Kafka's quorum answers a node that does not lead it this way.
		return quorumPartitionErrors(req, resp.(*kmsg.DescribeQuorumResponse), kerr.NotLeaderForPartition.Code)
	case *kmsg.IncrementalAlterConfigsRequest:
		r := resp.(*kmsg.IncrementalAlterConfigsResponse)
		for _, rr := range req.Resources {
			res := kmsg.NewIncrementalAlterConfigsResponseResource()
			res.ResourceType, res.ResourceName, res.ErrorCode = rr.ResourceType, rr.ResourceName, code
			r.Resources = append(r.Resources, res)
		}
	case *kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest, *kmsg.AlterClientQuotasRequest:
		return deniedResponse(req, code)
	case *kmsg.CreateDelegationTokenRequest:
		resp.(*kmsg.CreateDelegationTokenResponse).ErrorCode = code
	case *kmsg.RenewDelegationTokenRequest:
		r := resp.(*kmsg.RenewDelegationTokenResponse)
		r.ErrorCode, r.ExpiryTimestamp = code, -1
	case *kmsg.ExpireDelegationTokenRequest:
		r := resp.(*kmsg.ExpireDelegationTokenResponse)
		r.ErrorCode, r.ExpiryTimestamp = code, -1
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		r := resp.(*kmsg.AlterUserSCRAMCredentialsResponse)
		for _, user := range scramUsersOf(req) {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = user, code
			r.Results = append(r.Results, res)
		}
	}
	return resp
}

// passOn sends a request that arrived on the link, for a controller this node
// is not, on to the active controller this node knows, once (see
// controllerlink.PassedOnClientID), and answers with its answer. A
// broker-only node that registers asks the voters in its --controllers, which
// need not include the active controller (a voter added since), so any live
// voter among them will do, as any of Kafka's controller.quorum.bootstrap.servers
// does. ok is false when this node answers itself: it leads, knows no other
// leader, or the request was passed on to it already.
func (h *Handlers) passOn(ctx context.Context, r *protocol.Request) (protocol.Response, bool) {
	if ctx.Value(onLinkKey{}) == nil || h.ctrl.Forward == nil || h.cluster.IsLeader() || controllerlink.PassedOn(r.ClientID) {
		return protocol.Response{}, false
	}
	resp, err := h.ctrl.Forward.Request(controllerlink.PassingOn(ctx), r.Msg)
	if err != nil {
		return protocol.Response{}, false
	}
	return protocol.Response{Msg: resp}, true
}

// brokerRegistration registers a broker. A registration naming another
// cluster id than this node's is refused with INCONSISTENT_CLUSTER_ID. Its
// Features are the broker's Strata-internal features, recorded with the
// registration (controller.RegisterBroker). A voter that does not lead passes
// it on (passOn).
func (h *Handlers) brokerRegistration(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.passOn(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.BrokerRegistrationRequest)
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	resp.BrokerEpoch = -1
	if len(req.Listeners) == 0 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	if req.ClusterID != h.cfg.ClusterID {
		h.log.Warn("registration from another cluster refused", "broker", req.BrokerID, "cluster_id", req.ClusterID, "ours", h.cfg.ClusterID)
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return reply(resp)
	}
	l := req.Listeners[0]
	reg := controller.RegisterBroker{ID: req.BrokerID, Incarnation: req.IncarnationID, Host: l.Host, Port: int32(l.Port)}
	if req.Rack != nil {
		reg.Rack = *req.Rack
	}
	if len(req.LogDirs) > 0 { // Strata's brokers register one: the data dir's id
		reg.DirectoryID = req.LogDirs[0]
	}
	for _, ol := range req.Listeners[1:] {
		if ol.Name == controllerlink.ObserverListener {
			reg.ObserverAddr = net.JoinHostPort(ol.Host, strconv.Itoa(int(ol.Port)))
		}
	}
	for _, f := range req.Features { // Strata-internal features (metadata.SupportedFeatures)
		if reg.Features == nil {
			reg.Features = make(map[string]int32, len(req.Features))
		}
		reg.Features[f.Name] = int32(f.MaxSupportedVersion)
	}
	epoch, err := h.cluster.RegisterBroker(ctx, reg)
	resp.ErrorCode = controllerErrorCode(err)
	if err == nil {
		resp.BrokerEpoch = epoch
	}
	return reply(resp)
}

func (h *Handlers) brokerHeartbeat(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.BrokerHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	res, err := h.cluster.BrokerHeartbeat(ctx, controller.HeartbeatRequest{
		BrokerID: req.BrokerID, BrokerEpoch: req.BrokerEpoch, WantShutdown: req.WantShutdown,
		MetadataOffset: req.CurrentMetadataOffset,
	})
	resp.ErrorCode = controllerErrorCode(err)
	resp.IsCaughtUp = err == nil
	resp.IsFenced = err != nil || res.Fenced
	resp.ShouldShutdown = err == nil && res.ShouldShutdown
	return reply(resp)
}

// alterPartition hands every partition of the request to the controller at
// once: it commits them in one proposal.
func (h *Handlers) alterPartition(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.AlterPartitionRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	img := h.cluster.Image()
	var reqs []controller.AlterPartitionRequest
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionResponseTopic()
		st.Topic, st.TopidID = rt.Topic, rt.TopicID // kmsg spells it TopidID
		id := rt.TopicID
		if req.Version < 2 {
			if t := img.Topic(rt.Topic); t != nil {
				id = t.ID
			}
		}
		for _, rp := range rt.Partitions {
			isr := rp.NewISR
			var epochs []int64 // v3+ (KIP-903): each member's broker epoch, -1 unchecked
			if req.Version >= 3 {
				isr = isr[:0:0]
				for _, m := range rp.NewEpochISR {
					isr = append(isr, m.BrokerID)
					epochs = append(epochs, m.BrokerEpoch)
				}
			}
			reqs = append(reqs, controller.AlterPartitionRequest{
				BrokerID: req.BrokerID, BrokerEpoch: req.BrokerEpoch,
				TopicID: id, Partition: rp.Partition,
				LeaderEpoch: rp.LeaderEpoch, PartitionEpoch: rp.PartitionEpoch, NewISR: isr, NewISRBrokerEpochs: epochs,
			})
			sp := kmsg.NewAlterPartitionResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	results, err := h.cluster.AlterPartitions(ctx, reqs)
	if err != nil {
		// As Kafka: an error of the whole request (a stale broker epoch, not
		// the controller) is answered at the top, with no topics.
		resp.ErrorCode, resp.Topics = controllerErrorCode(err), nil
		return reply(resp)
	}
	i := 0
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			sp := &resp.Topics[ti].Partitions[pi]
			if err := results[i].Err; err != nil {
				sp.ErrorCode = controllerErrorCode(err)
				if sp.ErrorCode == kerr.NewLeaderElected.Code && req.Version < 2 {
					sp.ErrorCode = kerr.FencedLeaderEpoch.Code // as Kafka answers v0-v1
				}
			} else {
				ip := results[i].Partition
				sp.LeaderID, sp.LeaderEpoch, sp.ISR, sp.PartitionEpoch = ip.Leader, ip.LeaderEpoch, ip.ISR, ip.PartitionEpoch
			}
			i++
		}
	}
	return reply(resp)
}

func (h *Handlers) allocateProducerIDs(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.AllocateProducerIDsRequest)
	resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	block, err := h.cluster.AllocateProducerIDs(ctx, req.BrokerID, req.BrokerEpoch)
	resp.ErrorCode = controllerErrorCode(err)
	if err == nil {
		resp.ProducerIDStart, resp.ProducerIDLen = block.First, block.Len
	}
	return reply(resp)
}

// controllerErrorCode maps a controller error: not being the active controller is
// NOT_CONTROLLER, the rest as for every handler.
func controllerErrorCode(err error) int16 {
	if errors.Is(err, controller.ErrNotController) {
		return kerr.NotController.Code
	}
	return errorCode(err)
}
