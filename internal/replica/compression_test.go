package replica

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
)

// TestStoredCompression: a topic whose compression.type names a codec stores
// each produced batch with that codec, rebuilding a batch of another codec as
// Kafka's LogValidator does (producer fields, transactional bit and records
// kept); producer and a matching codec store the batch as produced; a
// rebuilt batch over max.message.bytes is refused, and so is a request of
// several batches, as Kafka's LogValidator refuses a second v2 batch.
func TestStoredCompression(t *testing.T) {
	recs := []batchtest.Record{
		{Key: []byte("k1"), Value: bytes.Repeat([]byte("value "), 40)},
		{TimestampDelta: 7, Key: []byte("k2"), Value: bytes.Repeat([]byte("other "), 40)},
		{TimestampDelta: 3, Value: nil},
	}
	plain := func(codec int8) []byte {
		return batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Codec: codec, Records: recs})
	}
	txnl := batchtest.Build(batchtest.Options{FirstTimestamp: time.Now().UnixMilli(), Idempotent: true, ProducerID: 9,
		ProducerEpoch: 2, BaseSequence: 0, Attributes: 0x10, Records: recs}) // transactional
	for _, tc := range []struct {
		name      string
		topic     string // compression.type
		produced  []byte
		wantCodec batch.Codec
		asIs      bool // stored exactly as produced (but the base offset)
	}{
		{"producer keeps lz4", "producer", plain(3), batch.CodecLZ4, true},
		{"producer keeps none", "producer", plain(0), batch.CodecNone, true},
		{"zstd compresses none", "zstd", plain(0), batch.CodecZstd, false},
		{"lz4 recompresses gzip", "lz4", plain(1), batch.CodecLZ4, false},
		{"gzip compresses none", "gzip", plain(0), batch.CodecGzip, false},
		{"snappy recompresses zstd", "snappy", plain(4), batch.CodecSnappy, false},
		{"uncompressed decompresses snappy", "uncompressed", plain(2), batch.CodecNone, false},
		{"uncompressed keeps none", "uncompressed", plain(0), batch.CodecNone, true},
		{"zstd keeps zstd", "zstd", plain(4), batch.CodecZstd, true},
		{"transactional batch rebuilt", "zstd", txnl, batch.CodecZstd, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := compressionLeader(t, tc.topic, 1<<20)
			if _, err := p.Append(tc.produced, 1); err != nil {
				t.Fatal(err)
			}
			stored := readAllBatches(t, p)
			h, err := batch.ValidateStored(stored)
			if err != nil {
				t.Fatalf("stored batch: %v", err)
			}
			if len(stored) != h.Size() {
				t.Fatalf("stored %d bytes, one batch of %d", len(stored), h.Size())
			}
			if h.Codec() != tc.wantCodec {
				t.Fatalf("stored codec %d, want %d", h.Codec(), tc.wantCodec)
			}
			ph, _ := batch.ParseHeader(tc.produced)
			if tc.asIs != bytes.Equal(stored[batch.HeaderSize:], tc.produced[batch.HeaderSize:]) {
				t.Fatalf("records stored as produced: %v, want %v", !tc.asIs, tc.asIs)
			}
			if h.ProducerID != ph.ProducerID || h.ProducerEpoch != ph.ProducerEpoch || h.BaseSequence != ph.BaseSequence ||
				h.Transactional() != ph.Transactional() || h.FirstTimestamp != ph.FirstTimestamp ||
				h.MaxTimestamp != ph.MaxTimestamp || h.NumRecords != ph.NumRecords || h.LastOffsetDelta != ph.LastOffsetDelta {
				t.Fatalf("stored header %+v, produced %+v", h, ph)
			}
			if got, want := decodeAll(t, stored), decodeAll(t, tc.produced); !equalRecords(got, want) {
				t.Fatalf("stored records %+v, want %+v", got, want)
			}
		})
	}

	t.Run("rebuilt batch over max.message.bytes", func(t *testing.T) {
		// 2,000 zero bytes gzip to a few dozen; stored uncompressed they are
		// over the topic's 1,000.
		p := compressionLeader(t, "uncompressed", 1000)
		b := batchtest.Build(batchtest.Options{Codec: 1, FirstTimestamp: time.Now().UnixMilli(),
			Records: []batchtest.Record{{Value: make([]byte, 2000)}}})
		if _, err := p.Append(b, 1); !errors.Is(err, ErrRecordTooLarge) {
			t.Fatalf("append: %v, want ErrRecordTooLarge", err)
		}
	})
	for _, tc := range []struct{ name, topic string }{
		{"two batches to recompress", "zstd"},
		{"two batches, one compressed", "producer"},
		{"two uncompressed batches", "uncompressed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := compressionLeader(t, tc.topic, 1<<20)
			two := append(plain(0), plain(map[string]int8{"zstd": 0, "producer": 3, "uncompressed": 0}[tc.topic])...)
			if _, err := p.Append(two, 1); !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("append: %v, want ErrInvalidRecord", err)
			}
		})
	}
}

// compressionLeader is a leader of a topic with compression.type ct and
// max.message.bytes maxBytes.
func compressionLeader(t *testing.T, ct string, maxBytes int32) *Partition {
	t.Helper()
	p := newTestPartition(t, 1)
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	cfg := metadata.DefaultTopicConfig()
	cfg.CompressionType, cfg.MaxMessageBytes = ct, maxBytes
	p.setConfig(&cfg)
	return p
}

// readAllBatches is every batch of p's log.
func readAllBatches(t *testing.T, p *Partition) []byte {
	t.Helper()
	res, err := p.Read(0, 1<<20, ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Chunk.Release()
	data, err := res.Data()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(data)
}

// decodeAll is every record of batch b.
func decodeAll(t *testing.T, b []byte) []batch.Record {
	t.Helper()
	var out []batch.Record
	err := batch.Records(b, func(_ batch.Header, r batch.Record) error {
		r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalRecords(a, b []batch.Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Key, b[i].Key) || !bytes.Equal(a[i].Value, b[i].Value) || (a[i].Key == nil) != (b[i].Key == nil) ||
			(a[i].Value == nil) != (b[i].Value == nil) || a[i].TimestampDelta != b[i].TimestampDelta || a[i].OffsetDelta != b[i].OffsetDelta {
			return false
		}
	}
	return true
}
