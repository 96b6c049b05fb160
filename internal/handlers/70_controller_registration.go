package handlers

// ControllerRegistration (key 70), v0, on the controller link only: a
// controller-only voter reports its data directory to the active controller,
// which records it as the voter's (controller.RegisterController; other
// voters' come from their broker registrations). As Kafka's controllers
// register with it (KIP-919), but IncarnationId carries the node's data
// directory id (its directory.id), which is what identifies a Strata voter's
// incarnation, and Features its Strata-internal features. Listeners are not
// used: the quorum knows the voter's address. INVALID_VOTER_KEY when the
// quorum recorded another directory for the voter; NOT_CONTROLLER from a node
// that is not the active controller.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) controllerRegistration(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.ControllerRegistrationRequest)
	resp := req.ResponseKind().(*kmsg.ControllerRegistrationResponse)
	features := make(map[string]int32, len(req.Features))
	for _, f := range req.Features {
		features[f.Name] = int32(f.MaxSupportedVersion)
	}
	if err := h.cluster.RegisterController(ctx, req.ControllerID, req.IncarnationID, features); err != nil {
		resp.ErrorCode = controllerErrorCode(err)
		msg := err.Error()
		resp.ErrorMessage = &msg
	}
	return reply(resp)
}
