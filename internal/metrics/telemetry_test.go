package metrics

import (
	"fmt"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/telemetry"
)

type stubTelemetry struct{ series []telemetry.Series }

func (s stubTelemetry) Snapshot() []telemetry.Series { return s.series }
func (s stubTelemetry) Stats() telemetry.Stats {
	return telemetry.Stats{Clients: 2, Series: len(s.series), DroppedSeries: 3}
}

// TestClientTelemetryExposition: pushed series are exposed under strata_client_,
// a family whose series carry different attributes gets the union of their
// labels, and the bounds' counts are exposed.
func TestClientTelemetryExposition(t *testing.T) {
	lbl := func(kv ...string) []telemetry.Label {
		var ls []telemetry.Label
		for i := 0; i < len(kv); i += 2 {
			ls = append(ls, telemetry.Label{Name: kv[i], Value: kv[i+1]})
		}
		return ls
	}
	src := stubTelemetry{series: []telemetry.Series{
		{Name: "org_apache_kafka_producer_node_request_total", Kind: telemetry.Counter, Value: 5,
			Labels: lbl("client_id", "a", "client_instance_id", "A", "node_id", "node-1")},
		{Name: "org_apache_kafka_producer_node_request_total", Kind: telemetry.Counter, Value: 7,
			Labels: lbl("client_id", "b", "client_instance_id", "B")},
		{Name: "org_apache_kafka_producer_record_queue_time_avg", Kind: telemetry.Gauge, Value: 1.5, Help: "queue time",
			Labels: lbl("client_id", "a", "client_instance_id", "A")},
	}}
	m := New(Config{Telemetry: src})
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "strata_client_") && !strings.HasPrefix(mf.GetName(), "strata_telemetry_") {
			continue
		}
		for _, mt := range mf.GetMetric() {
			var labels []string
			for _, lp := range mt.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			v := mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
			got = append(got, fmt.Sprintf("%s %s{%s} %g %q", mf.GetType(), mf.GetName(), strings.Join(labels, ","), v, mf.GetHelp()))
		}
	}
	want := []string{
		`COUNTER strata_client_org_apache_kafka_producer_node_request_total{client_id=a,client_instance_id=A,node_id=node-1} 5 "A metric pushed by clients (KIP-714)."`,
		`COUNTER strata_client_org_apache_kafka_producer_node_request_total{client_id=b,client_instance_id=B,node_id=} 7 "A metric pushed by clients (KIP-714)."`,
		`GAUGE strata_client_org_apache_kafka_producer_record_queue_time_avg{client_id=a,client_instance_id=A} 1.5 "queue time"`,
		`GAUGE strata_telemetry_clients{} 2 "Client instances this node keeps pushed metrics of (KIP-714), at most --telemetry-max-clients."`,
		`GAUGE strata_telemetry_series{} 3 "Series of pushed client metrics this node exposes, at most --telemetry-max-series."`,
		`COUNTER strata_telemetry_series_dropped_total{} 3 "Pushed client metric series not kept because the series bound was reached."`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("exposed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
