package protocol

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/wait"
)

// fileBody writes prefix, n bytes of f at off, then suffix.
type fileBody struct {
	prefix, suffix []byte
	f              *os.File
	off            int64
	n              int
	lenAdjust      int             // added to the true length, to lie in Len
	extra          []byte          // written after suffix, beyond Len
	wait           <-chan struct{} // WriteBody waits for it first
	released       atomic.Int32
	wrote          atomic.Bool
}

func (b *fileBody) Len() int { return len(b.prefix) + b.n + len(b.suffix) + b.lenAdjust }

func (b *fileBody) WriteBody(w BodyWriter) error {
	if b.wait != nil {
		<-b.wait
	}
	b.wrote.Store(true)
	if _, err := w.Write(b.prefix); err != nil {
		return err
	}
	if err := w.SendFile(b.f, b.off, b.n); err != nil {
		return err
	}
	if _, err := w.Write(b.suffix); err != nil {
		return err
	}
	if len(b.extra) > 0 {
		_, err := w.Write(b.extra)
		return err
	}
	return nil
}

func (b *fileBody) Release() { b.released.Add(1) }

// tempFile writes size deterministic random bytes to a temp file.
func tempFile(t testing.TB, size int) (*os.File, []byte) {
	t.Helper()
	data := make([]byte, size)
	rng := rand.NewChaCha8([32]byte{1, 2, 3})
	_, _ = rng.Read(data)
	path := filepath.Join(t.TempDir(), "segment")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, data
}

// hiddenConnListener hides the *net.TCPConn behind a plain net.Conn, so bodies
// take the copy path.
type hiddenConnListener struct{ net.Listener }

func (l hiddenConnListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return struct{ net.Conn }{nc}, nil
}

// startBodyServer answers every Fetch with the Response built by respond.
func startBodyServer(t *testing.T, hide bool, respond func(ctx context.Context) Response) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if hide {
		ln = hiddenConnListener{ln}
	}
	return serveOn(t, ln, HandlerFunc(func(ctx context.Context, _ *ConnInfo, _ *Request) Response {
		return respond(ctx)
	}))
}

func TestBodySendFile(t *testing.T) {
	f, data := tempFile(t, 3<<20)
	tests := []struct {
		name    string
		hide    bool // copy fallback instead of sendfile
		version int16
	}{
		{"sendfile, response header v0", false, 11},
		{"sendfile, flexible response header", false, 12},
		{"copy fallback, response header v0", true, 11},
		{"copy fallback, flexible response header", true, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Larger than the socket buffers, so sendfile has to wait for the reader.
			body := &fileBody{prefix: []byte("head"), suffix: []byte("tail"), f: f, off: 12345, n: 5 << 19}
			ts := startBodyServer(t, tt.hide, func(context.Context) Response { return Response{Body: body} })
			c := dial(t, ts.addr)
			c.send(kmsg.NewPtrFetchRequest(), tt.version, 42)
			corr, rest := c.readFrame()
			if corr != 42 {
				t.Fatalf("correlation id %d", corr)
			}
			if tt.version >= 12 {
				if rest[0] != 0 {
					t.Fatalf("flexible response header without its tag byte")
				}
				rest = rest[1:]
			}
			want := append(append([]byte("head"), data[12345:12345+5<<19]...), "tail"...)
			if !bytes.Equal(rest, want) {
				t.Fatalf("body differs: got %d bytes, want %d", len(rest), len(want))
			}
			wait.For(t, "Release", func() bool { return body.released.Load() == 1 })
			c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 0, 43) // the stream is still in sync
			if got := body.released.Load(); got != 1 {
				t.Fatalf("Release called %d times", got)
			}
		})
	}
}

func TestBodyErrorsCloseTheConnection(t *testing.T) {
	f, data := tempFile(t, 4096)
	tests := []struct {
		name    string
		body    func() *fileBody
		respond func(b *fileBody) Response
		wantErr error
	}{
		{"wrote less than Len", func() *fileBody { return &fileBody{f: f, n: 10, lenAdjust: 5} }, nil, ErrBodyLength},
		{"wrote more than Len", func() *fileBody { return &fileBody{f: f, n: 10, extra: []byte("x")} }, nil, ErrBodyLength},
		{"SendFile more than Len", func() *fileBody { return &fileBody{f: f, n: 10, lenAdjust: -1} }, nil, ErrBodyLength},
		{"file shorter than the range", func() *fileBody { return &fileBody{f: f, off: int64(len(data) - 10), n: 100} }, nil, io.ErrUnexpectedEOF},
		{"negative Len", func() *fileBody { return &fileBody{f: f, lenAdjust: -1} }, nil, ErrBadResponse},
		{"Len beyond a frame", func() *fileBody { return &fileBody{f: f, lenAdjust: math.MaxInt32} }, nil, ErrBadResponse},
		{"both Msg and Body", func() *fileBody { return &fileBody{f: f} }, func(b *fileBody) Response {
			return Response{Body: b, Msg: kmsg.NewPtrFetchResponse()}
		}, ErrBadResponse},
		{"Body with None", func() *fileBody { return &fileBody{f: f} }, func(b *fileBody) Response {
			return Response{Body: b, None: true}
		}, ErrBadResponse},
	}
	for _, hide := range []bool{false, true} {
		for _, tt := range tests {
			name := tt.name
			if hide {
				name += " (copy)"
			}
			t.Run(name, func(t *testing.T) {
				body := tt.body()
				ts := startBodyServer(t, hide, func(context.Context) Response {
					if tt.respond != nil {
						return tt.respond(body)
					}
					return Response{Body: body}
				})
				c := dial(t, ts.addr)
				c.send(kmsg.NewPtrFetchRequest(), 12, 1)
				c.expectClosed()
				if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, tt.wantErr) {
					t.Fatalf("close error %v, want %v", err, tt.wantErr)
				}
				if got := body.released.Load(); got != 1 {
					t.Fatalf("Release called %d times", got)
				}
			})
		}
	}
}

func TestBodyReleasedWhenConnectionCloses(t *testing.T) {
	f, _ := tempFile(t, 100)
	var blocking, queued fileBody
	queuedReturned := make(chan struct{})
	var calls atomic.Int32
	ts := startBodyServer(t, false, func(ctx context.Context) Response {
		if calls.Add(1) == 1 {
			// The first body's WriteBody waits for the connection to close.
			blocking = fileBody{f: f, n: 10, wait: ctx.Done()}
			return Response{Body: &blocking}
		}
		queued = fileBody{f: f, n: 10}
		close(queuedReturned)
		return Response{Body: &queued}
	})
	c := dial(t, ts.addr)
	c.write(append(frameOf(kmsg.NewPtrFetchRequest(), 12, 1, nil), frameOf(kmsg.NewPtrFetchRequest(), 12, 2, nil)...))
	<-queuedReturned
	if err := ts.Close(); err != nil { // waits for every connection goroutine
		t.Fatal(err)
	}
	if blocking.released.Load() != 1 || queued.released.Load() != 1 {
		t.Fatalf("Release calls: blocking %d, queued %d; want 1 and 1", blocking.released.Load(), queued.released.Load())
	}
	if queued.wrote.Load() {
		t.Fatal("a body queued behind a closed connection was written")
	}
}

func TestSendFileSyscall(t *testing.T) {
	f, data := tempFile(t, 1<<20)
	if _, err := f.Seek(7, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if sendfileSocket(struct{ net.Conn }{server}) != nil {
		t.Fatal("a wrapped conn offered a raw socket")
	}
	sock := sendfileSocket(server)
	if sock == nil {
		t.Fatal("no raw socket for a TCP conn")
	}
	const off, n = 1000, 900_000
	type result struct {
		sent int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		sent, err := sendFile(sock, f, off, n)
		done <- result{sent, err}
	}()
	got := make([]byte, n)
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.sent != n {
		t.Fatalf("sendFile = %d, %v", res.sent, res.err)
	}
	if !bytes.Equal(got, data[off:off+n]) {
		t.Fatal("bytes differ")
	}
	if pos, err := f.Seek(0, io.SeekCurrent); err != nil || pos != 7 {
		t.Fatalf("file position %d (%v), want 7: sendfile moved it", pos, err)
	}
}

// plainWriter is a connection that can take no sendfile(2) and no ReadFrom
// (a TLS connection, for the body writer); it keeps what it is given.
type plainWriter struct {
	got    []byte
	writes int
	sizes  []int
}

func (w *plainWriter) Write(p []byte) (int, error) {
	w.got = append(w.got, p...)
	w.writes++
	w.sizes = append(w.sizes, len(p))
	return len(p), nil
}

// TestSendFileCopyReadsOnce: without a socket for sendfile(2) (TLS), a file
// range is read straight into the buffer it is written from: its start into the
// connection's write buffer after the bytes before it, the rest of a large
// range in chunks of tlsReadAhead handed to the connection whole. No buffer of
// its own beyond the pooled chunk, no copy besides that read.
func TestSendFileCopyReadsOnce(t *testing.T) {
	f, data := tempFile(t, 1<<20)
	const off, n = 4321, 900_000
	w := &plainWriter{}
	bw := &bodyWriter{bw: bufio.NewWriterSize(w, writeBufferSize), conn: w, left: n + 4 + 4}
	if _, err := bw.Write([]byte("head")); err != nil {
		t.Fatal(err)
	}
	if err := bw.SendFile(f, off, n); err != nil {
		t.Fatal(err)
	}
	if _, err := bw.Write([]byte("tail")); err != nil {
		t.Fatal(err)
	}
	if err := bw.bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.got, append(append([]byte("head"), data[off:off+n]...), "tail"...)) {
		t.Fatal("bytes differ")
	}
	// The write buffer with "head" and the range's first bytes, three full
	// chunks, then the 80,804 bytes left in one (over a buffer's length), then
	// "tail".
	if want := []int{writeBufferSize, tlsReadAhead, tlsReadAhead, tlsReadAhead, n - (writeBufferSize - 4) - 3*tlsReadAhead, 4}; !slices.Equal(w.sizes, want) {
		t.Fatalf("writes to the connection of %v bytes, want %v", w.sizes, want)
	}

	// A small range goes out with what surrounds it.
	w = &plainWriter{}
	bw = &bodyWriter{bw: bufio.NewWriterSize(w, writeBufferSize), conn: w, left: 1000 + 8}
	for _, step := range []func() error{
		func() error { _, err := bw.Write([]byte("head")); return err },
		func() error { return bw.SendFile(f, off, 1000) },
		func() error { _, err := bw.Write([]byte("tail")); return err },
		bw.bw.Flush,
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(w.got, append(append([]byte("head"), data[off:off+1000]...), "tail"...)) || w.writes != 1 {
		t.Fatalf("a small range: %d writes (want 1), bytes equal %t", w.writes, bytes.Equal(w.got[4:1004], data[off:off+1000]))
	}

	sink := &plainWriter{}
	allocs := testing.AllocsPerRun(20, func() {
		sink.got, sink.sizes = sink.got[:0], sink.sizes[:0]
		bw := bodyWriter{bw: bufio.NewWriterSize(sink, writeBufferSize), conn: sink, left: n}
		if err := bw.SendFile(f, off, n); err != nil {
			t.Fatal(err)
		}
	})
	// The bufio.Writer of each run and its buffer; the chunk is pooled (the race
	// detector makes the pool drop some, and each is made again).
	limit := 2.0
	if raceEnabled {
		limit = 3
	}
	if allocs > limit {
		t.Fatalf("SendFile without sendfile(2) made %.0f allocations: it copies through a buffer of its own", allocs)
	}
}
