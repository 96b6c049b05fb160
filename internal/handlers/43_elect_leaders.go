package handlers

// ElectLeaders (key 43), v0-v2 (v1: election type; v2 flexible). A null
// partition list means every partition: the answer names every topic, but
// leaves out the partitions that needed no election. Else each topic is
// answered as listed (one with no partitions too).
//   type 0, preferred: moves leadership back to each partition's first replica
//     when it is live and in the ISR.
//   type 1, unclean: gives each leaderless partition a leader, the first live
//     ISR member, else the first live replica outside the ISR (which becomes
//     the whole ISR, at a new leader epoch: records only the lost ISR held are
//     gone). A partition with a leader gets ELECTION_NOT_NEEDED; one with no
//     live replica ELIGIBLE_LEADERS_NOT_AVAILABLE.
// Another type is INVALID_REQUEST.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) electLeaders(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	typ := controller.ElectionType(req.ElectionType)
	if typ != controller.ElectPreferred && typ != controller.ElectUnclean {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	var parts []controller.TopicPartitionRef
	if req.Topics != nil {
		parts = []controller.TopicPartitionRef{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, controller.TopicPartitionRef{Topic: t.Topic, Partition: p})
			}
		}
	}
	results, err := h.cluster.ElectLeaders(ctx, parts, typ)
	if err != nil {
		resp.ErrorCode = controllerErrorCode(err)
		return reply(resp)
	}
	h.awaitLocalApply(ctx)
	if req.Topics == nil {
		// Every topic is answered, without the partitions that needed no
		// election, as Kafka's controller does; the results come topic by topic.
		for _, res := range results {
			if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != res.Topic {
				t := kmsg.NewElectLeadersResponseTopic()
				t.Topic = res.Topic
				resp.Topics = append(resp.Topics, t)
			}
			if !errors.Is(res.Err, metadata.ErrElectionNotNeeded) {
				last := &resp.Topics[len(resp.Topics)-1]
				last.Partitions = append(last.Partitions, electedPartition(res))
			}
		}
		return reply(resp)
	}
	// Each topic as listed, with its results in order.
	next := 0
	for _, rt := range req.Topics {
		t := kmsg.NewElectLeadersResponseTopic()
		t.Topic = rt.Topic
		for range rt.Partitions {
			t.Partitions = append(t.Partitions, electedPartition(results[next]))
			next++
		}
		resp.Topics = append(resp.Topics, t)
	}
	return reply(resp)
}

// electedPartition is one partition's answer.
func electedPartition(res controller.ElectResult) kmsg.ElectLeadersResponseTopicPartition {
	p := kmsg.NewElectLeadersResponseTopicPartition()
	p.Partition = res.Partition
	if res.Err != nil {
		p.ErrorCode = errorCode(res.Err)
		msg := res.Err.Error()
		p.ErrorMessage = &msg
	}
	return p
}
