package handlers

// ConsumerGroupDescribe (key 69), v0-v1: members, epochs, current and target
// assignments of KIP-848 consumer groups (v1: each member's type). A classic or
// unknown group answers GROUP_ID_NOT_FOUND, which makes admin clients fall back to
// DescribeGroups.
// Authorization, as Kafka's: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED,
// answered first, without asking the coordinator); a group whose members'
// current or target assignments hold a topic the principal may not DESCRIBE is
// answered TOPIC_AUTHORIZATION_FAILED without its members (KAFKA-18813).
// IncludeAuthorizedOperations: the operations the principal may perform on the
// group.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) consumerGroupDescribe(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	allowed := *req
	allowed.Groups = h.describableGroups(ctx, c, req.Groups, func(id string) {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group, d.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, d)
	})
	if len(allowed.Groups) == 0 {
		return reply(resp)
	}
	describable := h.topicCheck(ctx, c, kmsg.ACLOperationDescribe)
	for _, g := range h.groups.ConsumerGroupDescribe(ctx, &allowed).Groups {
		if g.ErrorCode == 0 && req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = h.authorizedOperations(ctx, c, resGroup, g.Group)
		}
		if !assignsOnly(g, describable) {
			d := kmsg.NewConsumerGroupDescribeResponseGroup()
			msg := hiddenTopicsMessage
			d.Group, d.ErrorCode, d.ErrorMessage, d.Members = g.Group, kerr.TopicAuthorizationFailed.Code, &msg, []kmsg.ConsumerGroupDescribeResponseGroupMember{}
			g = d
		}
		resp.Groups = append(resp.Groups, g)
	}
	return reply(resp)
}

// hiddenTopicsMessage is Kafka's message for a consumer or share group
// answered TOPIC_AUTHORIZATION_FAILED because a member's assignment names a
// topic the principal may not DESCRIBE.
const hiddenTopicsMessage = "The group has described topic(s) that the client is not authorized to describe."

// describableGroups returns the groups of ids the principal may DESCRIBE and
// calls denied for each of the others, in order (the group describe APIs).
func (h *Handlers) describableGroups(ctx context.Context, c *protocol.ConnInfo, ids []string, denied func(id string)) []string {
	var allowed []string
	for _, id := range ids {
		if h.authorize(ctx, c, kmsg.ACLOperationDescribe, resGroup, id) {
			allowed = append(allowed, id)
		} else {
			denied(id)
		}
	}
	return allowed
}

// assignsOnly reports whether every topic in the current and target assignments
// of g's members passes ok.
func assignsOnly(g kmsg.ConsumerGroupDescribeResponseGroup, ok func(string) bool) bool {
	for _, m := range g.Members {
		for _, a := range []kmsg.Assignment{m.Assignment, m.TargetAssignment} {
			for _, tp := range a.TopicPartitions {
				if !ok(tp.Topic) {
					return false
				}
			}
		}
	}
	return true
}
