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
	left int             // bytes the body may still write
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
	copied, err := io.Copy(w.bw, io.NewSectionReader(f, off, int64(n)))
	w.left -= int(copied)
	if err == nil && copied < int64(n) {
		err = fmt.Errorf("SendFile: %s has only %d of %d bytes at offset %d: %w", f.Name(), copied, n, off, io.ErrUnexpectedEOF)
	}
	return err
}
