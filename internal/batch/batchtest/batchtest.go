// Package batchtest builds Kafka v2 record batches for tests, with kmsg doing the
// encoding and this package filling in the record lengths, batch length, max
// timestamp and CRC that kmsg leaves to the caller. It has no state.
package batchtest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Build encodes a batch. Its max timestamp is FirstTimestamp plus the largest
// record timestamp delta.
func Build(o Options) []byte {
	if len(o.Records) == 0 {
		o.Records = []Record{{Value: []byte("v")}}
	}
	var records []byte
	maxDelta := o.Records[0].TimestampDelta
	for i, r := range o.Records {
		kr := kmsg.Record{TimestampDelta64: r.TimestampDelta, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		// A zero Length encodes as one varint byte; the rest is what Length counts.
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		records = kr.AppendTo(records)
		maxDelta = max(maxDelta, r.TimestampDelta)
	}
	attrs := o.Attributes
	if o.Codec != 0 {
		records = compress(records, o.Codec)
		attrs |= int16(o.Codec)
	}
	kb := kmsg.RecordBatch{
		FirstOffset:          o.BaseOffset,
		Length:               int32(61 - 12 + len(records)),
		PartitionLeaderEpoch: o.LeaderEpoch,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(o.Records) - 1),
		FirstTimestamp:       o.FirstTimestamp,
		MaxTimestamp:         o.FirstTimestamp + maxDelta,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(o.Records)),
		Records:              records,
	}
	if o.Idempotent {
		kb.ProducerID, kb.ProducerEpoch, kb.FirstSequence = o.ProducerID, o.ProducerEpoch, o.BaseSequence
	}
	b := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// Values returns n records with size-byte values, timestamp deltas 0..n-1.
func Values(n, size int) []Record {
	rs := make([]Record, n)
	for i := range rs {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		rs[i] = Record{TimestampDelta: int64(i), Value: v}
	}
	return rs
}

func compress(b []byte, codec int8) []byte {
	var c kgo.CompressionCodec
	switch codec {
	case 1:
		c = kgo.GzipCompression()
	case 2:
		c = kgo.SnappyCompression()
	case 3:
		c = kgo.Lz4Compression()
	default:
		c = kgo.ZstdCompression()
	}
	comp, err := kgo.DefaultCompressor(c)
	if err != nil {
		panic(err)
	}
	out, _ := comp.Compress(new(bytes.Buffer), b)
	return bytes.Clone(out)
}
