package handlers

// AlterShareGroupOffsets (key 91), v0: share partitions of an empty share group
// start again at the given offsets, with nothing in flight (package group). A group
// that does not exist is created empty, as Kafka 4.4 does; a non-empty one answers
// NON_EMPTY_GROUP, one that is not a share group GROUP_ID_NOT_FOUND, an unknown topic
// or partition UNKNOWN_TOPIC_OR_PARTITION per partition. As Kafka 4.4 answers
// (checked side by side, interop/cmd/sharecompare), it needs READ on the group
// (authorize.go) and on each topic: the partitions of a topic the principal may
// not READ are answered TOPIC_AUTHORIZATION_FAILED, unless the group itself is
// refused (NON_EMPTY_GROUP, ...).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) alterShareGroupOffsets(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.AlterShareGroupOffsetsRequest)
	readable := h.topicCheck(ctx, c, kmsg.ACLOperationRead)
	var denied []kmsg.AlterShareGroupOffsetsResponseTopic
	req.Topics = keep(req.Topics, func(t kmsg.AlterShareGroupOffsetsRequestTopic) bool {
		if readable(t.Topic) {
			return true
		}
		dt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		dt.Topic = t.Topic
		for _, p := range t.Partitions {
			dp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			dp.Partition, dp.ErrorCode, dp.ErrorMessage = p.Partition, kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr(msgTopicDenied)
			dt.Partitions = append(dt.Partitions, dp)
		}
		denied = append(denied, dt)
		return false
	})
	return waitFor(func(ctx context.Context) kmsg.Response {
		resp := h.groups.AlterShareGroupOffsets(ctx, req)
		if resp.ErrorCode == 0 {
			resp.Topics = append(resp.Topics, denied...)
		}
		return resp
	})
}
