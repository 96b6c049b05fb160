package handlers

// ShareAcknowledge (key 79), v1-v2: a share-group member acknowledges records it
// acquired (ACCEPT, RELEASE, REJECT; RENEW from v2) outside a ShareFetch. A record the
// member does not hold is INVALID_RECORD_STATE. Needs READ on the group and on each
// topic (TOPIC_AUTHORIZATION_FAILED for the partitions of a topic it may not read). The answer comes once the new state
// is durable, so it finishes off the connection's goroutine.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) shareAcknowledge(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.ShareAcknowledgeRequest)
	readable := h.shareTopicCheck(ctx, c)
	var denied []kmsg.ShareAcknowledgeResponseTopic
	req.Topics = keep(req.Topics, func(t kmsg.ShareAcknowledgeRequestTopic) bool {
		if readable(t.TopicID) {
			return true
		}
		st := kmsg.NewShareAcknowledgeResponseTopic()
		st.TopicID = t.TopicID
		for _, p := range t.Partitions {
			sp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			st.Partitions = append(st.Partitions, sp)
		}
		denied = append(denied, st)
		return false
	})
	return waitFor(func(ctx context.Context) kmsg.Response {
		resp := h.cfg.Shares.ShareAcknowledge(ctx, req)
		if resp.ErrorCode == 0 {
			resp.Topics = append(resp.Topics, denied...)
		}
		return resp
	})
}
