package handlers

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

// fileRecords is record data that stays in a segment file and is sent with
// sendfile(2), or a remote block sent from memory: the Fetch response body is
// spliced around it.
type fileRecords struct {
	file *os.File
	off  int64
	// data, when file is nil, holds the record data in memory (a remote
	// block): it is written as it is, never copied into the encoded response.
	data    []byte
	n       int
	records int64 // offsets the batches span, for the Observer
	release func()
}

// fetchBody is a Fetch response body made of encoded bytes and file ranges, in order.
type fetchBody struct {
	pieces   []bodyPiece
	size     int
	releases []func()
	resp     *kmsg.FetchResponse
}

type bodyPiece struct {
	b    []byte
	file *fileRecords
}

func (b *fetchBody) Len() int { return b.size }

// Msg is the response the body encodes (its record data replaced by markers), for
// a handler wrapper that counts error codes.
func (b *fetchBody) Msg() kmsg.Response { return b.resp }

func (b *fetchBody) WriteBody(w protocol.BodyWriter) error {
	for _, p := range b.pieces {
		if p.file == nil {
			if _, err := w.Write(p.b); err != nil {
				return err
			}
			continue
		}
		if p.file.file == nil {
			if _, err := w.Write(p.file.data); err != nil {
				return err
			}
			continue
		}
		if err := w.SendFile(p.file.file, p.file.off, p.file.n); err != nil {
			return err
		}
	}
	return nil
}

func (b *fetchBody) Release() {
	for _, r := range b.releases {
		r()
	}
	b.releases = nil
}

// markerLen is the size of the placeholder written where file records go.
const markerLen = 16

// encodeFetchBody encodes resp with kmsg, except that the record data of the
// partitions in files is sent from their files. Each such partition's RecordBatches
// is first set to a random 16-byte marker; after encoding, each marker (found in
// order, just behind its length prefix) is cut out and replaced by the real length
// prefix and the file range, so every other byte is kmsg's own encoding.
// On error every file range is released.
func encodeFetchBody(resp *kmsg.FetchResponse, files map[*kmsg.FetchResponseTopicPartition]*fileRecords) (body *fetchBody, err error) {
	body = &fetchBody{resp: resp}
	for _, f := range files {
		if f.release != nil {
			body.releases = append(body.releases, f.release)
		}
	}
	defer func() {
		if err != nil {
			body.Release()
			body = nil
		}
	}()
	flexible := resp.Version >= 12
	type hole struct {
		marker []byte
		file   *fileRecords
	}
	var holes []hole
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			p := &resp.Topics[ti].Partitions[pi]
			f, ok := files[p]
			if !ok {
				continue
			}
			marker := make([]byte, markerLen)
			rand.Read(marker)
			p.RecordBatches = marker
			holes = append(holes, hole{marker, f})
		}
	}
	enc := resp.AppendTo(nil)
	// Markers hold no length prefix of their own: strip the encoded one before each.
	oldPrefix := appendBytesLen(nil, markerLen, flexible)
	pos := 0
	for _, h := range holes {
		i := bytes.Index(enc[pos:], h.marker)
		if i < 0 {
			return nil, errors.New("fetch body: record marker not found")
		}
		start := pos + i - len(oldPrefix)
		if start < pos || !bytes.Equal(enc[start:pos+i], oldPrefix) {
			return nil, fmt.Errorf("fetch body: unexpected length prefix before record marker")
		}
		head := appendBytesLen(enc[pos:start:start], h.file.n, flexible)
		body.pieces = append(body.pieces, bodyPiece{b: head}, bodyPiece{file: h.file})
		body.size += len(head) + h.file.n
		pos += i + markerLen
	}
	body.pieces = append(body.pieces, bodyPiece{b: enc[pos:]})
	body.size += len(enc) - pos
	return body, nil
}

// appendBytesLen appends the length prefix of a non-null bytes field.
func appendBytesLen(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return kbin.AppendUvarint(dst, uint32(n)+1)
	}
	return kbin.AppendInt32(dst, int32(n))
}
