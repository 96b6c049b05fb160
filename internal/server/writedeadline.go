package server

import (
	"net/http"
	"time"
)

// writeDeadline gives each HTTP answer d to be written (--http-write-timeout).
// A client that stops reading without closing its connection would otherwise
// hold the handler, its goroutine and buffers for ever, and a poll's handler
// holds its consumer until the answer is written. When d passes, the write
// fails and the connection is closed; a poll then counts as undelivered.
//
// The clock starts at the handler's first write (or its return, when it wrote
// nothing), not with the request as http.Server.WriteTimeout's does, so a long
// poll's wait does not count. net/http clears the deadline once an answer is
// done, so on a kept-alive connection the next request starts without one.
// d <= 0: no bound.
func writeDeadline(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
		defer dw.arm()
		h.ServeHTTP(dw, r)
	})
}

// deadlineWriter sets the connection's write deadline on the answer's first
// write or flush.
type deadlineWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	d     time.Duration
	armed bool
}

func (w *deadlineWriter) arm() {
	if !w.armed {
		w.armed = true
		w.rc.SetWriteDeadline(time.Now().Add(w.d))
	}
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(b)
}

// FlushError is what http.ResponseController.Flush calls: a flush writes too.
func (w *deadlineWriter) FlushError() error {
	w.arm()
	return w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
