package batch

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestBuildRecordsRoundTrip(t *testing.T) {
	in := []Record{
		{Key: []byte("k1"), Value: []byte("v1"), TimestampDelta: 0, Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}},
		{Key: nil, Value: nil, TimestampDelta: 5},
		{Key: []byte("k3"), Value: bytes.Repeat([]byte("z"), 1000), TimestampDelta: 2},
	}
	for codec := Codec(0); codec <= 4; codec++ {
		t.Run(fmt.Sprint(codec), func(t *testing.T) {
			b, err := Build(BuildOptions{BaseOffset: 7, FirstTimestamp: 1000, Codec: codec, Idempotent: true, ProducerID: 3, ProducerEpoch: 1, BaseSequence: 9}, in)
			if err != nil {
				t.Fatal(err)
			}
			h, err := Validate(b)
			if err != nil {
				t.Fatalf("built batch does not validate: %v", err)
			}
			if h.BaseOffset != 7 || h.NumRecords != 3 || h.LastOffsetDelta != 2 || h.MaxTimestamp != 1005 || h.Codec() != codec || h.ProducerID != 3 || h.BaseSequence != 9 {
				t.Fatalf("header %+v", h)
			}
			var out []Record
			err = Records(b, func(_ Header, r Record) error {
				r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
				out = append(out, r)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(in) {
				t.Fatalf("decoded %d records, want %d", len(out), len(in))
			}
			for i := range in {
				if !bytes.Equal(out[i].Key, in[i].Key) || !bytes.Equal(out[i].Value, in[i].Value) ||
					(out[i].Key == nil) != (in[i].Key == nil) || out[i].TimestampDelta != in[i].TimestampDelta ||
					out[i].OffsetDelta != int32(i) || len(out[i].Headers) != len(in[i].Headers) {
					t.Fatalf("record %d: got %+v, want %+v", i, out[i], in[i])
				}
			}
		})
	}
	if _, err := Build(BuildOptions{}, nil); err == nil {
		t.Fatal("an empty batch must be refused")
	}
}
