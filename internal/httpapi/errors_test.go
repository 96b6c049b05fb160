package httpapi

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
)

// TestFromErrNetwork: the connection errors of a request the API sends to a
// broker itself (a share poll's ShareFetch to a stalled or killed leader) are
// answered 504 or 503, never 500 (found by the chaos suite's share workload).
func TestFromErrNetwork(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{timeout, http.StatusGatewayTimeout, "REQUEST_TIMED_OUT"},
		{fmt.Errorf("share fetch: %w", timeout), http.StatusGatewayTimeout, "REQUEST_TIMED_OUT"},
		{refused, http.StatusServiceUnavailable, codeBrokerUnreachable},
		{errors.New("something else"), http.StatusInternalServerError, codeInternal},
	} {
		ae := fromErr(tc.err)
		if ae.status != tc.status || ae.code != tc.code {
			t.Errorf("fromErr(%v) = %d %s, want %d %s", tc.err, ae.status, ae.code, tc.status, tc.code)
		}
	}
}
