package batch

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
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

// TestRecordsBounded: Records decompresses with the bounded decoders, as a
// produced batch is (ValidateRecords): a stored batch whose snappy block or
// zstd frame declares far more than its bytes hold does not decompress
// (ErrDecompress) and allocates nothing like what it declares; records that
// inflate past the bound are ErrDecompressedTooLarge. franz-go's decoder,
// which Records used before, allocated what the frame declared (512 MiB).
func TestRecordsBounded(t *testing.T) {
	b, _ := recordsOf(t, []Record{{Value: []byte("v")}})
	for _, tc := range []struct {
		name    string
		codec   Codec
		section []byte
		want    error
	}{
		{"snappy declares 512 MiB", CodecSnappy, snappyClaiming(bombSize), ErrDecompress},
		{"zstd declares 512 MiB", CodecZstd, zstdClaiming(bombSize), ErrDecompress},
		{"zstd inflates past the bound", CodecZstd, concatenated(zstdStreamed(t, make([]byte, 1<<20)), 2*MinDecompressedLimit>>20), ErrDecompressedTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := withSection(b, tc.codec, tc.section, 1)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := Records(stored, func(Header, Record) error { return nil })
			runtime.ReadMemStats(&after)
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if grown := after.TotalAlloc - before.TotalAlloc; grown > 5*MinDecompressedLimit {
				t.Errorf("%d bytes allocated for a %d-byte section", grown, len(tc.section))
			}
		})
	}
}
