package handlers

// WriteTxnMarkers (key 27), v1-v2 (v1+ flexible; v0 was removed in Kafka 4.0).
//   v2: the transaction version of the marker (KIP-1228): a marker of version 2
//   must carry an epoch above the producer's on the partition (its coordinator
//   bumped the epoch), else INVALID_PRODUCER_EPOCH: a late or repeated marker
//   cannot end the producer's next transaction. v1 accepts the equal epoch.
// Writes a commit or abort marker (a control batch) for a producer on each listed
// partition this broker leads, then waits for the high-water mark to pass every
// marker (acks=all), up to writeTxnMarkersTimeout. A transaction coordinator sends
// it to partition leaders; kafka-transactions.sh abort sends it too. Errors are per
// partition: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_PRODUCER_EPOCH (a marker older than the producer's epoch, or of version
// 2 and not newer; answered, like a written marker, once the high-water mark
// passes the log end at the refusal: a coordinator counts the refusal as its
// marker written, by itself before or superseded by a later one, and what
// did that may not be committed yet),
// TRANSACTION_COORDINATOR_FENCED (a marker whose CoordinatorEpoch is older than
// that of the producer's last marker on the partition: a deposed coordinator's),
// REQUEST_TIMED_OUT.
// A marker committed on a partition of __consumer_offsets also completes the
// transaction's offset commits there (the group coordinator applies or drops them).
// This broker's own transaction coordinator writes the markers of the partitions
// led here in process (WriteTxnMarkersHere): the same appends and waits, without
// a round trip through the listener.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/replica"
)

// writeTxnMarkersTimeout bounds the wait for markers to be replicated (Kafka uses
// the broker's request.timeout.ms, 30 s by default).
const writeTxnMarkersTimeout = 30 * time.Second

// WriteTxnMarkersHere serves a WriteTxnMarkers request of this broker's
// transaction coordinator in process, as the listener would serve it (the
// markers appended on the partitions led here, answered once the high-water
// mark passes each or ctx ends).
func (h *Handlers) WriteTxnMarkersHere(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	resp := h.writeTxnMarkers(ctx, nil, &protocol.Request{Msg: req})
	if resp.Wait != nil {
		resp = resp.Wait(ctx)
	}
	return resp.Msg.(*kmsg.WriteTxnMarkersResponse)
}

func (h *Handlers) writeTxnMarkers(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	type waiting struct {
		sp       *kmsg.WriteTxnMarkersResponseMarkerTopicPartition
		p        *replica.Partition
		appended replica.AppendResult // the marker's append; for a refused one, the log end then
		marker   batch.Marker
		// refused is ErrInvalidProducerEpoch, answered once the log end at the
		// refusal is committed.
		refused error
	}
	var waits []waiting
	img := h.cluster.Image()
	now := time.Now().UnixMilli()
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	for mi, rm := range req.Markers {
		sm := &resp.Markers[mi]
		*sm = kmsg.NewWriteTxnMarkersResponseMarker()
		sm.ProducerID = rm.ProducerID
		sm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(rm.Topics))
		marker := batch.Marker{
			ProducerID: rm.ProducerID, ProducerEpoch: rm.ProducerEpoch,
			CoordinatorEpoch: rm.CoordinatorEpoch, Commit: rm.Committed, Timestamp: now,
		}
		for ti, rt := range rm.Topics {
			st := &sm.Topics[ti]
			*st = kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = rt.Topic
			st.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(rt.Partitions))
			for pi, index := range rt.Partitions {
				sp := &st.Partitions[pi]
				*sp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition = index
				p, err := h.leaderPartition(img, rt.Topic, index)
				if err == nil {
					var res replica.AppendResult
					res, err = p.WriteTxnMarker(marker, rm.TransactionVersion)
					switch {
					case err == nil:
						waits = append(waits, waiting{sp, p, res, marker, nil})
					case errors.Is(err, replica.ErrInvalidProducerEpoch):
						waits = append(waits, waiting{sp, p, replica.AppendResult{LastOffset: p.LogEndOffset() - 1}, marker, err})
					}
				}
				sp.ErrorCode = errorCode(err)
			}
		}
	}
	if len(waits) == 0 {
		return reply(resp)
	}
	deadline := time.Now().Add(writeTxnMarkersTimeout)
	return protocol.Response{Wait: func(ctx context.Context) protocol.Response {
		for _, w := range waits {
			// Pointers into the response stay valid: every slice was sized up front.
			var err error
			if w.refused != nil {
				err = w.p.WaitHighWatermark(ctx, w.appended.LastOffset+1, time.Until(deadline))
			} else {
				err = w.p.WaitCommitted(ctx, w.appended, time.Until(deadline))
			}
			if err == nil && w.p.Topic == group.OffsetsTopic && w.refused == nil {
				// The transaction's offset commits on this partition take
				// effect: at its marker, or at a retry of it (written again),
				// when the wait of the first one failed and so did not apply
				// them.
				h.groups.CompleteTxnOffsets(w.p.Index, w.marker.ProducerID, w.marker.Commit)
			}
			if err == nil && w.refused != nil {
				err = w.refused
			}
			w.sp.ErrorCode = errorCode(err)
		}
		return reply(resp)
	}}
}
