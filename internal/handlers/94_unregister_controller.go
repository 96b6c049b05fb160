package handlers

// UnregisterController (key 94), v0 (flexible): as `kafka-cluster
// unregister-controller` and `kafka-metadata-quorum remove-controller
// --unregister` send it. Answered by the active controller (forwarded from
// other brokers), ALTER on the cluster as in Kafka. Strata keeps no controller
// registration apart from the quorum's membership (controller.UnregisterController):
// INVALID_REQUEST for a voter (remove it first), success for any other node,
// CONTROLLER_ID_NOT_REGISTERED for a negative id.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) unregisterController(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.UnregisterControllerRequest)
	resp := req.ResponseKind().(*kmsg.UnregisterControllerResponse)
	if err := h.cluster.UnregisterController(ctx, req.ControllerID); err != nil {
		resp.ErrorCode = controllerErrorCode(err)
		msg := err.Error()
		resp.ErrorMessage = &msg
	}
	return reply(resp)
}
