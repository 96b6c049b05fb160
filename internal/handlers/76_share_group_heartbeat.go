package handlers

// ShareGroupHeartbeat (key 76), v1: joining, heartbeating and leaving a KIP-932 share
// group, served by the group coordinator (package group). Members bring their own
// member ids; v0 (Kafka 4.0's early access) is not served. The answer carries the
// member's epoch and, when it changed, its assignment.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) shareGroupHeartbeat(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	cl := group.Client{ID: c.ClientID(), Host: hostOf(c.RemoteAddr)}
	return reply(h.groups.ShareGroupHeartbeat(group.WithClient(ctx, cl), r.Msg.(*kmsg.ShareGroupHeartbeatRequest)))
}
