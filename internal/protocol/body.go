package protocol

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

// errSendfileUnsupported means sendfile(2) cannot be used for this file or socket
// and nothing was sent: the caller copies instead.
var errSendfileUnsupported = errors.New("protocol: sendfile unsupported")

// bodyWriter is the BodyWriter the connection writer hands to a Body. It refuses
// to write more than the Body's Len.
type bodyWriter struct {
	bw   *bufio.Writer
	sock syscall.RawConn // the socket for sendfile(2), nil when unsupported
	// conn is the connection under bw, given large file chunks whole when
	// there is no sendfile(2) (a TLS connection); nil copies through bw only.
	conn io.Writer
	left int // bytes the body may still write
}

// sendfileSocket returns the raw socket behind nc when sendfile can target it.
func sendfileSocket(nc net.Conn) syscall.RawConn {
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
		rc, err := nc.(syscall.Conn).SyscallConn()
		if err == nil {
			return rc
		}
	}
	return nil
}

func (w *bodyWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		return 0, fmt.Errorf("%w: write of %d bytes with %d left", ErrBodyLength, len(p), w.left)
	}
	n, err := w.bw.Write(p)
	w.left -= n
	return n, err
}

func (w *bodyWriter) SendFile(f *os.File, off int64, n int) error {
	switch {
	case off < 0 || n < 0:
		return fmt.Errorf("%w: SendFile offset %d length %d", ErrBodyLength, off, n)
	case n > w.left:
		return fmt.Errorf("%w: SendFile of %d bytes with %d left", ErrBodyLength, n, w.left)
	case n == 0:
		return nil
	}
	if w.sock != nil {
		if err := w.bw.Flush(); err != nil {
			return err
		}
		sent, err := sendFile(w.sock, f, off, n)
		w.left -= sent
		if !errors.Is(err, errSendfileUnsupported) {
			return err
		}
		off, n = off+int64(sent), n-sent
	}
	return w.copyFile(f, off, n)
}

// copyFile writes n bytes of f at off without sendfile(2), reading each piece
// straight into the buffer it is written from. What fits goes into the write
// buffer, so a small range leaves with the bytes around it and a large one's
// start with the headers before it; once that buffer is empty, the rest of a
// large range is read tlsReadAhead at a time into a pooled chunk that is
// handed to the connection whole (over TLS 1.3 crypto/tls copies each record's
// share into its record buffer and seals it there; over TLS 1.2 it seals
// straight from the chunk), and the
// last piece under a buffer's length goes back through the buffer.
func (w *bodyWriter) copyFile(f *os.File, off int64, n int) error {
	var chunk *[]byte
	defer func() {
		if chunk != nil {
			putBigBuffer(chunk)
		}
	}()
	for n > 0 {
		if w.bw.Available() == 0 {
			if err := w.bw.Flush(); err != nil {
				return err
			}
		}
		var buf []byte
		direct := w.conn != nil && w.bw.Buffered() == 0 && n >= writeBufferSize
		if direct {
			if chunk == nil {
				chunk = getBigBuffer()
			}
			buf = (*chunk)[:min(n, tlsReadAhead)]
		} else {
			buf = w.bw.AvailableBuffer()[:min(n, w.bw.Available())]
		}
		read, err := f.ReadAt(buf, off)
		if read < len(buf) {
			if err == nil || errors.Is(err, io.EOF) {
				err = fmt.Errorf("SendFile: %s has only %d of %d bytes at offset %d: %w", f.Name(), read, n, off, io.ErrUnexpectedEOF)
			}
			return err
		}
		if direct {
			_, err = w.conn.Write(buf)
		} else {
			_, err = w.bw.Write(buf) // bytes already in place: bufio copies them onto themselves
		}
		if err != nil {
			return err
		}
		w.left -= read
		off += int64(read)
		n -= read
	}
	return nil
}
