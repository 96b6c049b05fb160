package handlers

// DeleteShareGroupOffsets (key 92), v0: the share-partition state of an empty share
// group goes for every partition of the named topics (package group), so they start
// again at share.auto.offset.reset. GROUP_ID_NOT_FOUND and NON_EMPTY_GROUP at the top;
// UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist or has no state. As
// Kafka 4.4 answers (checked side by side, interop/cmd/sharecompare), it needs
// DELETE on the group (authorize.go) and READ on each topic: a topic the principal
// may not READ is answered TOPIC_AUTHORIZATION_FAILED, unless the group itself is
// refused.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) deleteShareGroupOffsets(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DeleteShareGroupOffsetsRequest)
	readable := h.topicCheck(ctx, c, kmsg.ACLOperationRead)
	var denied []kmsg.DeleteShareGroupOffsetsResponseTopic
	req.Topics = keep(req.Topics, func(t kmsg.DeleteShareGroupOffsetsRequestTopic) bool {
		if readable(t.Topic) {
			return true
		}
		dt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		dt.Topic, dt.ErrorCode, dt.ErrorMessage = t.Topic, kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr(msgTopicDenied)
		denied = append(denied, dt)
		return false
	})
	return waitFor(func(ctx context.Context) kmsg.Response {
		resp := h.groups.DeleteShareGroupOffsets(ctx, req)
		if resp.ErrorCode == 0 {
			resp.Topics = append(resp.Topics, denied...)
		}
		return resp
	})
}
