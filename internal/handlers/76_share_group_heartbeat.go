package handlers

// ShareGroupHeartbeat (key 76), v1: joining, heartbeating and leaving a KIP-932 share
// group, served by the group coordinator (package group). Members bring their own
// member ids; v0 (Kafka 4.0's early access) is not served. The answer carries the
// member's epoch and, when it changed, its assignment. As Kafka 4.4 answers (checked
// side by side, interop/cmd/sharecompare), a heartbeat that subscribes to a topic
// the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED, without a message
// and without reaching the coordinator (READ on the group: authorize.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) shareGroupHeartbeat(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.ShareGroupHeartbeatRequest)
	describable := h.topicCheck(ctx, c, kmsg.ACLOperationDescribe)
	for _, topic := range req.SubscribedTopicNames {
		if !describable(topic) {
			resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
			resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			return reply(resp)
		}
	}
	cl := group.Client{ID: c.ClientID(), Host: hostOf(c.RemoteAddr)}
	return reply(h.groups.ShareGroupHeartbeat(group.WithClient(ctx, cl), req))
}
