package handlers

// DescribeCluster (key 60), v0-v1 (both flexible). v1 adds the endpoint type
// (1 = brokers; controllers are not exposed to clients).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) describeCluster(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	img := h.cluster.Image()
	resp.ClusterID = h.cfg.ClusterID
	resp.ControllerID = h.controllerID(img)
	resp.EndpointType = 1
	for _, b := range img.Brokers() {
		if b.Fenced {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.ID, b.Host, b.Port
		if b.Rack != "" {
			rack := b.Rack
			rb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	return reply(resp)
}
