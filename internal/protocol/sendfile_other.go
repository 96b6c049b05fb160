//go:build !linux

package protocol

import (
	"os"
	"syscall"
)

// sendFile is only implemented on Linux; elsewhere bodies are copied.
func sendFile(syscall.RawConn, *os.File, int64, int) (int, error) {
	return 0, errSendfileUnsupported
}
