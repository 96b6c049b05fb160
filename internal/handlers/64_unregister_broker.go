package handlers

// UnregisterBroker (key 64), v0 (flexible; KIP-500): removes a broker's
// registration, as `kafka-cluster unregister` does. Answered by the active
// controller (forwarded from other brokers). A live broker is fenced first
// (its leaderships move); its partitions keep it in their replica lists, so a
// broker being retired has its replicas moved off first. A broker-only node
// also leaves the metadata quorum's non-voting members. A process still
// running with that id registers again with its next heartbeat.
// BROKER_ID_NOT_REGISTERED for an id nobody holds.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) unregisterBroker(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.UnregisterBrokerRequest)
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	if err := h.cluster.UnregisterBroker(ctx, req.BrokerID); err != nil {
		resp.ErrorCode = controllerErrorCode(err)
		msg := err.Error()
		resp.ErrorMessage = &msg
	}
	return reply(resp)
}
