package telemetry

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/strata-stream/strata/internal/metadata"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time                { return c.t }
func (c *clock) advance(d time.Duration)       { c.t = c.t.Add(d) }
func newManager(c *clock, cfg Config) *Manager { cfg.Now = c.now; return New(cfg) }

func sub(name string, interval int32, metrics []string, match ...string) metadata.Subscription {
	m, err := metadata.ParseMatch(match)
	if err != nil {
		panic(err)
	}
	return metadata.Subscription{Name: name, Metrics: metrics, PushIntervalMs: interval, Match: m}
}

var javaProducer = Client{ClientID: "p1", SoftwareName: "apache-kafka-java", SoftwareVersion: "4.4.0", SourceAddress: "127.0.0.1", SourcePort: "5000"}

func TestSubscriptionMatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		subs     []metadata.Subscription
		metrics  []string
		interval int32
	}{
		{"no subscription", nil, nil, metadata.DefaultPushIntervalMs},
		{"empty match is every client", []metadata.Subscription{sub("a", 1000, []string{"org.apache.kafka.producer."})},
			[]string{"org.apache.kafka.producer."}, 1000},
		{"every entry must match, whole", []metadata.Subscription{
			sub("a", 1000, []string{"x."}, "client_id=p.*", "client_software_name=apache-kafka-java"),
			sub("b", 500, []string{"y."}, "client_id=p"), // not the whole id
			sub("c", 200, []string{"z."}, "client_software_version=3\\..*"),
		}, []string{"x."}, 1000},
		{"union, smallest interval", []metadata.Subscription{
			sub("a", 2000, []string{"b.", "a."}), sub("b", 700, []string{"a.", "c."}, "client_source_port=5000"),
		}, []string{"a.", "b.", "c."}, 700},
		{"a star is all", []metadata.Subscription{sub("a", 2000, []string{"a."}), sub("b", 3000, []string{"*"})},
			[]string{"*"}, 2000},
		{"instance id selector", []metadata.Subscription{sub("a", 1000, []string{"a."}, "client_instance_id=AAAAAAAAAAAAAAAAAAAAAQ")},
			nil, metadata.DefaultPushIntervalMs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(&clock{t: time.Unix(1000, 0)}, Config{})
			got, err := m.Subscriptions([16]byte{}, javaProducer, tc.subs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Metrics, tc.metrics) || got.PushIntervalMs != tc.interval {
				t.Fatalf("metrics %q every %d ms, want %q every %d", got.Metrics, got.PushIntervalMs, tc.metrics, tc.interval)
			}
			if got.ClientInstanceID == ([16]byte{}) || got.MaxBytes != DefaultMaxBytes || !slices.Equal(got.AcceptedCompression, []int8{4, 3, 1, 2}) {
				t.Fatalf("answer %+v", got)
			}
		})
	}
}

// TestPushScript walks one client through Kafka's checks with a fake clock.
func TestPushScript(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := newManager(c, Config{MaxBytes: 64})
	subs := []metadata.Subscription{sub("a", 1000, []string{"org.apache.kafka."})}
	s, err := m.Subscriptions([16]byte{}, javaProducer, subs)
	if err != nil {
		t.Fatal(err)
	}
	id := s.ClientInstanceID
	push := func(subID int32, codec int8, payload []byte, terminating bool) int16 {
		return Code(m.Push(Push{ClientInstanceID: id, SubscriptionID: subID, CompressionType: codec, Metrics: payload, Terminating: terminating}, javaProducer, subs))
	}
	steps := []struct {
		name    string
		advance time.Duration
		do      func() int16
		want    int16
	}{
		{"get again at once", 0, func() int16 { _, err := m.Subscriptions(id, javaProducer, subs); return Code(err) }, kerr.ThrottlingQuotaExceeded.Code},
		{"first push right after the get", 10 * time.Millisecond, func() int16 { return push(s.SubscriptionID, 0, nil, false) }, 0},
		{"second push too soon", 100 * time.Millisecond, func() int16 { return push(s.SubscriptionID, 0, nil, false) }, kerr.ThrottlingQuotaExceeded.Code},
		{"push after the interval", time.Second, func() int16 { return push(s.SubscriptionID, 0, nil, false) }, 0},
		{"stale subscription id", time.Second, func() int16 { return push(s.SubscriptionID+1, 0, nil, false) }, kerr.UnknownSubscriptionID.Code},
		{"unknown codec", time.Second, func() int16 { return push(s.SubscriptionID, 5, nil, false) }, kerr.UnsupportedCompressionType.Code},
		{"too large", time.Second, func() int16 { return push(s.SubscriptionID, 0, make([]byte, 65), false) }, kerr.TelemetryTooLarge.Code},
		{"not OTLP", time.Second, func() int16 { return push(s.SubscriptionID, 0, []byte{0xff, 0xff, 0xff}, false) }, kerr.InvalidRecord.Code},
		{"bad gzip", time.Second, func() int16 { return push(s.SubscriptionID, 1, []byte("nope"), false) }, kerr.InvalidRecord.Code},
		{"terminating push too soon is taken", 0, func() int16 { return push(s.SubscriptionID, 0, nil, true) }, 0},
		{"nothing after terminating", time.Second, func() int16 { return push(s.SubscriptionID, 0, nil, false) }, kerr.InvalidRequest.Code},
		{"zero instance id", 0, func() int16 {
			return Code(m.Push(Push{SubscriptionID: s.SubscriptionID}, javaProducer, subs))
		}, kerr.InvalidRequest.Code},
	}
	for _, st := range steps {
		c.advance(st.advance)
		if got := st.do(); got != st.want {
			t.Fatalf("%s: code %d, want %d", st.name, got, st.want)
		}
	}
}

// TestSubscriptionChange: a changed subscription makes the old id stale and
// lets the client ask again at once.
func TestSubscriptionChange(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := newManager(c, Config{})
	subs := []metadata.Subscription{sub("a", 60000, []string{"a."})}
	s, _ := m.Subscriptions([16]byte{}, javaProducer, subs)
	if err := m.Push(Push{ClientInstanceID: s.ClientInstanceID, SubscriptionID: s.SubscriptionID}, javaProducer, subs); err != nil {
		t.Fatal(err)
	}
	subs = append(subs, sub("b", 1000, []string{"b."}))
	c.advance(time.Second)
	if err := m.Push(Push{ClientInstanceID: s.ClientInstanceID, SubscriptionID: s.SubscriptionID}, javaProducer, subs); Code(err) != kerr.UnknownSubscriptionID.Code {
		t.Fatalf("push with the old subscription: %v", err)
	}
	s2, err := m.Subscriptions(s.ClientInstanceID, javaProducer, subs)
	if err != nil {
		t.Fatal(err)
	}
	if s2.SubscriptionID == s.SubscriptionID || s2.PushIntervalMs != 1000 || !slices.Equal(s2.Metrics, []string{"a.", "b."}) {
		t.Fatalf("new subscription %+v after %+v", s2, s)
	}
}

func otlpPayload(t *testing.T, metrics ...*metricspb.Metric) []byte {
	t.Helper()
	b, err := proto.Marshal(&metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: metrics}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gauge(name string, v float64, attrs ...string) *metricspb.Metric {
	dp := &metricspb.NumberDataPoint{Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: v}}
	for i := 0; i < len(attrs); i += 2 {
		dp.Attributes = append(dp.Attributes, &commonpb.KeyValue{Key: attrs[i], Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: attrs[i+1]}}})
	}
	return &metricspb.Metric{Name: name, Description: "a gauge", Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: []*metricspb.NumberDataPoint{dp}}}}
}

func sum(name string, v int64, delta bool) *metricspb.Metric {
	temp := metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
	if delta {
		temp = metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
	}
	return &metricspb.Metric{Name: name, Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{IsMonotonic: true, AggregationTemporality: temp,
		DataPoints: []*metricspb.NumberDataPoint{{Value: &metricspb.NumberDataPoint_AsInt{AsInt: v}}}}}}
}

func compress(t *testing.T, codec int8, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch codec {
	case 0:
		return b
	case 1:
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
	case 2:
		comp, err := kgo.DefaultCompressor(kgo.SnappyCompression())
		if err != nil {
			t.Fatal(err)
		}
		out, _ := comp.Compress(&buf, b)
		return out
	case 3:
		w := lz4.NewWriter(&buf)
		w.Write(b)
		w.Close()
	case 4:
		w, _ := zstd.NewWriter(&buf)
		w.Write(b)
		w.Close()
	}
	return buf.Bytes()
}

func TestPushSeries(t *testing.T) {
	for codec := range int8(5) {
		t.Run(compressionName[codec], func(t *testing.T) {
			c := &clock{t: time.Unix(1000, 0)}
			m := newManager(c, Config{})
			subs := []metadata.Subscription{sub("a", 1000, []string{"org.apache.kafka.producer."})}
			s, _ := m.Subscriptions([16]byte{}, javaProducer, subs)
			payload := otlpPayload(t,
				gauge("org.apache.kafka.producer.node.request.latency.avg", 1.5, "node.id", "node-1", "client_id", "spoofed"),
				sum("org.apache.kafka.producer.record.send.total", 7, false),
				sum("org.apache.kafka.producer.record.error.total", 2, true),
				gauge("org.apache.kafka.consumer.not.subscribed", 1))
			if err := m.Push(Push{ClientInstanceID: s.ClientInstanceID, SubscriptionID: s.SubscriptionID, CompressionType: codec,
				Metrics: compress(t, codec, payload)}, javaProducer, subs); err != nil {
				t.Fatal(err)
			}
			c.advance(time.Second)
			payload = otlpPayload(t, sum("org.apache.kafka.producer.record.send.total", 9, false), sum("org.apache.kafka.producer.record.error.total", 3, true))
			if err := m.Push(Push{ClientInstanceID: s.ClientInstanceID, SubscriptionID: s.SubscriptionID, CompressionType: codec,
				Metrics: compress(t, codec, payload)}, javaProducer, subs); err != nil {
				t.Fatal(err)
			}
			id := InstanceIDString(s.ClientInstanceID)
			want := []Series{
				{Name: "org_apache_kafka_producer_node_request_latency_avg", Kind: Gauge, Value: 1.5, Help: "a gauge",
					Labels: []Label{{"client_id", "p1"}, {"client_instance_id", id}, {"node_id", "node-1"}}},
				{Name: "org_apache_kafka_producer_record_error_total", Kind: Counter, Value: 5, // deltas add up
					Labels: []Label{{"client_id", "p1"}, {"client_instance_id", id}}},
				{Name: "org_apache_kafka_producer_record_send_total", Kind: Counter, Value: 9, // cumulative replaces
					Labels: []Label{{"client_id", "p1"}, {"client_instance_id", id}}},
			}
			got := m.Snapshot()
			if !slices.EqualFunc(got, want, func(a, b Series) bool {
				return a.Name == b.Name && a.Kind == b.Kind && a.Value == b.Value && a.Help == b.Help && slices.Equal(a.Labels, b.Labels)
			}) {
				t.Fatalf("series\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

var compressionName = []string{"none", "gzip", "snappy", "lz4", "zstd"}

func TestDecompressBound(t *testing.T) {
	const limit = 4096
	for codec := int8(1); codec <= 4; codec++ {
		for _, n := range []int{limit, limit + 1} {
			out, err := decompress(compress(t, codec, make([]byte, n)), codec, limit)
			if (err == nil) != (n <= limit) || err == nil && len(out) != n {
				t.Errorf("%s: %d bytes with a limit of %d: %d out, err %v", compressionName[codec], n, limit, len(out), err)
			}
		}
	}
}

// TestDecompressSizeThatLies: a tiny snappy push whose block declares 1 GiB
// (raw, or in xerial's framing as Java sends it) is refused without
// allocating anything like it.
func TestDecompressSizeThatLies(t *testing.T) {
	raw := append(binary.AppendUvarint(nil, 1<<30), 0, 0, 0, 0)
	xerial := append(binary.BigEndian.AppendUint32([]byte{130, 83, 78, 65, 80, 80, 89, 0, 0, 0, 0, 1, 0, 0, 0, 1}, uint32(len(raw))), raw...)
	for name, payload := range map[string][]byte{"raw": raw, "xerial": xerial} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := decompress(payload, 2, maxDecompressed)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%s: a block declaring 1 GiB decompressed", name)
		}
		if grown := after.TotalAlloc - before.TotalAlloc; grown > 4<<20 {
			t.Errorf("%s: %d bytes allocated for a %d-byte push", name, grown, len(payload))
		}
	}
}

// TestBoundsAndExpiry: the series bound drops new series and counts them; a
// silent client is forgotten after max(1 min, 3 intervals); the least recently
// seen client goes first when the client bound is reached.
func TestBoundsAndExpiry(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := newManager(c, Config{MaxSeries: 2, MaxClients: 2})
	subs := []metadata.Subscription{sub("a", 30000, []string{"*"})}
	s, _ := m.Subscriptions([16]byte{}, javaProducer, subs)
	payload := otlpPayload(t, gauge("a", 1), gauge("b", 2), gauge("c", 3))
	if err := m.Push(Push{ClientInstanceID: s.ClientInstanceID, SubscriptionID: s.SubscriptionID, Metrics: payload}, javaProducer, subs); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.Series != 2 || st.DroppedSeries != 1 || st.Clients != 1 {
		t.Fatalf("stats %+v, want 2 series, 1 dropped, 1 client", st)
	}
	c.advance(89 * time.Second) // 3 intervals are 90 s
	if st := m.Stats(); st.Clients != 1 {
		t.Fatalf("client forgotten before 3 intervals: %+v", st)
	}
	c.advance(time.Second)
	if st := m.Stats(); st.Clients != 0 || st.Series != 0 || len(m.Snapshot()) != 0 {
		t.Fatalf("silent client kept: %+v", st)
	}
	// A series the client stops pushing goes after 3 intervals though the
	// client stays.
	s, _ = m.Subscriptions([16]byte{}, javaProducer, subs)
	push := func(payload []byte) {
		t.Helper()
		if err := m.Push(Push{ClientInstanceID: s.ClientInstanceID, SubscriptionID: s.SubscriptionID, Metrics: payload}, javaProducer, subs); err != nil {
			t.Fatal(err)
		}
	}
	push(otlpPayload(t, gauge("a", 1), gauge("b", 2)))
	for range 3 {
		c.advance(30 * time.Second)
		push(otlpPayload(t, gauge("a", 1)))
	}
	if got := m.Snapshot(); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("series %+v, want a alone", got)
	}
	m.mu.Lock()
	m.forgetLocked(s.ClientInstanceID)
	m.mu.Unlock()

	ids := make([][16]byte, 3)
	for i := range ids {
		s, err := m.Subscriptions([16]byte{}, javaProducer, subs)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = s.ClientInstanceID
		c.advance(time.Millisecond)
	}
	m.mu.Lock()
	_, first := m.mu.clients[ids[0]]
	n := len(m.mu.clients)
	m.mu.Unlock()
	if first || n != 2 {
		t.Fatalf("%d clients kept, the oldest kept: %v", n, first)
	}
}

func TestParseMatchRegexWhole(t *testing.T) {
	m, err := metadata.ParseMatch([]string{"client_id=abc"})
	if err != nil {
		t.Fatal(err)
	}
	if re := m["client_id"]; re.MatchString("xabc") || !re.MatchString("abc") || re.String() != regexp.MustCompile("^(?:abc)$").String() {
		t.Fatalf("regex %v", re)
	}
}

// BenchmarkPush is one push of 100 gauges with a node attribute each (about
// what a Java producer sends), zstd-compressed as the Java client sends it.
func BenchmarkPush(b *testing.B) {
	c := &clock{t: time.Unix(1000, 0)}
	m := newManager(c, Config{})
	subs := []metadata.Subscription{sub("a", 100, []string{"*"})}
	s, _ := m.Subscriptions([16]byte{}, javaProducer, subs)
	var ms []*metricspb.Metric
	for i := range 100 {
		ms = append(ms, gauge(fmt.Sprintf("org.apache.kafka.producer.metric.%d", i), float64(i), "node.id", "node-1"))
	}
	t := &testing.T{}
	payload := compress(t, 4, otlpPayload(t, ms...))
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		c.advance(100 * time.Millisecond)
		if err := m.Push(Push{ClientInstanceID: s.ClientInstanceID, SubscriptionID: s.SubscriptionID, CompressionType: 4, Metrics: payload}, javaProducer, subs); err != nil {
			b.Fatal(err)
		}
	}
}
