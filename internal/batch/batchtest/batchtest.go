// Package batchtest builds Kafka v2 record batches for tests on top of batch.Build,
// with options production code never needs (any leader epoch or attribute bits).
// It has no state.
package batchtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/batch"
)

// Record is one record of a test batch.
type Record struct {
	TimestampDelta int64
	Key, Value     []byte
}

// Options describe a test batch. The zero value is a one-record batch at offset 0
// with CreateTime 0, no compression and no producer id.
type Options struct {
	BaseOffset     int64
	LeaderEpoch    int32
	FirstTimestamp int64
	// Attributes are OR-ed into the batch attributes after the codec bits.
	Attributes int16
	// Codec compresses the records: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
	Codec int8
	// Idempotent sets ProducerID, ProducerEpoch and BaseSequence; otherwise they are -1.
	Idempotent    bool
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	Records       []Record
}

// Build encodes a batch (batch.Build with test-friendly options); it panics on
// bad options. Its max timestamp is FirstTimestamp plus the largest record
// timestamp delta.
func Build(o Options) []byte {
	if len(o.Records) == 0 {
		o.Records = []Record{{Value: []byte("v")}}
	}
	recs := make([]batch.Record, len(o.Records))
	for i, r := range o.Records {
		recs[i] = batch.Record{Key: r.Key, Value: r.Value, TimestampDelta: r.TimestampDelta}
	}
	b, err := batch.Build(batch.BuildOptions{
		BaseOffset: o.BaseOffset, FirstTimestamp: o.FirstTimestamp, Codec: batch.Codec(o.Codec),
		Idempotent: o.Idempotent, ProducerID: o.ProducerID, ProducerEpoch: o.ProducerEpoch, BaseSequence: o.BaseSequence,
	}, recs)
	if err != nil {
		panic(err)
	}
	if o.LeaderEpoch != 0 || o.Attributes != 0 {
		binary.BigEndian.PutUint32(b[12:], uint32(o.LeaderEpoch))
		attrs := binary.BigEndian.Uint16(b[21:]) | uint16(o.Attributes)
		binary.BigEndian.PutUint16(b[21:], attrs)
		binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	}
	return b
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Values returns n records with size-byte values, timestamp deltas 0..n-1.
func Values(n, size int) []Record {
	rs := make([]Record, n)
	for i := range rs {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		rs[i] = Record{TimestampDelta: int64(i), Value: v}
	}
	return rs
}

// WithRecords returns a copy of the one batch b with its record section
// replaced by section, its codec bits set to codec (section is taken as it
// is: see Compress) and its record count set to n, batch length, last offset
// delta and CRC fixed: a batch whose only fault can be its records.
func WithRecords(b []byte, codec int8, section []byte, n int32) []byte {
	c := append(b[:batch.HeaderSize:batch.HeaderSize], section...)
	binary.BigEndian.PutUint32(c[8:], uint32(len(c)-batch.LengthPrefix))
	binary.BigEndian.PutUint16(c[21:], binary.BigEndian.Uint16(c[21:])&^7|uint16(codec))
	binary.BigEndian.PutUint32(c[23:], uint32(n-1))
	binary.BigEndian.PutUint32(c[57:], uint32(n))
	binary.BigEndian.PutUint32(c[17:], crc32.Checksum(c[21:], castagnoli))
	return c
}

// Compress compresses p with codec (1 gzip, 2 snappy, 3 lz4, 4 zstd) as a
// client compresses a batch's records; it panics on another codec.
func Compress(codec int8, p []byte) []byte {
	codecs := []kgo.CompressionCodec{1: kgo.GzipCompression(), 2: kgo.SnappyCompression(), 3: kgo.Lz4Compression(), 4: kgo.ZstdCompression()}
	c, err := kgo.DefaultCompressor(codecs[codec])
	if err != nil || codec < 1 {
		panic(fmt.Sprintf("batchtest: codec %d: %v", codec, err))
	}
	out, _ := c.Compress(new(bytes.Buffer), p)
	return bytes.Clone(out)
}
