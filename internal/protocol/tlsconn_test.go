package protocol

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/certs/certstest"
	"github.com/strata-stream/strata/internal/wait"
)

// socketCounts counts the socket calls made on the connections a
// socketListener accepted: what lies under crypto/tls on the server side.
type socketCounts struct {
	writes, written atomic.Int64
	writing         atomic.Int64 // writes in progress
	reads, read     atomic.Int64
	// records and recordBytes count the TLS records written and the bytes
	// after their headers (ciphertext and tag).
	records, recordBytes atomic.Int64
}

// recordScanner finds the TLS records in what one connection writes.
type recordScanner struct {
	header [5]byte // type, version, length (RFC 8446 5.1)
	have   int     // header bytes seen of the next record
	left   int     // bytes of the current record still to come
}

func (r *recordScanner) scan(p []byte, counts *socketCounts) {
	for len(p) > 0 {
		if r.left > 0 {
			k := min(r.left, len(p))
			r.left -= k
			p = p[k:]
			continue
		}
		k := copy(r.header[r.have:], p)
		r.have += k
		p = p[k:]
		if r.have == len(r.header) {
			r.left, r.have = int(binary.BigEndian.Uint16(r.header[3:])), 0
			counts.records.Add(1)
			counts.recordBytes.Add(int64(r.left))
		}
	}
}

type socketListener struct {
	net.Listener
	counts *socketCounts
}

func (l socketListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &socketConn{Conn: nc, counts: l.counts}, nil
}

type socketConn struct {
	net.Conn
	counts *socketCounts
	scan   recordScanner // writes are serial: the tlsSocket above holds its lock
}

func (c *socketConn) Write(p []byte) (int, error) {
	c.counts.writing.Add(1)
	defer c.counts.writing.Add(-1)
	n, err := c.Conn.Write(p)
	c.counts.writes.Add(1)
	c.counts.written.Add(int64(n))
	c.scan.scan(p[:n], c.counts)
	return n, err
}

func (c *socketConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.counts.reads.Add(1)
	c.counts.read.Add(int64(n))
	return n, err
}

// tlsConfigs makes a server and a client TLS configuration from a test CA.
func tlsConfigs(tb testing.TB) (server, client *tls.Config) {
	tb.Helper()
	dir := tb.TempDir()
	ca := certstest.NewCA(tb, dir, "test")
	node := ca.Issue(tb, "node", "broker")
	srv, err := certs.New(certs.Files{CertFile: node.CertFile, KeyFile: node.KeyFile}, 0, nil)
	if err != nil {
		tb.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	return srv.ServerConfig(), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
}

// tlsBenchServer serves h over TLS on a loopback listener whose socket calls
// are counted, until the benchmark ends.
func tlsBenchServer(tb testing.TB, h Handler) (addr string, counts *socketCounts, client *tls.Config) {
	tb.Helper()
	srvCfg, cliCfg := tlsConfigs(tb)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	counts = &socketCounts{}
	s := &Server{Handler: h, Versions: testVersions, Logger: slog.New(slog.DiscardHandler)}
	served := make(chan error, 1)
	go func() { served <- s.Serve(NewTLSListener(socketListener{ln, counts}, srvCfg)) }()
	tb.Cleanup(func() {
		_ = s.Close()
		<-served
	})
	return ln.Addr().String(), counts, cliCfg
}

// tlsClient dials addr over TLS and completes the handshake.
func tlsClient(tb testing.TB, addr string, cfg *tls.Config) *tls.Conn {
	tb.Helper()
	nc, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	if err := nc.SetDeadline(time.Now().Add(time.Hour)); err != nil {
		tb.Fatal(err)
	}
	return nc
}

// readResponse reads one response frame into buf (grown as needed).
func readResponse(tb testing.TB, r io.Reader, buf []byte) []byte {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		tb.Fatal(err)
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		tb.Fatal(err)
	}
	return buf
}

// fetchBodyHandler answers every request with a Body: a small prefix, n bytes
// of f from offset 0 (SendFile), a small suffix; a Fetch response of one
// partition's records as the fetch path writes it.
func fetchBodyHandler(f *os.File, n int) Handler {
	return HandlerFunc(func(context.Context, *ConnInfo, *Request) Response {
		return Response{Body: &fileBody{prefix: make([]byte, 90), suffix: make([]byte, 10), f: f, n: n}}
	})
}

// BenchmarkTLSFetch serves a 1 MiB Fetch body over a TLS loopback connection
// to a client with crypto/tls alone and to one as TLSDialer makes them (its
// reads ahead), and reports the server's socket writes and the client's socket
// reads per MiB; allocs/op count both ends. ns/op depends on the machine's
// load. The client's reads, one run at 2000x: 32.4 per MiB with crypto/tls
// alone, 6.6 with the read-ahead.
//
//	go test -run '^$' -bench 'BenchmarkTLS(Fetch|Produce)' -benchtime 200x ./internal/protocol/
//
// Before NewTLSListener (tls.NewListener, the 32 KiB write buffer) and after,
// one run each on a loaded 2-core machine (ns/op not comparable):
//
//	Fetch     65.0 writes/MiB  44 allocs/op    ->   5.0 writes/MiB  42 allocs/op
//	Produce   33.6 reads/MiB   31,228 B/read   ->   5.9-7.3 reads/MiB   145-179 KB/read
//	          48 allocs/op                          48 allocs/op
func BenchmarkTLSFetch(b *testing.B) {
	const n = 1 << 20
	f, _ := tempFile(b, n)
	addr, counts, cliCfg := tlsBenchServer(b, fetchBodyHandler(f, n))
	for _, bc := range []struct {
		name      string
		readAhead bool // the client reads as TLSDialer's connections do
	}{{"client=crypto-tls", false}, {"client=read-ahead", true}} {
		b.Run(bc.name, func(b *testing.B) {
			raw, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			cc := &socketConn{Conn: raw, counts: &socketCounts{}}
			var under net.Conn = cc
			if bc.readAhead {
				under = &tlsSocket{Conn: cc}
			}
			cl := tls.Client(under, cliCfg)
			defer cl.Close()
			req := frameOf(kmsg.NewPtrFetchRequest(), 12, 1, nil)
			var buf []byte
			b.SetBytes(n)
			b.ReportAllocs()
			before, records, recordBytes := counts.writes.Load(), counts.records.Load(), counts.recordBytes.Load()
			for b.Loop() {
				if _, err := cl.Write(req); err != nil {
					b.Fatal(err)
				}
				buf = readResponse(b, cl, buf)
			}
			b.ReportMetric(float64(counts.writes.Load()-before)/float64(b.N), "writes/MiB")
			records, recordBytes = counts.records.Load()-records, counts.recordBytes.Load()-recordBytes
			b.ReportMetric(float64(records)/float64(b.N), "records/MiB")
			b.ReportMetric(float64(recordBytes)/float64(max(records, 1)), "B/record")
			b.ReportMetric(float64(cc.counts.reads.Load())/float64(b.N), "client-reads/MiB")
		})
	}
}

// BenchmarkTLSProduce sends a 1 MiB Produce request over a TLS loopback
// connection and reports the server's socket reads per MiB received and their
// mean size. ns/op depends on the machine's load.
func BenchmarkTLSProduce(b *testing.B) {
	addr, counts, cliCfg := tlsBenchServer(b, HandlerFunc(echoHandler))
	cl := tlsClient(b, addr, cliCfg)
	req := produceRequest(1)
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = make([]byte, 1<<20)
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p)
	frame := frameOf(req, 9, 1, nil)
	var buf []byte
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	reads, read := counts.reads.Load(), counts.read.Load()
	for b.Loop() {
		if _, err := cl.Write(frame); err != nil {
			b.Fatal(err)
		}
		buf = readResponse(b, cl, buf)
	}
	reads, read = counts.reads.Load()-reads, counts.read.Load()-read
	b.ReportMetric(float64(reads)/float64(b.N), "reads/MiB")
	b.ReportMetric(float64(read)/float64(max(reads, 1)), "B/read")
}

// scriptConn is a socket for unit tests of tlsSocket: Write records each call
// (or fails with failWrites), Read serves pending a piece at a time, as a
// socket returns what has arrived so far, then readErr.
type scriptConn struct {
	net.Conn   // nil: only Read and Write are called
	writes     []int
	wrote      []byte
	failWrites error
	shortBy    int // a write keeps this many bytes back, without an error
	pending    [][]byte
	readErr    error
	reads      int
}

func (c *scriptConn) Write(p []byte) (int, error) {
	if c.failWrites != nil {
		return 0, c.failWrites
	}
	p = p[:len(p)-min(c.shortBy, len(p))]
	c.writes = append(c.writes, len(p))
	c.wrote = append(c.wrote, p...)
	return len(p), nil
}

func (c *scriptConn) Read(p []byte) (int, error) {
	c.reads++
	if len(c.pending) == 0 {
		return 0, c.readErr
	}
	n := copy(p, c.pending[0])
	if c.pending[0] = c.pending[0][n:]; len(c.pending[0]) == 0 {
		c.pending = c.pending[1:]
	}
	return n, nil
}

func TestTLSSocketWrites(t *testing.T) {
	const record = 16384 + 22 // a full TLS 1.3 record with AES-GCM
	sc := &scriptConn{}
	s := &tlsSocket{Conn: sc}
	// Outside a batch (the handshake, alerts) every write goes straight out.
	for range 2 {
		if n, err := s.Write(make([]byte, 100)); n != 100 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if !slices.Equal(sc.writes, []int{100, 100}) {
		t.Fatalf("writes %v outside a batch, want two of 100", sc.writes)
	}
	// In a batch, records are held until tlsWriteBatch bytes, then until end.
	sc.writes, sc.wrote = nil, nil
	var want []byte
	s.begin()
	for i := range 20 {
		p := bytes.Repeat([]byte{byte(i)}, record)
		want = append(want, p...)
		if n, err := s.Write(p); n != record || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	perBatch := (tlsWriteBatch + record - 1) / record
	if !slices.Equal(sc.writes, []int{perBatch * record}) {
		t.Fatalf("writes %v before end, want one of %d records", sc.writes, perBatch)
	}
	if err := s.end(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sc.writes, []int{perBatch * record, (20 - perBatch) * record}) || !bytes.Equal(sc.wrote, want) {
		t.Fatalf("writes %v after end, bytes equal %t", sc.writes, bytes.Equal(sc.wrote, want))
	}
	if s.mu.wbuf != nil {
		t.Fatal("the write buffer is held after end")
	}
	// A failed socket write fails end, and every write after it: the TLS stream
	// is broken.
	boom := errors.New("boom")
	sc.failWrites = boom
	s.begin()
	if _, err := s.Write(make([]byte, 10)); err != nil {
		t.Fatalf("a held write failed: %v", err)
	}
	if err := s.end(); !errors.Is(err, boom) {
		t.Fatalf("end = %v, want %v", err, boom)
	}
	sc.failWrites = nil
	if _, err := s.Write(make([]byte, 10)); !errors.Is(err, boom) {
		t.Fatalf("a write after the failure = %v, want %v", err, boom)
	}
	// A socket write that comes back short without an error fails as
	// io.ErrShortWrite, in a batch and outside one, and stays failed.
	for _, batch := range []bool{true, false} {
		s := &tlsSocket{Conn: &scriptConn{shortBy: 1}}
		var err error
		if batch {
			s.begin()
			if _, err := s.Write(make([]byte, record)); err != nil {
				t.Fatalf("a held write failed: %v", err)
			}
			err = s.end()
		} else {
			_, err = s.Write(make([]byte, record))
		}
		if !errors.Is(err, io.ErrShortWrite) {
			t.Fatalf("batch %t: a short socket write gave %v, want %v", batch, err, io.ErrShortWrite)
		}
		s.Conn.(*scriptConn).shortBy = 0
		if _, err := s.Write(make([]byte, 10)); !errors.Is(err, io.ErrShortWrite) {
			t.Fatalf("batch %t: a write after a short one = %v, want %v", batch, err, io.ErrShortWrite)
		}
	}
	// release drops what is held; later writes fail.
	s = &tlsSocket{Conn: &scriptConn{}}
	s.begin()
	if _, err := s.Write(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	s.release()
	if _, err := s.Write(make([]byte, 10)); !errors.Is(err, net.ErrClosed) || s.mu.wbuf != nil {
		t.Fatalf("write after release = %v, buffer held %t", err, s.mu.wbuf != nil)
	}
	// nil-safe for connections without a tlsSocket
	var none *tlsSocket
	none.begin()
	if err := none.end(); err != nil {
		t.Fatal(err)
	}
	none.release()
}

func TestTLSSocketReadAhead(t *testing.T) {
	const small = 17 << 10 // about what crypto/tls asks for
	data := make([]byte, 3*tlsReadAhead+1000)
	for i := range data {
		data[i] = byte(i % 251)
	}
	tests := []struct {
		name      string
		arrivals  [][]byte // what the socket has each time it is read
		wantReads int      // socket reads to get everything and see EOF
	}{
		// A request trickling in a bit at a time never takes the buffer.
		{"small pieces", [][]byte{data[:1000], data[1000:2000]}, 3},
		// Everything waiting at once: one read fills crypto/tls's buffer, then
		// read-ahead; the last read that does not fill it lets the buffer go.
		{"all waiting", [][]byte{data}, 1 + 3 + 1},
		// A large request split across arrivals: the rest of the first does not
		// fill the buffer, which is let go and taken again for the second.
		{"two arrivals", [][]byte{data[:tlsReadAhead], data[tlsReadAhead:]}, (1 + 1) + (1 + 2) + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var total int
			for _, a := range tt.arrivals {
				total += len(a)
			}
			sc := &scriptConn{readErr: io.EOF}
			for _, a := range tt.arrivals {
				sc.pending = append(sc.pending, slices.Clone(a))
			}
			s := &tlsSocket{Conn: sc}
			var got []byte
			p := make([]byte, small)
			for {
				n, err := s.Read(p)
				got = append(got, p[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, data[:total]) {
				t.Fatalf("read %d bytes, want %d (equal %t)", len(got), total, bytes.Equal(got, data[:len(got)]))
			}
			if sc.reads != tt.wantReads {
				t.Errorf("%d socket reads, want %d", sc.reads, tt.wantReads)
			}
			if s.rbuf != nil {
				t.Error("the read-ahead buffer is held after the stream ended")
			}
		})
	}
	// crypto/tls reads a handshake in small pieces: filling them takes no
	// buffer, however much is waiting.
	sc0 := &scriptConn{pending: [][]byte{make([]byte, 4000)}, readErr: io.EOF}
	s0 := &tlsSocket{Conn: sc0}
	for range 4 {
		if n, err := s0.Read(make([]byte, 1000)); n != 1000 || err != nil || s0.rbuf != nil {
			t.Fatalf("small read = %d, %v, buffer held %t", n, err, s0.rbuf != nil)
		}
	}
	// Bytes that came with an error are delivered before it.
	sc := &scriptConn{pending: [][]byte{make([]byte, small)}, readErr: errors.New("reset")}
	s := &tlsSocket{Conn: sc}
	p := make([]byte, small)
	if n, err := s.Read(p); n != small || err != nil {
		t.Fatalf("first read = %d, %v", n, err)
	}
	if n, err := s.Read(p); n != 0 || err == nil || s.rbuf != nil {
		t.Fatalf("read at the error = %d, %v, buffer held %t", n, err, s.rbuf != nil)
	}
}

// TestTLSFetchCoalescesRecordWrites: over NewTLSListener a large response
// leaves in about one socket write per tlsWriteBatch bytes instead of one per
// TLS record, the client reads it intact, and nothing is held afterwards.
func TestTLSFetchCoalescesRecordWrites(t *testing.T) {
	const n = 3 << 20
	f, data := tempFile(t, n)
	srvCfg, cliCfg := tlsConfigs(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	counts := &socketCounts{}
	ts := serveOn(t, NewTLSListener(socketListener{ln, counts}, srvCfg), fetchBodyHandler(f, n))
	cl := tlsClient(t, ts.addr, cliCfg)
	_ = cl.SetDeadline(time.Now().Add(testTimeout))
	req := frameOf(kmsg.NewPtrFetchRequest(), 11, 7, nil) // response header v0
	for round := range 3 {
		before, sent := counts.writes.Load(), counts.written.Load()
		if _, err := cl.Write(req); err != nil {
			t.Fatal(err)
		}
		resp := readResponse(t, cl, nil)
		if corr := binary.BigEndian.Uint32(resp); corr != 7 {
			t.Fatalf("correlation id %d", corr)
		}
		if body := resp[4:]; len(body) != 90+n+10 || !bytes.Equal(body[90:90+n], data) {
			t.Fatalf("round %d: body of %d bytes differs", round, len(body))
		}
		writes := counts.writes.Load() - before
		bound := (counts.written.Load()-sent)/(tlsWriteBatch-16<<10) + 1
		if writes > bound {
			t.Fatalf("round %d: %d socket writes for %d bytes, want at most %d", round, writes, counts.written.Load()-sent, bound)
		}
		t.Logf("round %d: %d socket writes for %d bytes", round, writes, counts.written.Load()-sent)
	}
	wait.For(t, "the write buffer back in its pool", func() bool {
		ts.Server.mu.Lock()
		defer ts.Server.mu.Unlock()
		for c := range ts.Server.mu.conns {
			s := tlsSocketOf(c.nc)
			if s == nil {
				t.Fatal("no tlsSocket under the connection")
			}
			s.mu.Lock()
			held := s.mu.wbuf != nil || s.mu.batching
			s.mu.Unlock()
			if held {
				return false
			}
		}
		return true
	})
}

// TestTLSLargeRequests: large requests, pipelined, arrive intact through the
// read-ahead, and small ones after them still do.
func TestTLSLargeRequests(t *testing.T) {
	srvCfg, cliCfg := tlsConfigs(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	payload := func(corr int32, size int) []byte {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(int(corr) + i%241)
		}
		return b
	}
	bad := make(chan string, 10)
	ts := serveOn(t, NewTLSListener(ln, srvCfg), HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		if p, ok := r.Msg.(*kmsg.ProduceRequest); ok {
			got := p.Topics[0].Partitions[0].Records
			if want := payload(r.CorrelationID, len(got)); !bytes.Equal(got, want) {
				bad <- fmt.Sprintf("request %d: %d bytes differ", r.CorrelationID, len(got))
			}
		}
		return echoHandler(ctx, c, r)
	}))
	cl := tlsClient(t, ts.addr, cliCfg)
	_ = cl.SetDeadline(time.Now().Add(testTimeout))
	var frames []byte
	sizes := []int{700 << 10, 1 << 20, 10, 300 << 10, 1}
	for i, size := range sizes {
		req := produceRequest(1)
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = payload(int32(i), size)
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, p)
		frames = append(frames, frameOf(req, 9, int32(i), nil)...)
	}
	go func() { _, _ = cl.Write(frames) }()
	for i := range sizes {
		resp := readResponse(t, cl, nil)
		if corr := binary.BigEndian.Uint32(resp); corr != uint32(i) {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
	}
	select {
	case msg := <-bad:
		t.Fatal(msg)
	default:
	}
}

// sendBufferListener sets the send buffer of the sockets it accepts: a small
// one stalls the server's writes soon when the client does not read.
type sendBufferListener struct {
	net.Listener
	size int
}

func (l sendBufferListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err == nil {
		err = nc.(*net.TCPConn).SetWriteBuffer(l.size)
	}
	return nc, err
}

// TestTLSCloseCutsAStalledFlush: a response held under TLS is being flushed
// to a client that does not read when the server closes. Close must not wait:
// crypto/tls's close_notify queues behind the flush and would give it up to
// 5 s before the socket is closed.
func TestTLSCloseCutsAStalledFlush(t *testing.T) {
	f, _ := tempFile(t, 200<<10) // under tlsWriteBatch: all of it leaves in the final flush
	srvCfg, cliCfg := tlsConfigs(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	counts := &socketCounts{}
	ts := serveOn(t, NewTLSListener(socketListener{sendBufferListener{ln, 4096}, counts}, srvCfg), fetchBodyHandler(f, 200<<10))
	raw, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	cl := tls.Client(raw, cliCfg)
	_ = cl.SetDeadline(time.Now().Add(testTimeout))
	if err := cl.Handshake(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Write(frameOf(kmsg.NewPtrFetchRequest(), 12, 1, nil)); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing: the server's flush blocks.
	wait.For(t, "the server's flush to block", func() bool { return counts.writing.Load() == 1 })
	start := time.Now()
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Close took %v with a flush stalled on a client that does not read", took)
	}
}

// TestTLSDialer: a connection from TLSDialer checks the dialled host's name
// when the configuration names none, reads a large response that is waiting
// in about one socket read per tlsReadAhead instead of one or two per TLS
// record, and a bad peer ends the dial with an error: a certificate it cannot
// verify, or a handshake that never comes within the timeout.
func TestTLSDialer(t *testing.T) {
	const n = 3 << 20
	f, data := tempFile(t, n)
	srvCfg, cliCfg := tlsConfigs(t)
	cliCfg.ServerName = "" // the dialled 127.0.0.1 is checked
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The socket buffers hold a whole response, so it is all waiting once
	// the server has written it: the socket reads do not depend on timing.
	responded := respondedHook(make(chan struct{}, 1))
	ts := serveOn(t, NewTLSListener(sendBufferListener{ln, 4 << 20}, srvCfg), fetchBodyHandler(f, n),
		func(s *Server) { s.Hooks = append(s.Hooks, responded) })
	ctx := t.Context()

	nc, err := TLSDialer(cliCfg, net.Dialer{Timeout: testTimeout})(ctx, "tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(testTimeout))
	s := tlsSocketOf(nc)
	if s == nil {
		t.Fatal("no tlsSocket under the dialled connection")
	}
	if err := s.Conn.(*net.TCPConn).SetReadBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	counts := &socketCounts{}
	s.Conn = &socketConn{Conn: s.Conn, counts: counts} // the handshake is done: count from here
	req := frameOf(kmsg.NewPtrFetchRequest(), 11, 7, nil)
	for round := range 3 {
		reads := counts.reads.Load()
		if _, err := nc.Write(req); err != nil {
			t.Fatal(err)
		}
		select {
		case <-responded:
		case <-time.After(testTimeout):
			t.Fatal("the server did not finish writing the response")
		}
		resp := readResponse(t, nc, nil)
		if body := resp[4:]; len(body) != 90+n+10 || !bytes.Equal(body[90:90+n], data) {
			t.Fatalf("round %d: body of %d bytes differs", round, len(body))
		}
		// crypto/tls alone reads it in about 100 calls. The first response
		// starts with small records (crypto/tls's dynamic record sizing),
		// read a few at a time before a read is large enough to read ahead.
		reads = counts.reads.Load() - reads
		if bound := int64(n/tlsReadAhead + 8); reads > bound {
			t.Fatalf("round %d: %d socket reads for %d bytes, want at most %d", round, reads, n, bound)
		}
		t.Logf("round %d: %d socket reads for %d bytes", round, reads, n)
	}

	t.Run("unknown CA", func(t *testing.T) {
		_, other := tlsConfigs(t) // another CA
		other.ServerName = ""
		if _, err := TLSDialer(other, net.Dialer{Timeout: testTimeout})(ctx, "tcp", ts.addr); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("dial with an unknown CA = %v, want a certificate error", err)
		}
	})
	t.Run("silent server", func(t *testing.T) {
		silent, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		_, err = TLSDialer(cliCfg, net.Dialer{Timeout: 100 * time.Millisecond})(ctx, "tcp", silent.Addr().String())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dial of a server that never answers = %v, want the deadline", err)
		}
	})
	t.Run("bad address", func(t *testing.T) {
		if _, err := TLSDialer(cliCfg, net.Dialer{Timeout: testTimeout})(ctx, "tcp", "no-port"); err == nil {
			t.Fatal("dial of an address without a port succeeded")
		}
	})
}

// respondedHook is told each time a response has been written.
type respondedHook chan struct{}

func (h respondedHook) OnResponse(*ConnInfo, *Request, ResponseEvent) { h <- struct{}{} }

// TestTLSFetchMatchesPlaintext: a Fetch body served over TLS (read into the
// write buffer and in tlsReadAhead chunks, sealed by crypto/tls, written in
// batches) reaches the client byte for byte as it does over plaintext
// (sendfile(2)), for ranges that end inside the write buffer, on either side
// of a chunk's length and across several chunks, to a client with crypto/tls
// alone and to one from TLSDialer (its read-ahead).
func TestTLSFetchMatchesPlaintext(t *testing.T) {
	const size = 4 << 20
	f, data := tempFile(t, size)
	type fetchCase struct {
		name   string
		prefix int // body bytes before the range, as a Fetch response's headers
		off    int64
		n      int
	}
	// The range bytes that fill the write buffer after the frame's size,
	// the correlation id (response header v0) and a 90-byte prefix.
	const inBuf = writeBufferSize - 8 - 90
	cases := []fetchCase{
		{"empty range", 90, 0, 0},
		{"inside the write buffer", 90, 5, 1000},
		{"fills the write buffer", 90, 0, inBuf},
		{"one past the write buffer", 90, 3, inBuf + 1},
		{"then less than a write buffer", 90, 3, inBuf + writeBufferSize - 1},
		{"then a write buffer", 90, 3, inBuf + writeBufferSize},
		{"then a chunk less one", 90, 17, inBuf + tlsReadAhead - 1},
		{"then a chunk", 90, 17, inBuf + tlsReadAhead},
		{"then a chunk and one", 90, 17, inBuf + tlsReadAhead + 1},
		{"many chunks, odd ends", 1234, 777, 3<<20 + 12345},
		{"to the end of the file", 90, 1, size - 1},
	}
	// The correlation id picks the case; every response is a Fetch body of
	// prefix, the range, and a suffix.
	handler := HandlerFunc(func(_ context.Context, _ *ConnInfo, r *Request) Response {
		c := cases[r.CorrelationID]
		prefix := bytes.Repeat([]byte{0xA5}, c.prefix)
		return Response{Body: &fileBody{prefix: prefix, suffix: []byte("suffix"), f: f, off: c.off, n: c.n}}
	})
	plain := startServer(t, handler) // a *net.TCPConn per connection: sendfile(2)
	srvCfg, cliCfg := tlsConfigs(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	secure := serveOn(t, NewTLSListener(ln, srvCfg), handler)

	pc, err := net.Dial("tcp", plain.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	dialled, err := TLSDialer(cliCfg, net.Dialer{Timeout: testTimeout})(t.Context(), "tcp", secure.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer dialled.Close()
	clients := []struct {
		name string
		nc   net.Conn
	}{
		{"plaintext", pc},
		{"TLS, crypto/tls", tlsClient(t, secure.addr, cliCfg)},
		{"TLS, TLSDialer", dialled},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := append(binary.BigEndian.AppendUint32(nil, uint32(i)), bytes.Repeat([]byte{0xA5}, c.prefix)...)
			want = append(append(want, data[c.off:c.off+int64(c.n)]...), "suffix"...)
			var first []byte
			for _, cl := range clients {
				_ = cl.nc.SetDeadline(time.Now().Add(testTimeout))
				if _, err := cl.nc.Write(frameOf(kmsg.NewPtrFetchRequest(), 11, int32(i), nil)); err != nil {
					t.Fatal(err)
				}
				got := readResponse(t, cl.nc, nil)
				if first == nil {
					first = got
				}
				if !bytes.Equal(got, want) || !bytes.Equal(got, first) {
					t.Fatalf("%s: %d bytes, want %d; equal to the expected bytes %t, to plaintext's %t",
						cl.name, len(got), len(want), bytes.Equal(got, want), bytes.Equal(got, first))
				}
			}
		})
	}
}

// shortWriteListener's connections write normally until after bytes have
// gone out, then one write keeps the second half of its bytes back and still
// reports no error; the writes after it go through.
type shortWriteListener struct {
	net.Listener
	after int64
}

func (l shortWriteListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &shortWriteConn{Conn: nc, after: l.after}, nil
}

type shortWriteConn struct {
	net.Conn
	after   int64
	written int64
	cut     atomic.Bool // the short write happened
}

func (c *shortWriteConn) Write(p []byte) (int, error) {
	if c.written+int64(len(p)) > c.after && c.cut.CompareAndSwap(false, true) {
		p = p[:len(p)/2]
	}
	n, err := c.Conn.Write(p)
	c.written += int64(n)
	return n, err
}

// TestTLSShortWriteClosesTheConnection: a socket write in the middle of a
// TLS Fetch response that comes back short without an error breaks the TLS
// stream; the server must close the connection with io.ErrShortWrite, not go
// on writing records the client can no longer decrypt.
func TestTLSShortWriteClosesTheConnection(t *testing.T) {
	const n = 1 << 20
	f, _ := tempFile(t, n)
	srvCfg, cliCfg := tlsConfigs(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := serveOn(t, NewTLSListener(shortWriteListener{ln, 100 << 10}, srvCfg), fetchBodyHandler(f, n))
	cl := tlsClient(t, ts.addr, cliCfg)
	_ = cl.SetDeadline(time.Now().Add(testTimeout))
	if _, err := cl.Write(frameOf(kmsg.NewPtrFetchRequest(), 11, 1, nil)); err != nil {
		t.Fatal(err)
	}
	// The client gets the response's first bytes, then the connection ends.
	got, err := io.Copy(io.Discard, cl)
	if err == nil && got >= 4+90+n+10 {
		t.Fatalf("the client read %d bytes, the whole response", got)
	}
	_ = cl.Close()
	if err := ts.hooks.closeErr(t, cl.LocalAddr().String()); !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("close error %v, want %v", err, io.ErrShortWrite)
	}
}
