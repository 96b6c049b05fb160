package handlers

// DescribeTopicPartitions (key 75), v0 (flexible; KIP-966). Kafka 4.x's
// AdminClient describeTopics (kafka-topics --describe) uses it in place of
// Metadata, a page at a time. As Kafka 4.4's handler answers (checked side by
// side with a Kafka 4.4 node, see describe_topic_partitions_test.go):
//   - No topics means every topic: those the principal may not DESCRIBE are
//     left out. Named topics are deduplicated; one it may not DESCRIBE is
//     TOPIC_AUTHORIZATION_FAILED (zero topic id), listed after the others
//     whatever the page (every such topic from the cursor's on, in every page),
//     an unknown one UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
//     invalid name). No topic is created.
//   - Topics come in name order, partitions in index order, from the Cursor
//     (topic, first partition) on: topics named before the cursor's topic are
//     skipped. At most ResponsePartitionLimit partitions (clamped to
//     1..maxDescribePartitions) are answered; NextCursor then names the first
//     partition left out. A topic none of whose partitions fit is left out whole.
//   - A cursor topic not among the named topics, or a negative cursor partition,
//     is INVALID_REQUEST on every named topic.
//   - A partition whose leader is not a registered broker has leader -1 (no
//     partition error); a fenced leader is named, as Kafka's metadata cache
//     answers (its replica is offline).
//     Strata has no eligible leader replicas: EligibleLeaderReplicas and
//     LastKnownELR are empty (never null: Kafka's client reads them as lists).
//   - Every topic answered but the denied ones has its authorized operations
//     (unknown topics too, as in Kafka).

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

// maxDescribePartitions caps ResponsePartitionLimit: Kafka's
// max.request.partition.size.limit default.
const maxDescribePartitions = 2000

func (h *Handlers) describeTopicPartitions(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	img := h.cluster.Image()
	all := len(req.Topics) == 0
	var cursor kmsg.DescribeTopicPartitionsRequestCursor
	if req.Cursor != nil {
		cursor = *req.Cursor
	}

	var names []string
	if all {
		for _, t := range img.Topics() {
			if t.Name >= cursor.Topic {
				names = append(names, t.Name)
			}
		}
	} else {
		for _, t := range req.Topics {
			if t.Topic >= cursor.Topic {
				names = append(names, t.Topic)
			}
		}
		slices.Sort(names)
		names = slices.Compact(names)
		if req.Cursor != nil && !slices.Contains(names, cursor.Topic) {
			return reply(invalidDescribeTopicPartitions(req))
		}
	}
	if cursor.Partition < 0 {
		return reply(invalidDescribeTopicPartitions(req))
	}

	describable := h.topicCheck(ctx, c, kmsg.ACLOperationDescribe)
	remaining := int(max(min(req.ResponsePartitionLimit, maxDescribePartitions), 1))
	var denied []kmsg.DescribeTopicPartitionsResponseTopic
	allowed := names[:0:0]
	for _, name := range names {
		if describable(name) {
			allowed = append(allowed, name)
		} else if !all {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = &name, kerr.TopicAuthorizationFailed.Code
			denied = append(denied, rt)
		}
	}
	for _, name := range allowed {
		if remaining == 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name}
			break
		}
		t := img.Topic(name)
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic, rt.IsInternal = &name, IsInternalTopic(name)
		rt.AuthorizedOperations = h.authorizedOperations(ctx, c, resTopic, name)
		if t == nil {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if metadata.ValidateTopicName(name) != nil {
				rt.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		first := 0
		if name == cursor.Topic {
			first = min(int(cursor.Partition), len(t.Partitions))
		}
		end := min(len(t.Partitions), first+remaining)
		rt.TopicID = t.ID
		rt.Partitions = make([]kmsg.DescribeTopicPartitionsResponseTopicPartition, 0, end-first)
		for _, p := range t.Partitions[first:end] {
			rt.Partitions = append(rt.Partitions, describePartition(img, p))
		}
		resp.Topics = append(resp.Topics, rt)
		remaining -= end - first
		if end < len(t.Partitions) {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: int32(end)}
			break
		}
	}
	resp.Topics = append(resp.Topics, denied...)
	return reply(resp)
}

// describePartition is DescribeTopicPartitions' answer for p.
func describePartition(img *metadata.Image, p *metadata.Partition) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	rp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	rp.Partition, rp.LeaderEpoch = p.Index, p.LeaderEpoch
	rp.Replicas, rp.ISR = p.Replicas, p.ISR
	rp.EligibleLeaderReplicas, rp.LastKnownELR = []int32{}, []int32{}
	rp.OfflineReplicas = offlineReplicas(img, p)
	rp.LeaderID = p.Leader
	if !leaderRegistered(img, p) {
		rp.LeaderID = metadata.NoLeader
	}
	return rp
}

// invalidDescribeTopicPartitions is Kafka's answer to a request it refuses:
// INVALID_REQUEST on each topic named, in the request's order.
func invalidDescribeTopicPartitions(req *kmsg.DescribeTopicPartitionsRequest) *kmsg.DescribeTopicPartitionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic, rt.ErrorCode = &t.Topic, kerr.InvalidRequest.Code
		rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
