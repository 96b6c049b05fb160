package handlers

// ShareGroupDescribe (key 77), v1: members, epochs and assignments of share groups.
// A group that is not a share group answers GROUP_ID_NOT_FOUND. As Kafka 4.4
// answers (checked side by side, interop/cmd/sharecompare), each group needs
// DESCRIBE on it (GROUP_AUTHORIZATION_FAILED for that group alone, the others are
// described), and the authorized operations are the principal's on the group.
// A group a member of which is assigned a topic the principal may not DESCRIBE
// is answered TOPIC_AUTHORIZATION_FAILED without its members (Kafka 4.4's
// KafkaApis.handleShareGroupDescribe).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) shareGroupDescribe(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.ShareGroupDescribeRequest)
	allowed := keep(req.GroupIDs, func(id string) bool {
		return h.authorize(ctx, c, kmsg.ACLOperationDescribe, resGroup, id)
	})
	described := map[string]kmsg.ShareGroupDescribeResponseGroup{}
	if len(allowed) > 0 {
		inner := *req
		inner.GroupIDs = allowed
		describable := h.topicCheck(ctx, c, kmsg.ACLOperationDescribe)
		for _, g := range h.groups.ShareGroupDescribe(ctx, &inner).Groups {
			if g.ErrorCode == 0 && req.IncludeAuthorizedOperations {
				g.AuthorizedOperations = h.authorizedOperations(ctx, c, resGroup, g.GroupID)
			}
			if !shareAssignsOnly(g, describable) {
				d := kmsg.NewShareGroupDescribeResponseGroup()
				msg := hiddenTopicsMessage
				d.GroupID, d.ErrorCode, d.ErrorMessage = g.GroupID, kerr.TopicAuthorizationFailed.Code, &msg
				d.Members = []kmsg.ShareGroupDescribeResponseGroupMember{}
				g = d
			}
			described[g.GroupID] = g
		}
	}
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range req.GroupIDs { // in the request's order
		g, ok := described[id]
		if !ok {
			g = kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
		}
		resp.Groups = append(resp.Groups, g)
	}
	return reply(resp)
}

// shareAssignsOnly reports whether every topic assigned to g's members passes
// ok.
func shareAssignsOnly(g kmsg.ShareGroupDescribeResponseGroup, ok func(string) bool) bool {
	for _, m := range g.Members {
		for _, tp := range m.Assignment.TopicPartitions {
			if !ok(tp.Topic) {
				return false
			}
		}
	}
	return true
}
