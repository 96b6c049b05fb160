package txn

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// omittingBroker leads every partition and answers each WriteTxnMarkers with
// success for the partitions asked, but leaves out those in omit the first
// time it is asked for them; asked records every partition of every request.
type omittingBroker struct {
	mu    sync.Mutex
	omit  map[TopicPartition]bool
	asked []TopicPartition
}

func (b *omittingBroker) Leader(string, int32) (int32, bool) { return 1, true }

func (b *omittingBroker) WriteTxnMarkers(_ context.Context, _ int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, rm := range req.Markers {
		sm := kmsg.NewWriteTxnMarkersResponseMarker()
		sm.ProducerID = rm.ProducerID
		for _, rt := range rm.Topics {
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				tp := TopicPartition{rt.Topic, p}
				b.asked = append(b.asked, tp)
				if b.omit[tp] {
					delete(b.omit, tp)
					continue
				}
				sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition = p
				st.Partitions = append(st.Partitions, sp)
			}
			sm.Topics = append(sm.Topics, st)
		}
		resp.Markers = append(resp.Markers, sm)
	}
	return resp, nil
}

// TestMarkersLeftOutOfAnAnswerAreSentAgain: a partition a broker's
// WriteTxnMarkers answer leaves out is not counted as written: it is sent
// again until an answer names it. It used to count as written, and the
// transaction completed with its marker missing there.
func TestMarkersLeftOutOfAnAnswerAreSentAgain(t *testing.T) {
	b := &omittingBroker{omit: map[TopicPartition]bool{{"t", 1}: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := BrokerMarkers{Brokers: b}.WriteMarkers(ctx, Markers{ProducerID: 7, ProducerEpoch: 1, Commit: true,
		Partitions: []TopicPartition{{"t", 0}, {"t", 1}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []TopicPartition{{"t", 0}, {"t", 1}, {"t", 1}}
	if !slices.Equal(b.asked, want) {
		t.Fatalf("markers sent for %v, want %v (the one left out sent again)", b.asked, want)
	}
}

// refusingBroker leads every partition and refuses every marker with
// NOT_LEADER_OR_FOLLOWER until refusals runs out, then writes them.
type refusingBroker struct {
	mu       sync.Mutex
	refusals int
}

func (b *refusingBroker) Leader(string, int32) (int32, bool) { return 3, true }

func (b *refusingBroker) WriteTxnMarkers(_ context.Context, _ int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	code := int16(0)
	if b.refusals > 0 {
		b.refusals--
		code = kerr.NotLeaderForPartition.Code
	}
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, rm := range req.Markers {
		sm := kmsg.NewWriteTxnMarkersResponseMarker()
		for _, rt := range rm.Topics {
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition, sp.ErrorCode = p, code
				st.Partitions = append(st.Partitions, sp)
			}
			sm.Topics = append(sm.Topics, st)
		}
		resp.Markers = append(resp.Markers, sm)
	}
	return resp, nil
}

// TestSlowMarkersAreLogged: markers still not written WarnAfter after the
// first try are logged once at Warn, naming each partition left and why it
// failed, and their eventual writing at Info.
func TestSlowMarkersAreLogged(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := BrokerMarkers{Brokers: &refusingBroker{refusals: 3}, Log: log, WarnAfter: time.Nanosecond}
	if err := m.WriteMarkers(ctx, Markers{ProducerID: 7, ProducerEpoch: 2, Commit: true, Partitions: []TopicPartition{{"out", 0}}}); err != nil {
		t.Fatal(err)
	}
	out := logged.String()
	for _, want := range []string{"level=WARN msg=\"transaction markers not written yet: retrying\" producer_id=7 producer_epoch=2 commit=true",
		"partitions=\"out-0: broker 3: NOT_LEADER_FOR_PARTITION", "level=INFO msg=\"transaction markers written\" producer_id=7"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "level=WARN"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, out)
	}
}
