package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// response frames a flexible response: size prefix, correlation id, tag byte, body.
func response(corr int32, tag byte, body string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(5+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	return append(append(b, tag), body...)
}

func TestReadResponse(t *testing.T) {
	two := append(response(7, 0, "first answer"), response(8, 0, "second, longer answer")...)
	for _, tc := range []struct {
		name     string
		stream   []byte
		oneByte  bool // the reader returns one byte per Read: every read is short
		maxBytes int
		want     []string // bodies read before the error
		err      error    // what the read after them returns
	}{
		{name: "two answers", stream: two, maxBytes: 1 << 10, want: []string{"first answer", "second, longer answer"}, err: io.EOF},
		{name: "short reads", stream: two, oneByte: true, maxBytes: 1 << 10, want: []string{"first answer", "second, longer answer"}, err: io.EOF},
		{name: "empty body", stream: response(7, 0, ""), maxBytes: 5, want: []string{""}, err: io.EOF},
		{name: "cut in the size prefix", stream: two[:2], oneByte: true, maxBytes: 1 << 10, err: io.ErrUnexpectedEOF},
		{name: "cut in the header", stream: two[:6], oneByte: true, maxBytes: 1 << 10, err: io.ErrUnexpectedEOF},
		{name: "cut in the body", stream: two[:len(two)-3], oneByte: true, maxBytes: 1 << 10, want: []string{"first answer"}, err: io.ErrUnexpectedEOF},
		{name: "oversized length", stream: []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0}, maxBytes: 1 << 20, err: ErrResponseFrame},
		{name: "one byte over the bound", stream: response(1, 0, "123456"), maxBytes: 10, err: ErrResponseFrame},
		{name: "shorter than a header", stream: []byte{0, 0, 0, 4, 0, 0, 0, 1}, maxBytes: 1 << 10, err: ErrResponseFrame},
		{name: "tagged fields in the header", stream: response(1, 1, "x"), maxBytes: 1 << 10, err: ErrResponseFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(tc.stream)
			if tc.oneByte {
				r = iotest.OneByteReader(r)
			}
			var buf []byte
			for i, want := range tc.want {
				corr, body, size, err := ReadResponse(r, &buf, tc.maxBytes)
				if err != nil {
					t.Fatalf("answer %d: %v", i, err)
				}
				if string(body) != want || size != 5+len(want) {
					t.Fatalf("answer %d: body %q, size %d; want %q", i, body, size, want)
				}
				if corr != int32(7+i) {
					t.Fatalf("answer %d: correlation id %d", i, corr)
				}
			}
			_, _, _, err := ReadResponse(r, &buf, tc.maxBytes)
			if !errors.Is(err, tc.err) {
				t.Fatalf("after %d answers: %v, want %v", len(tc.want), err, tc.err)
			}
			if cap(buf) > 1<<10 {
				t.Fatalf("a buffer of %d bytes for answers of at most 1 KiB", cap(buf))
			}
		})
	}
}

// TestReadResponseReusesItsBuffer: a buffer large enough is read into in place.
func TestReadResponseReusesItsBuffer(t *testing.T) {
	r := bytes.NewReader(append(response(1, 0, "a longer answer first"), response(2, 0, "short")...))
	buf := make([]byte, 0, 64)
	first := &buf[:1][0]
	for range 2 {
		if _, _, _, err := ReadResponse(r, &buf, 64); err != nil {
			t.Fatal(err)
		}
		if &buf[:1][0] != first {
			t.Fatal("the buffer was replaced")
		}
	}
}
