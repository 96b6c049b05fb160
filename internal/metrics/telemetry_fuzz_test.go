package metrics

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/proto"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/telemetry"
)

// pushAll pushes each payload (uncompressed OTLP) from its own client, whose
// client id starts with prefix, to a new telemetry manager subscribed to every
// metric, and returns the manager. A payload that does not decode is refused
// (INVALID_RECORD) and keeps nothing.
func pushAll(t testing.TB, prefix string, payloads ...[]byte) *telemetry.Manager {
	tm := telemetry.New(telemetry.Config{})
	subs := []metadata.Subscription{{Name: "all", Metrics: []string{"*"}, PushIntervalMs: 1000}}
	for i, payload := range payloads {
		c := telemetry.Client{ClientID: fmt.Sprint(prefix, i), SoftwareName: "fuzz", SoftwareVersion: "1"}
		s, err := tm.Subscriptions([16]byte{}, c, subs)
		if err != nil {
			t.Fatal(err)
		}
		err = tm.Push(telemetry.Push{ClientInstanceID: s.ClientInstanceID, SubscriptionID: s.SubscriptionID, Metrics: payload}, c, subs)
		if code := telemetry.Code(err); err != nil && code != kerr.InvalidRecord.Code {
			t.Fatalf("push %d: %v (code %d)", i, err, code)
		}
	}
	return tm
}

func otlpMetrics(t testing.TB, metrics ...*metricspb.Metric) []byte {
	b, err := proto.Marshal(&metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: metrics}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// point is a data point of value v with attributes given as key, value pairs.
func point(v float64, attrs ...string) *metricspb.NumberDataPoint {
	dp := &metricspb.NumberDataPoint{Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: v}}
	for i := 0; i+1 < len(attrs); i += 2 {
		dp.Attributes = append(dp.Attributes, &commonpb.KeyValue{Key: attrs[i],
			Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: attrs[i+1]}}})
	}
	return dp
}

func gaugeOf(name string, dps ...*metricspb.NumberDataPoint) *metricspb.Metric {
	return &metricspb.Metric{Name: name, Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: dps}}}
}

func counterOf(name string, dps ...*metricspb.NumberDataPoint) *metricspb.Metric {
	return &metricspb.Metric{Name: name, Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{IsMonotonic: true,
		AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, DataPoints: dps}}}
}

// telemetryPush is what two clients send: their client ids' prefix and a
// push each.
type telemetryPush struct {
	prefix string
	push   [2][]byte
}

// telemetryPushes seed FuzzClientTelemetry (and so run with every go test):
// pushes that clients may send, named for what they test.
func telemetryPushes(t testing.TB) map[string]telemetryPush {
	one := otlpMetrics(t, gaugeOf("m", point(1)))
	return map[string]telemetryPush{
		"plain": {"client-", [2][]byte{otlpMetrics(t, gaugeOf("org.apache.kafka.producer.queue.avg", point(1.5, "node.id", "1"))),
			otlpMetrics(t, counterOf("org.apache.kafka.producer.record.send.total", point(7)))}},
		// Prometheus reads a label with an empty value as no label: the
		// two points are one series.
		"empty attribute":                     {"client-", [2][]byte{otlpMetrics(t, gaugeOf("m", point(1), point(2, "x", ""))), nil}},
		"attribute names that sanitize alike": {"client-", [2][]byte{otlpMetrics(t, gaugeOf("m", point(1, "a.b", "v", "a_b", "w"), point(2, "a_b", "v"))), nil}},
		"a gauge and a counter of one name":   {"client-", [2][]byte{one, otlpMetrics(t, counterOf("m", point(2)))}},
		"names that sanitize alike":           {"client-", [2][]byte{otlpMetrics(t, gaugeOf("a.b", point(1)), counterOf("a_b", point(2))), nil}},
		// A client id is bytes the client chose.
		"a client id that is not UTF-8": {"client-\xff", [2][]byte{one, one}},
	}
}

// FuzzClientTelemetry: whatever two clients push, whatever their client ids,
// /metrics gathers without error: a pushed family has one type, no two of its
// series the same label values, and every label value is UTF-8.
func FuzzClientTelemetry(f *testing.F) {
	for _, p := range telemetryPushes(f) {
		f.Add(p.prefix, p.push[0], p.push[1])
	}
	f.Fuzz(func(t *testing.T, prefix string, a, b []byte) {
		if _, err := New(Config{Telemetry: pushAll(t, prefix, a, b)}).Registry().Gather(); err != nil {
			t.Fatal(err)
		}
	})
}
