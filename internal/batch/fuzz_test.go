package batch

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzValidate from seedBatches")

// seedBatches are the inputs committed under testdata/fuzz/FuzzValidate.
func seedBatches() map[string][]byte {
	plain := build(spec{records: []rec{{0, "hello"}}})
	multi := build(spec{baseOffset: 5, epoch: 3, firstTS: 1700000000000,
		producerID: 4, records: []rec{{0, "a"}, {9, "bb"}, {2, ""}}})
	lat := bytes.Clone(multi)
	SetLogAppendTime(lat, 1800000000000)
	control := build(spec{attrs: attrControl | attrTransactional, producerID: 8})
	zstd := build(spec{attrs: int16(CodecZstd)})
	two := append(bytes.Clone(plain), multi...)
	return map[string][]byte{
		"plain":        plain,
		"multi":        multi,
		"logappend":    lat,
		"control":      control,
		"codec-zstd":   zstd,
		"two-batches":  two,
		"torn-tail":    two[:len(two)-7],
		"bad-crc":      mutate(plain, false, func(b []byte) []byte { b[len(b)-1] ^= 0x55; return b }),
		"bad-magic":    mutate(plain, true, func(b []byte) []byte { b[offMagic] = 0; return b }),
		"short-header": plain[:30],
		"empty":        {},
	}
}

func TestFuzzSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzValidate")
	for name, b := range seedBatches() {
		want := fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b)
		path := filepath.Join(dir, name)
		if *updateCorpus {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestFuzzSeedCorpus -update-corpus)", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s is stale (run go test -run TestFuzzSeedCorpus -update-corpus)", path)
		}
	}
}

// FuzzValidate checks that no input panics and that whatever Validate accepts stays
// self-consistent under the in-place setters. Each input is checked as it is and
// with its CRC set right: a random mutation nearly always breaks the CRC, and
// the checks past it (codec, record counts, the records FindTimestamp parses)
// would otherwise see only the seeds.
func FuzzValidate(f *testing.F) {
	for _, b := range seedBatches() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkBatch(t, data)
		checkBatch(t, mutate(data, true, func(b []byte) []byte { return b }))
	})
}

// checkBatch is FuzzValidate's check of one input.
func checkBatch(t *testing.T, data []byte) {
	_, _ = ParseHeader(data)
	_, _ = FrameSize(data)
	h, err := Validate(data)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalid) {
			t.Fatalf("unclassed error %v", err)
		}
	} else {
		if h.Size() != len(data) || h.NumRecords <= 0 || h.Magic != 2 {
			t.Fatalf("accepted inconsistent header %+v for %d bytes", h, len(data))
		}
		c := bytes.Clone(data)
		SetBaseOffset(c, h.BaseOffset+1)
		SetPartitionLeaderEpoch(c, 9)
		SetLogAppendTime(c, 12345)
		h2, err := Validate(c)
		if err != nil {
			t.Fatalf("setters broke a valid batch: %v", err)
		}
		if h2.BaseOffset != h.BaseOffset+1 || h2.PartitionLeaderEpoch != 9 || h2.MaxTimestamp != 12345 || !h2.LogAppendTime() {
			t.Fatalf("setters did not stick: %+v", h2)
		}
		if h.Codec() == CodecNone {
			_, _, _, _ = FindTimestamp(&h, data[HeaderSize:], h.FirstTimestamp, h.BaseOffset, math.MaxInt32)
		}
		// Records a produce takes are records every reader can decode.
		buf := GetRecordsBuffer()
		defer buf.Release()
		records, err := ValidateRecords(h, data, buf, math.MaxInt32)
		if err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrDecompress) {
			t.Fatalf("ValidateRecords: unexpected error %v", err)
		}
		if err == nil {
			if err := WalkRecords(records, h.NumRecords, func(RawRecord) error { return nil }); err != nil {
				t.Fatalf("ValidateRecords took records WalkRecords refuses: %v", err)
			}
			n := int32(0)
			if err := Records(data, func(Header, Record) error { n++; return nil }); err != nil || n != h.NumRecords {
				t.Fatalf("ValidateRecords took records Records reads as %d of %d (%v)", n, h.NumRecords, err)
			}
			checkRecompress(t, data, h, records)
		}
	}
	it := NewIter(data)
	total := 0
	for it.Next() {
		total += len(it.Batch())
	}
	if total != it.Pos() || total > len(data) || (it.Err() == nil && total != len(data)) {
		t.Fatalf("iter covered %d of %d bytes, pos %d, err %v", total, len(data), it.Pos(), it.Err())
	}
}

// checkRecompress: a batch ValidateRecords took, rebuilt with another codec
// (picked from its length), is a valid batch of the same records.
func checkRecompress(t *testing.T, data []byte, h Header, records []byte) {
	codec := Codec(len(data) % int(maxCodec+1))
	out, err := Recompress(data, h, records, Compression{Codec: codec, Level: DefaultLevel(codec)})
	if err != nil {
		t.Fatalf("Recompress to codec %d: %v", codec, err)
	}
	oh, err := Validate(out)
	if err != nil || oh.Codec() != codec || oh.NumRecords != h.NumRecords {
		t.Fatalf("Recompress to codec %d gave header %+v, %v", codec, oh, err)
	}
	var before, after []Record
	collect := func(into *[]Record) func(Header, Record) error {
		return func(_ Header, r Record) error {
			r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
			hs := make([]kmsg.Header, len(r.Headers))
			for i, hd := range r.Headers {
				hs[i] = kmsg.Header{Key: hd.Key, Value: bytes.Clone(hd.Value)}
			}
			r.OffsetDelta, r.Headers = 0, hs
			*into = append(*into, r)
			return nil
		}
	}
	if err := Records(data, collect(&before)); err != nil {
		t.Fatal(err)
	}
	if err := Records(out, collect(&after)); err != nil {
		t.Fatalf("records of the rebuilt batch: %v", err)
	}
	for i := range before {
		b, a := before[i], after[i]
		if !bytes.Equal(b.Key, a.Key) || !bytes.Equal(b.Value, a.Value) || (b.Key == nil) != (a.Key == nil) ||
			(b.Value == nil) != (a.Value == nil) || b.TimestampDelta != a.TimestampDelta || !slices.EqualFunc(b.Headers, a.Headers,
			func(x, y kmsg.Header) bool {
				return x.Key == y.Key && bytes.Equal(x.Value, y.Value) && (x.Value == nil) == (y.Value == nil)
			}) {
			t.Fatalf("record %d rebuilt as %+v, was %+v", i, a, b)
		}
	}
}
