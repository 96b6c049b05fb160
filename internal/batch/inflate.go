package batch

import (
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A RecordsBuffer holds the decompressed records of one batch at a time (see
// ValidateRecords). It is pooled with the decoders that fill it
// (GetRecordsBuffer, Release), so a steady stream of compressed batches is
// decompressed without allocating. It is not safe for concurrent use.
type RecordsBuffer struct {
	out outBytes
	dec kgo.Decompressor
}

// outBytes lends a RecordsBuffer's bytes to its decompressor, whose decoders
// write into their capacity (kgo.PoolDecompressBytes).
type outBytes struct{ b []byte }

func (o *outBytes) GetDecompressBytes([]byte, kgo.CompressionCodecType) []byte { return o.b }

// PutDecompressBytes is called with the bytes back after a failed decompression.
func (o *outBytes) PutDecompressBytes(b []byte) { o.b = b[:0] }

// maxPooledRecords is the largest buffer Release keeps: a rare huge batch's
// records are not held on to.
const maxPooledRecords = 8 << 20

var recordsBuffers = sync.Pool{New: func() any {
	r := new(RecordsBuffer)
	r.dec = kgo.DefaultDecompressor(&r.out)
	return r
}}

// GetRecordsBuffer returns a RecordsBuffer from the pool; Release gives it back.
func GetRecordsBuffer() *RecordsBuffer { return recordsBuffers.Get().(*RecordsBuffer) }

// Release returns r to the pool; the records it holds must not be used after.
func (r *RecordsBuffer) Release() {
	if cap(r.out.b) > maxPooledRecords {
		r.out.b = nil
	}
	recordsBuffers.Put(r)
}

// section returns the record section of the batch b (header h): b's bytes
// after the header, or, for a compressed batch, its records decompressed into
// r. An error wraps ErrDecompress.
func (r *RecordsBuffer) section(h Header, b []byte) ([]byte, error) {
	if h.Codec() == CodecNone {
		return b[HeaderSize:], nil
	}
	records, err := r.dec.Decompress(b[HeaderSize:], kgo.CompressionCodecType(h.Codec()))
	if err != nil {
		return nil, fmt.Errorf("%w: codec %d: %v", ErrDecompress, h.Codec(), err)
	}
	r.out.b = records[:0]
	return records, nil
}
