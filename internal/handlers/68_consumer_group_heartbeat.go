package handlers

// ConsumerGroupHeartbeat (key 68), v0-v1: the KIP-848 consumer group protocol
// (group.protocol=consumer), served by the group coordinator (package group).
//   v0: the coordinator hands out member ids on join.
//   v1: members bring their own member id; SubscribedTopicRegex.
// A heartbeat never waits: the coordinator answers with the member's epoch and,
// when it changed, its assignment. As in Kafka (KAFKA-18813), a heartbeat that
// subscribes to a topic the principal may not DESCRIBE is answered
// TOPIC_AUTHORIZATION_FAILED without reaching the coordinator, and a
// SubscribedTopicRegex resolves to the topics the principal may DESCRIBE only
// (Kafka's TopicRegexResolver).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) consumerGroupHeartbeat(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.ConsumerGroupHeartbeatRequest)
	describable := h.topicCheck(ctx, c, kmsg.ACLOperationDescribe)
	for _, topic := range req.SubscribedTopicNames {
		if !describable(topic) {
			resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
			resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			return reply(resp)
		}
	}
	cl := group.Client{ID: c.ClientID(), Host: hostOf(c.RemoteAddr), DescribeTopic: describable}
	return reply(h.groups.ConsumerGroupHeartbeat(group.WithClient(ctx, cl), req))
}
