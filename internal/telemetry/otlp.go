package telemetry

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"google.golang.org/protobuf/proto"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/strata-stream/strata/internal/batch"
)

// maxDecompressed bounds what a push may decompress to: a small compressed
// payload must not take the broker's memory.
const maxDecompressed = 16 << 20

// point is one decoded data point.
type point struct {
	name, help string
	kind       Kind
	delta      bool // a delta sum: add to the kept value
	value      float64
	attrs      []Label
}

// decode decompresses a push's payload (Kafka's codec ids, Java's framing)
// and reads it as an OTLP MetricsData. Gauges and sums become points;
// histograms and summaries, which Kafka's clients do not send, are skipped.
func decode(payload []byte, codec int8) ([]point, error) {
	raw, err := decompress(payload, codec, maxDecompressed)
	if err != nil {
		return nil, fmt.Errorf("decompressing: %w", err)
	}
	var md metricspb.MetricsData
	if err := proto.Unmarshal(raw, &md); err != nil {
		return nil, fmt.Errorf("not OTLP metrics: %w", err)
	}
	var points []point
	for _, rm := range md.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				var dps []*metricspb.NumberDataPoint
				kind, delta := Gauge, false
				switch {
				case m.GetGauge() != nil:
					dps = m.GetGauge().GetDataPoints()
				case m.GetSum() != nil:
					dps = m.GetSum().GetDataPoints()
					if m.GetSum().GetIsMonotonic() {
						kind = Counter
					}
					delta = m.GetSum().GetAggregationTemporality() == metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
				default:
					continue
				}
				if m.GetName() == "" {
					return nil, errors.New("a metric without a name")
				}
				for _, dp := range dps {
					p := point{name: m.GetName(), help: m.GetDescription(), kind: kind, delta: delta}
					switch v := dp.GetValue().(type) {
					case *metricspb.NumberDataPoint_AsDouble:
						p.value = v.AsDouble
					case *metricspb.NumberDataPoint_AsInt:
						p.value = float64(v.AsInt)
					default:
						continue // no value recorded
					}
					if math.IsNaN(p.value) && kind == Counter {
						continue
					}
					for _, kv := range dp.GetAttributes() {
						p.attrs = append(p.attrs, Label{kv.GetKey(), attrString(kv.GetValue())})
					}
					points = append(points, p)
				}
			}
		}
	}
	return points, nil
}

func attrString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return ""
}

// decompress undoes Kafka's compression of a push (codec ids 0-4, framed as
// in record batches), refusing more than limit bytes before allocating much
// more (batch.Inflate: a snappy block or zstd frame that declares more than
// its bytes hold is refused at once).
func decompress(b []byte, codec int8, limit int) ([]byte, error) {
	switch {
	case codec == 0:
		return b, nil
	case codec < 0 || codec > int8(batch.CodecZstd):
		return nil, fmt.Errorf("unknown compression type %d", codec)
	}
	return batch.Inflate(batch.Codec(codec), b, limit)
}
