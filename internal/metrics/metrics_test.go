package metrics

import (
	"context"
	"errors"
	"net"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/share"
)

// values gathers reg into "name{k=v,...}" -> value (counters, gauges, and the
// _count and _sum of histograms and summaries).
func values(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[mf.GetName()+"_count{"+strings.Join(labels, ",")+"}"] = float64(m.Histogram.GetSampleCount())
				out[mf.GetName()+"_sum{"+strings.Join(labels, ",")+"}"] = m.Histogram.GetSampleSum()
			case m.Summary != nil:
				out[mf.GetName()+"_count{"+strings.Join(labels, ",")+"}"] = float64(m.Summary.GetSampleCount())
				out[mf.GetName()+"_sum{"+strings.Join(labels, ",")+"}"] = m.Summary.GetSampleSum()
			}
		}
	}
	return out
}

func expect(t *testing.T, got map[string]float64, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %t), want %v", k, g, ok, v)
		}
	}
}

func TestForEachErrorCode(t *testing.T) {
	produce := kmsg.NewPtrProduceResponse()
	produce.Topics = []kmsg.ProduceResponseTopic{{Topic: "a", Partitions: []kmsg.ProduceResponseTopicPartition{
		{Partition: 0}, {Partition: 1, ErrorCode: kerr.NotLeaderForPartition.Code}, {Partition: 2, ErrorCode: kerr.NotLeaderForPartition.Code},
	}}}
	meta := kmsg.NewPtrMetadataResponse()
	meta.Topics = []kmsg.MetadataResponseTopic{{ErrorCode: kerr.UnknownTopicOrPartition.Code, Partitions: []kmsg.MetadataResponseTopicPartition{{ErrorCode: kerr.LeaderNotAvailable.Code}}}}
	fetch := kmsg.NewPtrFetchResponse()
	fetch.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
	fetch.Topics = []kmsg.FetchResponseTopic{{Partitions: []kmsg.FetchResponseTopicPartition{{ErrorCode: kerr.OffsetOutOfRange.Code, RecordBatches: []byte{1, 2, 3}}}}}
	tests := []struct {
		name string
		msg  kmsg.Response
		want []int16
	}{
		{"none", kmsg.NewPtrApiVersionsResponse(), nil},
		{"per partition", produce, []int16{6, 6}},
		{"nested levels", meta, []int16{3, 5}},
		{"top level first", fetch, []int16{71, 1}},
		{"nil pointer", (*kmsg.ProduceResponse)(nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int16
			forEachErrorCode(tt.msg, func(c int16) { got = append(got, c) })
			if len(got) != len(tt.want) {
				t.Fatalf("codes %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("codes %v, want %v", got, tt.want)
				}
			}
		})
	}
	if got := errorName(kerr.NotLeaderForPartition.Code); got != "NOT_LEADER_FOR_PARTITION" {
		t.Fatalf("errorName = %q", got)
	}
	if got := errorName(-9999); got != "UNKNOWN_CODE_-9999" {
		t.Fatalf("errorName(-9999) = %q", got)
	}
}

func conn(id uint64) *protocol.ConnInfo {
	return &protocol.ConnInfo{ID: id, RemoteAddr: &net.TCPAddr{}, LocalAddr: &net.TCPAddr{}}
}

// TestNetworkHooks: requests still queued when a connection closes stop counting
// as in flight; a late response for a closed connection changes nothing.
func TestNetworkHooks(t *testing.T) {
	m := New(Config{})
	c1, c2 := conn(1), conn(2)
	m.OnConnOpen(c1)
	m.OnConnOpen(c2)
	produce := &protocol.Request{Key: 0, Size: 100}
	fetch := &protocol.Request{Key: 1, Size: 50}
	m.OnRequest(c1, produce)
	m.OnRequest(c1, produce)
	m.OnRequest(c1, fetch)
	m.OnRequest(c2, fetch)
	m.OnResponse(c1, produce, protocol.ResponseEvent{Total: 2e6, Bytes: 40})
	got := values(t, m.Registry())
	expect(t, got, map[string]float64{
		"strata_connections{}":                               2,
		"strata_connections_opened_total{}":                  2,
		"strata_requests_in_flight{}":                        3,
		"strata_requests_total{api=Produce}":                 2,
		"strata_requests_total{api=Fetch}":                   2,
		"strata_request_bytes_total{api=Produce}":            200,
		"strata_response_bytes_total{api=Produce}":           40,
		"strata_request_duration_seconds_count{api=Produce}": 1,
		"strata_request_duration_seconds_sum{api=Produce}":   0.002,
	})
	m.OnConnClose(c1, errors.New("reset"))
	m.OnResponse(c1, produce, protocol.ResponseEvent{}) // late: dropped
	expect(t, values(t, m.Registry()), map[string]float64{
		"strata_connections{}":        1,
		"strata_requests_in_flight{}": 1,
	})
	m.OnResponse(c2, fetch, protocol.ResponseEvent{})
	m.OnConnClose(c2, nil)
	expect(t, values(t, m.Registry()), map[string]float64{
		"strata_connections{}":        0,
		"strata_requests_in_flight{}": 0,
	})
}

type stubHandler struct{ resp protocol.Response }

func (h stubHandler) Handle(context.Context, *protocol.ConnInfo, *protocol.Request) protocol.Response {
	return h.resp
}

// stubBody is a pre-encoded body that shows its message, as the Fetch body does.
type stubBody struct{ msg kmsg.Response }

func (stubBody) Len() int                            { return 0 }
func (stubBody) WriteBody(protocol.BodyWriter) error { return nil }
func (stubBody) Release()                            {}
func (b stubBody) Msg() kmsg.Response                { return b.msg }

func TestInstrumentHandler(t *testing.T) {
	m := New(Config{})
	produce := kmsg.NewPtrProduceResponse()
	produce.Topics = []kmsg.ProduceResponseTopic{{Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorCode: kerr.NotEnoughReplicas.Code}}}}
	fetch := kmsg.NewPtrFetchResponse()
	fetch.Topics = []kmsg.FetchResponseTopic{{Partitions: []kmsg.FetchResponseTopicPartition{{ErrorCode: kerr.OffsetOutOfRange.Code}}}}
	meta := kmsg.NewPtrMetadataResponse()
	meta.Topics = []kmsg.MetadataResponseTopic{{ErrorCode: kerr.UnknownTopicOrPartition.Code}}

	ctx := context.Background()
	// A deferred produce is counted when its Wait completes.
	h := m.InstrumentHandler(stubHandler{protocol.Response{Wait: func(context.Context) protocol.Response {
		return protocol.Response{Msg: produce}
	}}})
	resp := h.Handle(ctx, conn(1), &protocol.Request{Key: 0})
	if got := values(t, m.Registry())["strata_request_errors_total{api=Produce,error=NOT_ENOUGH_REPLICAS}"]; got != 0 {
		t.Fatalf("counted %v before Wait ran", got)
	}
	if out := resp.Wait(ctx); out.Msg != produce {
		t.Fatal("Wait did not pass the response through")
	}
	m.InstrumentHandler(stubHandler{protocol.Response{Body: stubBody{fetch}}}).Handle(ctx, conn(1), &protocol.Request{Key: 1})
	m.InstrumentHandler(stubHandler{protocol.Response{Msg: meta}}).Handle(ctx, conn(1), &protocol.Request{Key: 3})
	m.InstrumentHandler(stubHandler{protocol.Response{None: true}}).Handle(ctx, conn(1), &protocol.Request{Key: 0})
	expect(t, values(t, m.Registry()), map[string]float64{
		"strata_request_errors_total{api=Produce,error=NOT_ENOUGH_REPLICAS}":         1,
		"strata_request_errors_total{api=Fetch,error=OFFSET_OUT_OF_RANGE}":           1,
		"strata_request_errors_total{api=Metadata,error=UNKNOWN_TOPIC_OR_PARTITION}": 1,
	})
}

type stubCluster struct {
	img    *metadata.Image
	leader bool
}

func (c stubCluster) Image() *metadata.Image { return c.img }
func (c stubCluster) IsLeader() bool         { return c.leader }

var (
	idA = metadata.UUID{0xa, 1, 2, 3, 4, 5, 0x46, 7, 0x88, 9, 10, 11, 12, 13, 14, 15}
	idB = metadata.UUID{0xb, 1, 2, 3, 4, 5, 0x46, 7, 0x88, 9, 10, 11, 12, 13, 14, 15}
)

// image: brokers 1, 2 (live) and 3 (fenced); topic "a" has partitions led by 1
// (full ISR), 1 (ISR short of a replica), 2, 3 (fenced: offline) and no one.
func testImage(t *testing.T) *metadata.Image {
	t.Helper()
	reg := func(id int32, fenced bool) *metadata.RegisterBrokerRecord {
		return &metadata.RegisterBrokerRecord{BrokerID: id, Epoch: 1, Host: "127.0.0.1", Port: 9090 + id, Fenced: fenced}
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{
		reg(1, false), reg(2, false), reg(3, true),
		&metadata.TopicRecord{Name: "a", ID: idA},
		&metadata.PartitionRecord{TopicID: idA, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
		&metadata.PartitionRecord{TopicID: idA, Partition: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1},
		&metadata.PartitionRecord{TopicID: idA, Partition: 2, Replicas: []int32{2, 1}, ISR: []int32{2}, Leader: 2},
		&metadata.PartitionRecord{TopicID: idA, Partition: 3, Replicas: []int32{3}, ISR: []int32{3}, Leader: 3},
		&metadata.PartitionRecord{TopicID: idA, Partition: 4, Replicas: []int32{2}, ISR: []int32{2}, Leader: metadata.NoLeader},
		&metadata.TopicRecord{Name: "b", ID: idB},
		&metadata.PartitionRecord{TopicID: idB, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestClusterCollector(t *testing.T) {
	img := testImage(t)
	if h := partitionHealth(img, 1); h != (health{led: 3, underReplicatedLed: 1, offline: 2}) {
		t.Fatalf("health of node 1 = %+v", h)
	}
	tests := []struct {
		name   string
		node   int32
		active bool
		want   map[string]float64
	}{
		{"active controller", 1, true, map[string]float64{
			"strata_partitions_under_replicated{}": 1, "strata_partitions_offline{}": 2,
			"strata_partitions_led{}": 3, "strata_controller_active{}": 1,
		}},
		{"other node", 2, false, map[string]float64{
			"strata_partitions_under_replicated{}": 1, "strata_partitions_offline{}": 0,
			"strata_partitions_led{}": 1, "strata_controller_active{}": 0,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Config{NodeID: tt.node, Cluster: stubCluster{img, tt.active}})
			got := values(t, m.Registry())
			expect(t, got, tt.want)
			if got["strata_metadata_offset{}"] != float64(img.Offset()) {
				t.Fatalf("metadata offset %v, want %d", got["strata_metadata_offset{}"], img.Offset())
			}
		})
	}
}

// TestTopicTraffic: the Observer's counters, dropped once the topic is gone.
func TestTopicTraffic(t *testing.T) {
	cluster := &stubCluster{img: testImage(t)}
	m := New(Config{Cluster: cluster})
	m.Produced("a", 0, 100, 3)
	m.Produced("a", 1, 50, 2)
	m.Fetched("a", 0, 100, 3)
	m.Produced("b", 0, 10, 1)
	m.DelayedProduce(1)
	m.DelayedFetch(1)
	m.DelayedFetch(1)
	m.DelayedFetch(-1)
	m.OnISRShrink()
	m.OnISRShrink()
	m.OnISRExpand()
	expect(t, values(t, m.Registry()), map[string]float64{
		"strata_topic_bytes_in_total{topic=a}":     150,
		"strata_topic_records_in_total{topic=a}":   5,
		"strata_topic_bytes_out_total{topic=a}":    100,
		"strata_topic_records_out_total{topic=a}":  3,
		"strata_topic_records_in_total{topic=b}":   1,
		"strata_topic_records_out_total{topic=b}":  0,
		"strata_purgatory_size{operation=produce}": 1,
		"strata_purgatory_size{operation=fetch}":   1,
		"strata_isr_shrinks_total{}":               2,
		"strata_isr_expands_total{}":               1,
	})
	img, err := metadata.Apply(cluster.img, &metadata.RemoveTopicRecord{TopicID: idB})
	if err != nil {
		t.Fatal(err)
	}
	cluster.img = img
	got := values(t, m.Registry())
	if _, ok := got["strata_topic_records_in_total{topic=b}"]; ok {
		t.Fatal("counters of deleted topic b are still exported")
	}
	expect(t, got, map[string]float64{"strata_topic_records_in_total{topic=a}": 5})
}

type stubLag struct {
	lags []group.PartitionLag
	err  error
}

func (s stubLag) Lag(group.HighWatermarkFunc, ...string) ([]group.PartitionLag, error) {
	return s.lags, s.err
}

// TestLagCollector: a group's known lags are exported, one whose name is not
// UTF-8 (a client may send any bytes) with U+FFFD for the bytes that are not,
// and the groups after it too.
func TestLagCollector(t *testing.T) {
	m := New(Config{Groups: stubLag{lags: []group.PartitionLag{
		{Group: "bad\xff\xfe", Topic: "a", Partition: 0, Committed: 1, HighWatermark: 3, Lag: 2},
		{Group: "g", Topic: "a", Partition: 0, Committed: 5, HighWatermark: 12, Lag: 7},
		{Group: "g", Topic: "a", Partition: 1, Committed: 5, HighWatermark: -1, Lag: -1},
	}}})
	got := values(t, m.Registry())
	expect(t, got, map[string]float64{"strata_consumer_group_lag{group=g,partition=0,topic=a}": 7,
		"strata_consumer_group_lag{group=bad\uFFFD,partition=0,topic=a}": 2})
	if _, ok := got["strata_consumer_group_lag{group=g,partition=1,topic=a}"]; ok {
		t.Fatal("an unknown lag was exported")
	}
	failing := New(Config{Groups: stubLag{err: errors.New("closed")}})
	if _, err := failing.Registry().Gather(); err != nil {
		t.Fatalf("a failing lag source broke the scrape: %v", err)
	}
}

type stubShares map[string]share.DeadLetterStats

func (s stubShares) DeadLetterStats() map[string]share.DeadLetterStats { return s }

// TestShareCollector: each share group's dead-letter counts are exported, a
// group whose name is not UTF-8 with U+FFFD for the bytes that are not.
func TestShareCollector(t *testing.T) {
	m := New(Config{})
	m.RegisterShares(stubShares{"q": {Written: 3, Failed: 1}, "bad\xff": {Written: 2}})
	expect(t, values(t, m.Registry()), map[string]float64{
		"strata_share_dead_lettered_records_total{group=q}":         3,
		"strata_share_dead_letter_failures_total{group=q}":          1,
		"strata_share_dead_lettered_records_total{group=bad\uFFFD}": 2,
		"strata_share_dead_letter_failures_total{group=bad\uFFFD}":  0,
	})
}

// stubISRChanger accepts every change, refuses every change with refuse, or
// fails the whole request with fail.
type stubISRChanger struct{ refuse, fail error }

func (s stubISRChanger) AlterPartitions(_ context.Context, changes []replica.ISRChange) ([]replica.ISRResult, error) {
	if s.fail != nil {
		return nil, s.fail
	}
	results := make([]replica.ISRResult, len(changes))
	for i, ch := range changes {
		if results[i].Err = s.refuse; s.refuse == nil {
			results[i].Partition = &metadata.Partition{TopicID: ch.TopicID, Index: ch.Partition, ISR: ch.ISR}
		}
	}
	return results, nil
}

// TestISRChanger counts accepted ISR changes against the ISR before them,
// each change of a request on its own.
func TestISRChanger(t *testing.T) {
	img := testImage(t) // a-0 ISR [1 2], a-1 ISR [1]
	change := func(partition int32, isr ...int32) replica.ISRChange {
		return replica.ISRChange{TopicID: idA, Partition: partition, ISR: isr}
	}
	tests := []struct {
		name             string
		changes          []replica.ISRChange
		changer          stubISRChanger
		shrinks, expands float64
	}{
		{"shrink", []replica.ISRChange{change(0, 1)}, stubISRChanger{}, 1, 0},
		{"expand", []replica.ISRChange{change(1, 1, 2)}, stubISRChanger{}, 0, 1},
		{"swap counts both", []replica.ISRChange{change(0, 1, 3)}, stubISRChanger{}, 1, 1},
		{"no change", []replica.ISRChange{change(0, 2, 1)}, stubISRChanger{}, 0, 0},
		{"one request, a shrink and an expand", []replica.ISRChange{change(0, 1), change(1, 1, 2)}, stubISRChanger{}, 1, 1},
		{"refused", []replica.ISRChange{change(0, 1)}, stubISRChanger{refuse: errors.New("fenced")}, 0, 0},
		{"request failed", []replica.ISRChange{change(0, 1)}, stubISRChanger{fail: errors.New("no controller")}, 0, 0},
		{"unknown partition", []replica.ISRChange{change(9, 1)}, stubISRChanger{}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Config{NodeID: 1, Cluster: stubCluster{img: img}})
			_, err := m.ISRChanger(tt.changer).AlterPartitions(context.Background(), tt.changes)
			if (err != nil) != (tt.changer.fail != nil) {
				t.Fatalf("err = %v", err)
			}
			expect(t, values(t, m.Registry()), map[string]float64{
				"strata_isr_shrinks_total{}": tt.shrinks,
				"strata_isr_expands_total{}": tt.expands,
			})
		})
	}
}

// stubTransport answers every fetch with answer, or fails with fail.
type stubTransport struct {
	answer *kmsg.FetchResponse
	fail   error
}

func (s stubTransport) Fetch(context.Context, int32, *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	return s.answer, s.fail
}

func (s stubTransport) ListOffsets(context.Context, int32, *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error) {
	return nil, errors.New("stub: no ListOffsets")
}

// TestReplicaTransport counts follower fetches, the full ones (session epoch
// 0 or -1) and the partitions of requests and of answers.
func TestReplicaTransport(t *testing.T) {
	fetch := func(epoch int32, partitions ...int32) *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.SessionEpoch = epoch
		rt := kmsg.NewFetchRequestTopic()
		for _, p := range partitions {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt, kmsg.NewFetchRequestTopic())
		return req
	}
	answer := kmsg.NewPtrFetchResponse()
	at := kmsg.NewFetchResponseTopic()
	at.Partitions = make([]kmsg.FetchResponseTopicPartition, 2)
	answer.Topics = []kmsg.FetchResponseTopic{at, at}
	m := New(Config{})
	tr := m.ReplicaTransport(stubTransport{answer: answer})
	for _, req := range []*kmsg.FetchRequest{fetch(0, 0, 1, 2), fetch(1), fetch(2, 1), fetch(-1, 0)} {
		if _, err := tr.Fetch(context.Background(), 1, req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.ReplicaTransport(stubTransport{fail: errors.New("reset")}).Fetch(context.Background(), 1, fetch(3, 5)); err == nil {
		t.Fatal("the transport's error was lost")
	}
	expect(t, values(t, m.Registry()), map[string]float64{
		"strata_replica_fetch_requests_total{}":            5,
		"strata_replica_fetch_full_requests_total{}":       2,
		"strata_replica_fetch_request_partitions_total{}":  6,
		"strata_replica_fetch_response_partitions_total{}": 16,
	})
}
