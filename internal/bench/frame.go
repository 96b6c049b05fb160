package bench

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Framing for the raw clients that write requests they encoded themselves and
// read the answers without franz-go's client: the raw fan-out readers
// (fanout.go) and bench/compare's pre-encoded producer.

// flexibleHeaderBytes is a flexible response header (v1) with no tagged
// fields: the correlation id and an empty tag section.
const flexibleHeaderBytes = 5

// ReadResponse reads one size-prefixed Kafka response with a flexible header
// from r into *buf, grown when too small and reused otherwise. It returns the
// response's correlation id, its body after the header (a slice of *buf, valid
// until the next call) and its size without the 4-byte prefix.
//
// A size under the header's 5 bytes or over maxBytes, or a header with tagged
// fields, is an error wrapping ErrResponseFrame; the size is checked before
// anything is allocated for it. A stream that ends before the response is
// io.EOF, within it io.ErrUnexpectedEOF.
func ReadResponse(r io.Reader, buf *[]byte, maxBytes int) (corr int32, body []byte, size int, err error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return 0, nil, 0, err
	}
	size = int(binary.BigEndian.Uint32(prefix[:]))
	if size < flexibleHeaderBytes || size > maxBytes {
		return 0, nil, 0, fmt.Errorf("%w: a %d-byte response (want %d to %d)", ErrResponseFrame, size, flexibleHeaderBytes, maxBytes)
	}
	if cap(*buf) < size {
		*buf = make([]byte, size)
	}
	in := (*buf)[:size]
	if _, err := io.ReadFull(r, in); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, 0, err
	}
	if in[4] != 0 {
		return 0, nil, 0, fmt.Errorf("%w: a response header with tagged fields", ErrResponseFrame)
	}
	return int32(binary.BigEndian.Uint32(in)), in[flexibleHeaderBytes:], size, nil
}
