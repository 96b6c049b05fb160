package handlers

// DescribeCluster (key 60), v0-v2 (all flexible). v1 adds the endpoint type: this
// is a broker endpoint (1), and a request for controllers (2) is answered
// MISMATCHED_ENDPOINT_TYPE, as a Kafka broker answers it (controllers are not
// exposed to clients); any other type is UNSUPPORTED_ENDPOINT_TYPE. (On the
// controller listener, controller_listener.go, v0 asks for brokers:
// INVALID_REQUEST.) v2 adds
// IncludeFencedBrokers (KIP-1073): fenced brokers are listed too, marked IsFenced
// (`kafka-cluster list-endpoints --include-fenced-brokers`).
// As in Kafka, anyone may describe the cluster: DESCRIBE on the cluster only
// decides IncludeClusterAuthorizedOperations' answer (0 without it).

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/protocol"
)

// brokerEndpoint is DescribeCluster's endpoint type of a broker listener.
const brokerEndpoint = 1

// controllerEndpoint is DescribeCluster's endpoint type of a controller listener.
const controllerEndpoint = 2

func (h *Handlers) describeCluster(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if !h.startClusterDescription(ctx, c, req, r.Version, resp, brokerEndpoint) {
		return reply(resp)
	}
	img := h.cluster.Image()
	resp.ClusterID = h.cfg.ClusterID
	resp.ControllerID = h.controllerID(img)
	for _, b := range img.Brokers() {
		if b.Fenced && !req.IncludeFencedBrokers {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.IsFenced = b.ID, b.Host, b.Port, b.Fenced
		if b.Rack != "" {
			rack := b.Rack
			rb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	return reply(resp)
}

// startClusterDescription starts resp, a DescribeCluster answer from a
// listener of endpoint type served to req (of version): false, with the error
// set, when req asks for another type (v0 has none: the schema's default,
// broker). As Kafka's AuthHelper, that is MISMATCHED_ENDPOINT_TYPE for the
// other of broker and controller, UNSUPPORTED_ENDPOINT_TYPE for any other,
// INVALID_REQUEST on v0, and the refusal keeps the default endpoint type; else
// the cluster's authorized operations when asked for.
func (h *Handlers) startClusterDescription(ctx context.Context, c *protocol.ConnInfo, req *kmsg.DescribeClusterRequest, version int16, resp *kmsg.DescribeClusterResponse, served int8) bool {
	asked := req.EndpointType
	if version == 0 {
		asked = brokerEndpoint
	}
	if asked != served {
		names := map[int8]string{brokerEndpoint: "broker", controllerEndpoint: "controller"}
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		msg := "this is a " + names[served] + " endpoint; the request asked for endpoint type " + strconv.Itoa(int(asked))
		if names[asked] == "" {
			resp.ErrorCode = kerr.UnsupportedEndpointType.Code
			msg = "unsupported endpoint type " + strconv.Itoa(int(asked))
		}
		if version == 0 {
			resp.ErrorCode = kerr.InvalidRequest.Code
		}
		resp.ErrorMessage = &msg
		return false
	}
	resp.EndpointType = served
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = h.clusterAuthorizedOperations(ctx, c)
	}
	return true
}

// clusterAuthorizedOperations is the cluster's authorized operations as
// DescribeCluster and Metadata (v8-v10) answer them: 0 without DESCRIBE on
// the cluster.
func (h *Handlers) clusterAuthorizedOperations(ctx context.Context, c *protocol.ConnInfo) int32 {
	if !h.authorizeCluster(ctx, c, kmsg.ACLOperationDescribe) {
		return 0
	}
	return h.authorizedOperations(ctx, c, resCluster, acl.ClusterName)
}
