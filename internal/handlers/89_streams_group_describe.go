package handlers

// StreamsGroupDescribe (key 89), v0-v1: epochs, topology and members (process,
// endpoint, current and target tasks) of KIP-1071 streams groups. A group that
// does not exist or is not a streams group answers GROUP_ID_NOT_FOUND.
//   v1: IncludeTopologyDescription answers NOT_STORED (no description plugin,
//   as a Kafka broker without one); the assignor's name.
// Authorization, as Kafka's: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED,
// without asking the coordinator); a group whose topology names a topic the
// principal may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED without its
// topology and members. IncludeAuthorizedOperations: the operations the
// principal may perform on the group.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) streamsGroupDescribe(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.StreamsGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.StreamsGroupDescribeResponse)
	allowed := *req
	allowed.Groups = h.describableGroups(ctx, c, req.Groups, func(id string) {
		d := kmsg.NewStreamsGroupDescribeResponseGroup()
		d.Group, d.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, d)
	})
	if len(allowed.Groups) == 0 {
		return reply(resp)
	}
	describable := h.topicCheck(ctx, c, kmsg.ACLOperationDescribe)
	for _, g := range h.groups.StreamsGroupDescribe(ctx, &allowed).Groups {
		if g.ErrorCode == 0 && req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = h.authorizedOperations(ctx, c, resGroup, g.Group)
		}
		if g.Topology != nil && !topologyOnly(g.Topology, describable) {
			d := kmsg.NewStreamsGroupDescribeResponseGroup()
			msg := "The described group uses topics that the client is not authorized to describe."
			d.Group, d.ErrorCode, d.ErrorMessage = g.Group, kerr.TopicAuthorizationFailed.Code, &msg
			d.Members = []kmsg.StreamsGroupDescribeResponseGroupMember{}
			g = d
		}
		resp.Groups = append(resp.Groups, g)
	}
	return reply(resp)
}

// topologyOnly reports whether every topic of a described topology passes ok.
func topologyOnly(top *kmsg.StreamsGroupDescribeResponseGroupTopology, ok func(string) bool) bool {
	for _, s := range top.Subtopologies {
		for _, t := range slices.Concat(s.SourceTopics, s.RepartitionSinkTopics) {
			if !ok(t) {
				return false
			}
		}
		for _, ti := range slices.Concat(s.StateChangelogTopics, s.RepartitionSourceTopics) {
			if !ok(ti.Topic) {
				return false
			}
		}
	}
	return true
}
