package handlers

// StreamsGroupTopologyDescriptionUpdate (key 93), v0: a streams member pushing
// its topology description to the broker's description plugin (KIP-1331).
// Strata has no such plugin; like a Kafka 4.4 broker without one it answers
// UNSUPPORTED_VERSION, after READ on the group (authorize.go). Members are never
// asked to push (StreamsGroupHeartbeat v1's TopologyDescriptionRequired stays
// false).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) streamsGroupTopologyDescriptionUpdate(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	resp := r.Msg.(*kmsg.StreamsGroupTopologyDescriptionUpdateRequest).ResponseKind().(*kmsg.StreamsGroupTopologyDescriptionUpdateResponse)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ErrorMessage = kmsg.StringPtr("The broker has no streams group topology description plugin configured.")
	return reply(resp)
}
