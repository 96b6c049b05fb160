package protocol

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxSendfileChunk bounds one sendfile(2) call (Linux stops near 2 GiB anyway).
const maxSendfileChunk = 1 << 30

// sendFile sends n bytes of f from off to sock with sendfile(2), waiting in the
// runtime poller while the socket buffer is full (write deadlines apply). The
// kernel advances only the local offset, never f's file position. It returns the
// bytes sent; errSendfileUnsupported comes only with zero bytes sent.
func sendFile(sock syscall.RawConn, f *os.File, off int64, n int) (int, error) {
	frc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var sent int
	var sendErr error
	ctlErr := frc.Control(func(infd uintptr) {
		writeErr := sock.Write(func(outfd uintptr) bool {
			for sent < n {
				m, err := unix.Sendfile(int(outfd), int(infd), &off, min(n-sent, maxSendfileChunk))
				switch {
				case errors.Is(err, unix.EAGAIN):
					return false // wait until the socket is writable
				case errors.Is(err, unix.EINTR):
					continue
				case err != nil:
					if sent == 0 && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP)) {
						sendErr = errSendfileUnsupported
					} else {
						sendErr = os.NewSyscallError("sendfile", err)
					}
					return true
				case m == 0:
					sendErr = fmt.Errorf("SendFile: %s ended at offset %d with %d of %d bytes sent: %w", f.Name(), off, sent, n, io.ErrUnexpectedEOF)
					return true
				}
				sent += m
			}
			return true
		})
		if sendErr == nil {
			sendErr = writeErr
		}
	})
	if sendErr == nil {
		sendErr = ctlErr
	}
	return sent, sendErr
}
