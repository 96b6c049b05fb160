package handlers

// ListOffsets (key 2), v1-v11.
//   v1: one offset per partition; v2: isolation level (read_committed: "latest" is
//   the last stable offset and timestamp lookups stop there); v4: current leader
//   epoch (fencing) and the leader epoch in the answer; v6+: flexible; v7: max
//   timestamp (-3); v8: earliest local (-4, the local log start; earliest (-2) is the
//   remote start on a tiered topic); v9: latest tiered (-5, KIP-1005: the last
//   offset in the object store, -1 before the first upload or on a topic that is
//   not tiered); v10: TimeoutMillis (KIP-1075): above 0 it bounds, for the whole
//   request, the timestamp lookups in the object store of tiered partitions
//   (each partition still waiting when it passes is REQUEST_TIMED_OUT with offset
//   and timestamp -1, as in Kafka; 0 or less, or before v10: 30 s, Kafka's
//   remote.list.offsets.request.timeout.ms default); v11: earliest pending
//   upload (-6, KIP-1023: the first offset not yet uploaded; -1 when not tiered).
// The current leader epoch is checked before leadership, as in Kafka: a
// follower hosted here answers FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH to
// an epoch other than its own (leaderPartitionAt).
// A leader whose high-water mark has not reached the start of its epoch answers
// "latest" OFFSET_NOT_AVAILABLE, LEADER_NOT_AVAILABLE before v5 (as Kafka).
// A special timestamp older than the request's version gets UNSUPPORTED_VERSION
// (as Kafka: -3 needs v7, -4 v8, -5 v9, -6 v11), and so does any other
// negative timestamp, at every version.
// A partition asked for twice gets INVALID_REQUEST for every entry, as in Kafka.

import (
	"context"
	"errors"
	"time"

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
	lookupCtx, cancel := context.WithTimeout(ctx, listOffsetsTimeout(req))
	defer cancel()
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
			if v, special := listOffsetsMinVersion[rp.Timestamp]; rp.Timestamp < 0 && (!special || req.Version < v) {
				sp.ErrorCode = kerr.UnsupportedVersion.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			iso, err := isolation(req.IsolationLevel)
			var p *replica.Partition
			if err == nil {
				p, err = h.leaderPartitionAt(img, rt.Topic, rp.Partition, rp.CurrentLeaderEpoch)
			}
			if err == nil {
				var off, ts int64
				var epoch int32
				var found bool
				off, ts, epoch, found, err = p.ListOffset(lookupCtx, rp.Timestamp, iso)
				if err != nil && errors.Is(lookupCtx.Err(), context.DeadlineExceeded) {
					err = lookupCtx.Err() // listOffsetsTimeout passed: REQUEST_TIMED_OUT
				}
				if found {
					sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, ts, epoch
				}
			}
			sp.ErrorCode = errorCode(err)
			if sp.ErrorCode == kerr.OffsetNotAvailable.Code && req.Version < 5 {
				sp.ErrorCode = kerr.LeaderNotAvailable.Code // as Kafka: v5 brought OFFSET_NOT_AVAILABLE
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}

// remoteListOffsetsTimeout bounds a request's timestamp lookups in the object
// store when it names no TimeoutMillis: Kafka's
// remote.list.offsets.request.timeout.ms default.
const remoteListOffsetsTimeout = 30 * time.Second

// listOffsetsTimeout is how long a request's timestamp lookups in the object
// store may take together: v10's TimeoutMillis when above 0, else
// remoteListOffsetsTimeout, as Kafka 4.4 does.
func listOffsetsTimeout(req *kmsg.ListOffsetsRequest) time.Duration {
	if req.Version >= 10 && req.TimeoutMillis > 0 {
		return time.Duration(req.TimeoutMillis) * time.Millisecond
	}
	return remoteListOffsetsTimeout
}

// listOffsetsMinVersion is the first ListOffsets version that may ask for each
// special timestamp; a negative timestamp not listed is none.
var listOffsetsMinVersion = map[int64]int16{
	replica.LatestTimestamp:                1,
	replica.EarliestTimestamp:              1,
	replica.MaxTimestamp:                   7,
	replica.EarliestLocalTimestamp:         8,
	replica.LatestTieredTimestamp:          9,
	replica.EarliestPendingUploadTimestamp: 11,
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
