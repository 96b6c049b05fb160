package handlers

// DescribeShareGroupOffsets (key 90), v0-v1: the start offset (and leader epoch) of
// share partitions, served by the group's coordinator (package group), which reads
// the share-partition state wherever it lives. A group naming no topics describes
// every share partition of the group with state; one without state answers start
// offset -1, not an error.
//   v1: the share-partition lag (KIP-1226), -1 when unknown.
// As Kafka 4.4 answers (checked side by side, interop/cmd/sharecompare), a group
// needs DESCRIBE on it (GROUP_AUTHORIZATION_FAILED for that group), and a named
// topic the principal may not DESCRIBE has its partitions answered
// TOPIC_AUTHORIZATION_FAILED; a group naming no topics is shown only those it may.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

// msgTopicDenied is Kafka's message for a topic denied in the share-group
// offset APIs.
const msgTopicDenied = "Topic authorization failed."

func (h *Handlers) describeShareGroupOffsets(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeShareGroupOffsetsRequest)
	describable := h.topicCheck(ctx, c, kmsg.ACLOperationDescribe)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, rg := range req.Groups {
		if !h.authorize(ctx, c, kmsg.ACLOperationDescribe, resGroup, rg.GroupID) {
			g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			g.GroupID, g.ErrorCode = rg.GroupID, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		var denied []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
		if rg.Topics != nil {
			rg.Topics = keep(rg.Topics, func(t kmsg.DescribeShareGroupOffsetsRequestGroupTopic) bool {
				if describable(t.Topic) {
					return true
				}
				dt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				dt.Topic = t.Topic
				for _, p := range t.Partitions {
					dp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
					dp.Partition, dp.StartOffset = p, -1
					dp.ErrorCode, dp.ErrorMessage = kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr(msgTopicDenied)
					dt.Partitions = append(dt.Partitions, dp)
				}
				denied = append(denied, dt)
				return false
			})
		}
		inner := *req
		inner.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{rg}
		for _, g := range h.groups.DescribeShareGroupOffsets(ctx, &inner).Groups {
			if rg.Topics == nil { // every topic with state: only those it may see
				g.Topics = keep(g.Topics, func(t kmsg.DescribeShareGroupOffsetsResponseGroupTopic) bool { return describable(t.Topic) })
			}
			if g.ErrorCode == 0 {
				g.Topics = append(g.Topics, denied...)
			}
			resp.Groups = append(resp.Groups, g)
		}
	}
	return reply(resp)
}
