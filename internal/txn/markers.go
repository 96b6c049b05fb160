package txn

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
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
//
// Markers still not written WarnAfter (default 5 s) after the first try are
// logged once at Warn with the partitions left and why each failed last: a
// transaction whose markers cannot be written holds its partitions' last
// stable offset, and its producer's next transaction, until they are.
type BrokerMarkers struct {
	Brokers   Brokers
	Log       *slog.Logger // nil: no log
	WarnAfter time.Duration
}

// defaultMarkerWarnAfter is BrokerMarkers.WarnAfter when it is zero.
const defaultMarkerWarnAfter = 5 * time.Second

// WriteMarkers implements MarkerWriter.
func (b BrokerMarkers) WriteMarkers(ctx context.Context, m Markers) error {
	pending := m.Partitions
	backoff := 100 * time.Millisecond
	start, warned := time.Now(), false
	for {
		byLeader := map[int32][]TopicPartition{}
		var waiting []TopicPartition
		why := map[TopicPartition]string{}
		for _, tp := range pending {
			leader, exists := b.Brokers.Leader(tp.Topic, tp.Partition)
			switch {
			case !exists:
				// Deleted: nothing to mark.
			case leader < 0:
				waiting = append(waiting, tp)
				why[tp] = "no leader"
			default:
				byLeader[leader] = append(byLeader[leader], tp)
			}
		}
		type result struct {
			failed map[TopicPartition]string
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
			for tp, reason := range r.failed {
				waiting = append(waiting, tp)
				why[tp] = reason
			}
			fenced = fenced || r.fenced
		}
		if fenced {
			return ErrCoordinatorFenced
		}
		if len(waiting) == 0 {
			if warned {
				b.Log.Info("transaction markers written", "producer_id", m.ProducerID, "producer_epoch", m.ProducerEpoch,
					"commit", m.Commit, "after", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		if !warned && b.Log != nil && time.Since(start) >= cmp.Or(b.WarnAfter, defaultMarkerWarnAfter) {
			warned = true
			b.Log.Warn("transaction markers not written yet: retrying", "producer_id", m.ProducerID, "producer_epoch", m.ProducerEpoch,
				"commit", m.Commit, "coordinator_epoch", m.CoordinatorEpoch, "for", time.Since(start).Round(time.Millisecond), "partitions", reasons(waiting, why))
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

// reasons lists partitions tps with why each failed, for a log.
func reasons(tps []TopicPartition, why map[TopicPartition]string) string {
	var sb strings.Builder
	for i, tp := range tps {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%s-%d: %s", tp.Topic, tp.Partition, why[tp])
	}
	return sb.String()
}

// send writes the markers of tps on leader and returns those that failed,
// with why each did, and whether one was refused as from a fenced coordinator.
func (b BrokerMarkers) send(ctx context.Context, leader int32, m Markers, tps []TopicPartition) (map[TopicPartition]string, bool) {
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
	if err == nil && len(resp.Markers) != 1 {
		err = fmt.Errorf("%d markers answered, want 1", len(resp.Markers))
	}
	failed := make(map[TopicPartition]string, len(tps))
	if err != nil {
		for _, tp := range tps {
			failed[tp] = fmt.Sprintf("broker %d: %v", leader, err)
		}
		return failed, false
	}
	fenced := false
	written := make(map[TopicPartition]bool, len(tps))
	for _, t := range resp.Markers[0].Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p.Partition}
			switch p.ErrorCode {
			case 0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidProducerEpoch.Code:
				// Written, gone, or superseded by a newer epoch of the producer
				// (whose own markers end what this one would have).
				written[tp] = true
			case kerr.TransactionCoordinatorFenced.Code:
				fenced = true
			default:
				failed[tp] = fmt.Sprintf("broker %d: %s", leader, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	// A partition the answer leaves out is not written either.
	for _, tp := range tps {
		if _, ok := failed[tp]; !ok && !written[tp] {
			failed[tp] = fmt.Sprintf("broker %d: left out of the answer", leader)
		}
	}
	return failed, fenced
}
