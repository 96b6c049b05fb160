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
	// WriteTxnMarkers sends req to broker id.
	WriteTxnMarkers(ctx context.Context, broker int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error)
}

// BrokerMarkers is the MarkerWriter that sends WriteTxnMarkers to each
// partition's leader, retrying with backoff (100 ms doubling to 2 s) until every
// marker is written or its topic is gone.
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
		for leader, tps := range byLeader {
			waiting = append(waiting, b.send(ctx, leader, m, tps)...)
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

// send writes the markers of tps on leader and returns those that failed.
func (b BrokerMarkers) send(ctx context.Context, leader int32, m Markers, tps []TopicPartition) []TopicPartition {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed = m.ProducerID, m.ProducerEpoch, m.Commit
	EachTopic(tps, func(topic string, partitions []int32) {
		t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		t.Topic, t.Partitions = topic, partitions
		rm.Topics = append(rm.Topics, t)
	})
	req.Markers = append(req.Markers, rm)
	resp, err := b.Brokers.WriteTxnMarkers(ctx, leader, req)
	if err != nil || len(resp.Markers) != 1 {
		return tps
	}
	var failed []TopicPartition
	for _, t := range resp.Markers[0].Topics {
		for _, p := range t.Partitions {
			switch p.ErrorCode {
			case 0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidProducerEpoch.Code:
				// Written, gone, or superseded by a newer epoch of the producer
				// (whose own markers end what this one would have).
			default:
				failed = append(failed, TopicPartition{t.Topic, p.Partition})
			}
		}
	}
	return failed
}
