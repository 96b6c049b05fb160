package protocol

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// eagerFrameBytes is the largest frame whose buffer is allocated in full as soon
// as its size is known. Larger frames grow their buffer as bytes arrive (a
// pooled one allocates its class's buffer after this many: readPooledFrame),
// so a client cannot make the broker allocate MaxRequestBytes by sending four
// bytes.
const eagerFrameBytes = 1 << 20

// readFrame reads one request frame from r and returns the bytes after the size
// prefix. It returns io.EOF when r ends cleanly before a frame starts.
func readFrame(r io.Reader, maxBytes int32) ([]byte, error) {
	size, err := readFrameSize(r, maxBytes)
	if err != nil {
		return nil, err
	}
	return readFrameBody(r, size)
}

// readFrameSize reads and checks a frame's size prefix. It returns io.EOF when r
// ends cleanly before a frame starts.
func readFrameSize(r io.Reader, maxBytes int32) (int32, error) {
	return readSize(r, 1, maxBytes)
}

// readSize reads a size prefix and checks it is in minBytes..maxBytes: 1.. for a
// request frame, 0.. for a raw SASL token after SaslHandshake v0 (an empty token).
// It returns io.EOF when r ends cleanly before the prefix.
func readSize(r io.Reader, minBytes, maxBytes int32) (int32, error) {
	prefix, err := readSizePrefix(r)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, fmt.Errorf("%w: in the size prefix", ErrTruncatedFrame)
		}
		return 0, err
	}
	size := int32(prefix)
	switch {
	case size < minBytes:
		return 0, fmt.Errorf("%w: %d", ErrFrameSize, size)
	case size > maxBytes:
		return 0, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, size, maxBytes)
	}
	return size, nil
}

// readSizePrefix reads the 4-byte size prefix as io.ReadFull would (io.EOF
// before any byte, io.ErrUnexpectedEOF within). From a bufio.Reader (a
// connection's) it reads in place, without the heap buffer that passing a
// local array to an io.Reader costs.
func readSizePrefix(r io.Reader) (uint32, error) {
	if br, ok := r.(*bufio.Reader); ok {
		b, err := br.Peek(4)
		if err != nil {
			if len(b) > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		_, _ = br.Discard(4)
		return binary.BigEndian.Uint32(b), nil
	}
	var buf [4]byte
	if _, err := io.ReadFull(r, buf[:]); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(buf[:]), nil
}

// readFrameBody reads the size bytes of a frame after its size prefix.
func readFrameBody(r io.Reader, size int32) ([]byte, error) {
	buf := make([]byte, 0, min(int(size), eagerFrameBytes))
	for len(buf) < int(size) {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), int(size)))
			copy(grown, buf)
			buf = grown
		}
		n, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			return nil, truncatedFrame(err, len(buf), int(size))
		}
	}
	return buf, nil
}

// truncatedFrame is the error of a frame body read that failed after got of
// its size bytes: ErrTruncatedFrame when the connection ended.
func truncatedFrame(err error, got, size int) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: got %d of %d bytes", ErrTruncatedFrame, got, size)
	}
	return err
}

// decodeRequest decodes a frame (without its size prefix) against the registry.
// The returned Request keeps references into frame.
func (g *registry) decodeRequest(frame []byte) (*Request, error) {
	rd := kbin.Reader{Src: frame}
	r := &Request{Key: rd.Int16(), Version: rd.Int16(), CorrelationID: rd.Int32(), Size: len(frame) + 4}
	if r.Key != controlledShutdownKey || r.Version != 0 {
		r.ClientID = rd.NullableString()
	}
	if err := rd.Complete(); err != nil {
		return nil, fmt.Errorf("%w: %d bytes", ErrTruncatedHeader, len(frame))
	}
	if r.Key == apiVersionsKey && !apiVersionsSupported(r.Version) {
		v0 := kmsg.NewPtrApiVersionsRequest() // KIP-511: answer v0 without parsing
		r.Msg = v0
		return r, nil
	}
	e, ok := g.lookup(r.Key)
	if !ok {
		return nil, fmt.Errorf("%w: %d (version %d)", ErrUnknownAPIKey, r.Key, r.Version)
	}
	if r.Version < e.min || r.Version > e.max {
		return nil, fmt.Errorf("%w: %s v%d, supported %d..%d", ErrUnsupportedVersion, kmsg.NameForKey(r.Key), r.Version, e.min, e.max)
	}
	msg := kmsg.RequestForKey(r.Key)
	msg.SetVersion(r.Version)
	if msg.IsFlexible() {
		kmsg.SkipTags(&rd)
		if err := rd.Complete(); err != nil {
			return nil, fmt.Errorf("%w: in the header tags", ErrTruncatedHeader)
		}
	}
	if err := msg.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("%w: %s v%d: %w", ErrMalformedRequest, kmsg.NameForKey(r.Key), r.Version, err)
	}
	r.Msg = msg
	return r, nil
}

// appendResponseHeader appends a response header whose size prefix is left zero
// for putFrameSize.
func appendResponseHeader(dst []byte, correlationID int32, flexible bool) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if flexible {
		dst = append(dst, 0) // no header tags
	}
	return dst
}

// putFrameSize writes size, the number of bytes after the prefix, into the size
// prefix at frame[0:4].
func putFrameSize(frame []byte, size int) {
	binary.BigEndian.PutUint32(frame, uint32(size))
}
