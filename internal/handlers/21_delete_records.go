package handlers

// DeleteRecords (key 21), v0-v2 (v2 flexible). Offset -1 means the high-water mark;
// any other offset below 0 or above it is OFFSET_OUT_OF_RANGE. As in Kafka,
// internal topics answer INVALID_TOPIC_EXCEPTION and a topic whose
// cleanup.policy lacks delete POLICY_VIOLATION. The answer is the leader's new
// log start offset at once: unlike Kafka, it does not wait for the followers'.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/replica"
)

func (h *Handlers) deleteRecords(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	img := h.cluster.Image()
	deletable := h.topicCheck(ctx, c, kmsg.ACLOperationDelete)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			if !deletable(rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			var p *replica.Partition
			var err error
			switch {
			case img.Partition(rt.Topic, rp.Partition) == nil:
				err = metadata.ErrUnknownTopic
			case IsInternalTopic(rt.Topic):
				err = &metadata.KafkaError{Code: kerr.InvalidTopicException.Code, Msg: "cannot delete records of internal topic " + rt.Topic}
			default:
				p, err = h.leaderPartition(img, rt.Topic, rp.Partition)
			}
			if err == nil && p.Config().CleanupPolicy&metadata.CleanupDelete == 0 {
				err = &metadata.KafkaError{Code: kerr.PolicyViolation.Code, Msg: "records of a compacted topic cannot be deleted (cleanup.policy has no delete)"}
			}
			if err == nil {
				sp.LowWatermark, err = p.DeleteRecords(rp.Offset)
			}
			sp.ErrorCode = errorCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}
