package server

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
)

// TestWriteDeadline: an answer whose handler waits longer than the write
// deadline before it writes, flushed part-way, reaches a reading client whole,
// twice on one kept-alive connection (the second's 100 Continue not cut by the
// first's deadline); a client that does not read has its answer's write fail
// soon after the deadline.
func TestWriteDeadline(t *testing.T) {
	t.Parallel()
	const d = 500 * time.Millisecond
	body := bytes.Repeat([]byte("w"), 1<<20)
	writeErr := make(chan error, 1)
	srv := httptest.NewServer(writeDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stalled" {
			var err error
			for i := 0; i < 64 && err == nil; i++ { // 64 MiB: more than any socket buffers
				_, err = w.Write(body)
			}
			writeErr <- err
			return
		}
		<-time.After(2 * d)                           // a long poll's wait
		if _, err := io.ReadAll(r.Body); err != nil { // writes 100 Continue
			t.Errorf("request body: %v", err)
		}
		w.Write(body[:len(body)/2])
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
		w.Write(body[len(body)/2:])
	}), d))
	t.Cleanup(srv.Close)

	for i, wantReused := range []bool{false, true} {
		var reused bool
		trace := &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { reused = c.Reused }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "POST", srv.URL+"/wait", strings.NewReader("{}"))
		req.Header.Set("Expect", "100-continue")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("answer %d: %d of %d bytes, %v", i, len(got), len(body), err)
		}
		if reused != wantReused {
			t.Fatalf("answer %d: connection reused %v, want %v", i, reused, wantReused)
		}
	}

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /stalled HTTP/1.1\r\nHost: test\r\n\r\n")
	select {
	case err := <-writeErr:
		if err == nil {
			t.Fatal("the answer to a client that does not read was written")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the answer to a client that does not read is still being written")
	}
}
