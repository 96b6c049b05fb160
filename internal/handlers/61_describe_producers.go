package handlers

// DescribeProducers (key 61), v0 (flexible). For each partition this broker
// leads: the producers it knows (id, epoch, last sequence, last timestamp) and the
// first offset of each one's open transaction (-1: none) and the coordinator
// epoch of its last marker (-1: none), as kafka-transactions.sh
// describe-producers, find-hanging and abort (and strata txn) use them. Other
// partitions: NOT_LEADER_OR_FOLLOWER or
// UNKNOWN_TOPIC_OR_PARTITION. As in Kafka, each topic is checked first: an
// invalid name is INVALID_TOPIC_EXCEPTION, a topic the principal may not READ
// TOPIC_AUTHORIZATION_FAILED, for each of its partitions.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/replica"
)

func (h *Handlers) describeProducers(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	img := h.cluster.Image()
	readable := h.topicCheck(ctx, c, kmsg.ACLOperationRead)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		topicErr := metadata.ValidateTopicName(rt.Topic)
		if topicErr == nil && !readable(rt.Topic) {
			topicErr = &metadata.KafkaError{Code: kerr.TopicAuthorizationFailed.Code, Msg: kerr.TopicAuthorizationFailed.Description}
		}
		for _, index := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = index
			var p *replica.Partition
			err := topicErr
			if err == nil {
				p, err = h.leaderPartition(img, rt.Topic, index)
			}
			var producers []replica.ProducerInfo
			if err == nil {
				producers, err = p.Producers()
			}
			if sp.ErrorCode = errorCode(err); err != nil {
				msg := err.Error()
				sp.ErrorMessage = &msg
			}
			for _, pi := range producers {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence, ap.LastTimestamp = pi.ProducerID, int32(pi.ProducerEpoch), pi.LastSequence, pi.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.TxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}
