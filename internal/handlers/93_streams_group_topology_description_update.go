package handlers

// StreamsGroupTopologyDescriptionUpdate (key 93), v0: a streams member pushing
// its topology description to the broker's description plugin (KIP-1331).
// Strata has no such plugin: the coordinator answers UNSUPPORTED_VERSION as a
// Kafka 4.4 broker without one does, after READ on the group (authorize.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) streamsGroupTopologyDescriptionUpdate(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	return reply(h.groups.StreamsGroupTopologyDescriptionUpdate(ctx, r.Msg.(*kmsg.StreamsGroupTopologyDescriptionUpdateRequest)))
}
