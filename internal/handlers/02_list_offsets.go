package handlers

// ListOffsets (key 2), v1-v9.
//   v1: one offset per partition; v2: isolation level (read_committed: "latest" is
//   the last stable offset and timestamp lookups stop there); v4: current leader
//   epoch (fencing) and the leader epoch in the answer; v6+: flexible; v7: max
//   timestamp (-3); v8: earliest local (-4, the local log start; earliest (-2) is the
//   remote start on a tiered topic); v9: earliest pending upload (-5: the end of the
//   uploaded part on a tiered topic, else none: -1).
// A partition asked for twice gets INVALID_REQUEST for every entry, as in Kafka.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/replica"
)

func (h *Handlers) listOffsets(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	img := h.cluster.Image()
	describable := h.topicCheck(ctx, c, kmsg.ACLOperationDescribe)
	dups := duplicateListOffsets(req)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset = -1, -1
			if !describable(rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if dups[topicPartition{rt.Topic, rp.Partition}] {
				sp.ErrorCode = kerr.InvalidRequest.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			iso, err := isolation(req.IsolationLevel)
			var p *replica.Partition
			if err == nil {
				p, err = h.leaderPartition(img, rt.Topic, rp.Partition)
			}
			if err == nil {
				err = checkLeaderEpoch(p, rp.CurrentLeaderEpoch)
			}
			if err == nil {
				var off, ts int64
				var found bool
				off, ts, found, err = p.ListOffset(rp.Timestamp, iso)
				if found {
					sp.Offset, sp.Timestamp = off, ts
					sp.LeaderEpoch = p.LeaderEpoch()
				}
			}
			sp.ErrorCode = errorCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}

type topicPartition struct {
	topic     string
	partition int32
}

// duplicateListOffsets is the set of partitions a ListOffsets asks for more
// than once: Kafka answers every entry of them INVALID_REQUEST.
func duplicateListOffsets(req *kmsg.ListOffsetsRequest) map[topicPartition]bool {
	var seen, dups map[topicPartition]bool
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			tp := topicPartition{rt.Topic, rp.Partition}
			if seen[tp] {
				if dups == nil {
					dups = map[topicPartition]bool{}
				}
				dups[tp] = true
			}
			if seen == nil {
				seen = map[topicPartition]bool{}
			}
			seen[tp] = true
		}
	}
	return dups
}
