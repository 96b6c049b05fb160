package telemetry

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
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

var (
	snappy = kgo.DefaultDecompressor()
	// zstdDecoder is shared (DecodeAll is safe for concurrent use): building
	// one per push would cost more than the push. It refuses frames that
	// would take more than maxDecompressed bytes.
	zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxDecompressed), zstd.WithDecoderConcurrency(0))
)

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

// decompress undoes Kafka's compression of a push (codec ids 0-4, as in record
// batches), refusing more than limit bytes.
func decompress(b []byte, codec int8, limit int) ([]byte, error) {
	var r io.Reader
	switch codec {
	case 0:
		return b, nil
	case 1:
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		r = zr
	case 2:
		// Java frames snappy (xerial) with no length bound to read first:
		// franz-go's decoder handles it, and snappy expands a byte to at most
		// a few dozen, so the payload bound (MaxBytes) bounds it.
		out, err := snappy.Decompress(b, kgo.CodecSnappy)
		if err == nil && len(out) > limit {
			err = fmt.Errorf("more than %d bytes decompressed", limit)
		}
		return out, err
	case 3:
		r = lz4.NewReader(bytes.NewReader(b))
	case 4:
		out, err := zstdDecoder.DecodeAll(b, nil)
		if err == nil && len(out) > limit {
			err = fmt.Errorf("more than %d bytes decompressed", limit)
		}
		return out, err
	default:
		return nil, fmt.Errorf("unknown compression type %d", codec)
	}
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err == nil && len(out) > limit {
		err = fmt.Errorf("more than %d bytes decompressed", limit)
	}
	return out, err
}
