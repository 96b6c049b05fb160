package txn

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Brokers is how markers reach partition leaders.
type Brokers interface {
	// Leader returns the leader of a partition; exists is false when the
	// partition is not in the metadata (its topic was deleted), and leader is -1
	// while it has none.
	Leader(topic string, partition int32) (leader int32, exists bool)
	// WriteTxnMarkers sends req to broker id (the coordinator's own broker
	// may serve it in process).
	WriteTxnMarkers(ctx context.Context, broker int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error)
}

// BrokerMarkers is the MarkerWriter that sends WriteTxnMarkers to each
// partition's leader, one request per leader (the partitions a broker leads are
// written in one request), to all leaders at once, retrying with backoff
// (100 ms doubling to 2 s) until every marker is written or its topic is gone.
// A partition that answers TRANSACTION_COORDINATOR_FENCED ends it with
// ErrCoordinatorFenced.
type BrokerMarkers struct {
	Brokers Brokers
}

// WriteMarkers implements MarkerWriter.
func (b BrokerMarkers) WriteMarkers(ctx context.Context, m Markers) error {
	pending := m.Partitions
	backoff := 100 * time.Millisecond
	for {
		byLeader := map[int32][]TopicPartition{}
		var waiting []TopicPartition
		for _, tp := range pending {
			leader, exists := b.Brokers.Leader(tp.Topic, tp.Partition)
			switch {
			case !exists:
				// Deleted: nothing to mark.
			case leader < 0:
				waiting = append(waiting, tp)
			default:
				byLeader[leader] = append(byLeader[leader], tp)
			}
		}
		type result struct {
			failed []TopicPartition
			fenced bool
		}
		results := make(chan result, len(byLeader))
		for leader, tps := range byLeader {
			go func() {
				failed, fenced := b.send(ctx, leader, m, tps)
				results <- result{failed, fenced}
			}()
		}
		fenced := false
		for range byLeader {
			r := <-results
			waiting = append(waiting, r.failed...)
			fenced = fenced || r.fenced
		}
		if fenced {
			return ErrCoordinatorFenced
		}
		if len(waiting) == 0 {
			return nil
		}
		pending = waiting
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// send writes the markers of tps on leader and returns those that failed, and
// whether one was refused as from a fenced coordinator.
func (b BrokerMarkers) send(ctx context.Context, leader int32, m Markers, tps []TopicPartition) ([]TopicPartition, bool) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.CoordinatorEpoch, rm.Committed = m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Commit
	rm.TransactionVersion = m.TransactionVersion
	EachTopic(tps, func(topic string, partitions []int32) {
		t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		t.Topic, t.Partitions = topic, partitions
		rm.Topics = append(rm.Topics, t)
	})
	req.Markers = append(req.Markers, rm)
	resp, err := b.Brokers.WriteTxnMarkers(ctx, leader, req)
	if err != nil || len(resp.Markers) != 1 {
		return tps, false
	}
	fenced := false
	written := make(map[TopicPartition]bool, len(tps))
	for _, t := range resp.Markers[0].Topics {
		for _, p := range t.Partitions {
			switch p.ErrorCode {
			case 0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidProducerEpoch.Code:
				// Written, gone, or superseded by a newer epoch of the producer
				// (whose own markers end what this one would have).
				written[TopicPartition{t.Topic, p.Partition}] = true
			case kerr.TransactionCoordinatorFenced.Code:
				fenced = true
			}
		}
	}
	// A partition the answer leaves out is not written either.
	var failed []TopicPartition
	for _, tp := range tps {
		if !written[tp] {
			failed = append(failed, tp)
		}
	}
	return failed, fenced
}
