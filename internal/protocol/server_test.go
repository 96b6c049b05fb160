package protocol

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/wait"
)

const testTimeout = 10 * time.Second

// recorder is a Hook that records connection closes and counts requests read.
type recorder struct {
	read   atomic.Int64
	mu     sync.Mutex
	opened []*ConnInfo
	closed map[string]error // by client address
}

func (h *recorder) OnConnOpen(c *ConnInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.opened = append(h.opened, c)
}

func (h *recorder) OnConnClose(c *ConnInfo, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed == nil {
		h.closed = make(map[string]error)
	}
	h.closed[c.RemoteAddr.String()] = err
}

func (h *recorder) OnRequest(*ConnInfo, *Request) { h.read.Add(1) }

// closeErr waits until the connection from client address addr is reported closed.
func (h *recorder) closeErr(t *testing.T, addr string) error {
	t.Helper()
	var err error
	wait.For(t, "close of "+addr, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		var ok bool
		err, ok = h.closed[addr]
		return ok
	})
	return err
}

type testServer struct {
	*Server
	addr  string
	hooks *recorder
	logs  *wait.Buffer
	serve chan error // Serve's result
}

// startServer serves h on 127.0.0.1:0; the server is closed at cleanup. opts
// adjust the Server before Serve.
func startServer(t *testing.T, h Handler, opts ...func(*Server)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, ln, h, opts...)
}

func serveOn(t *testing.T, ln net.Listener, h Handler, opts ...func(*Server)) *testServer {
	t.Helper()
	ts := &testServer{addr: ln.Addr().String(), hooks: &recorder{}, logs: &wait.Buffer{}, serve: make(chan error, 1)}
	ts.Server = &Server{
		Handler:  h,
		Versions: testVersions,
		Logger:   slog.New(slog.NewTextHandler(ts.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Hooks:    []Hook{ts.hooks},
	}
	for _, o := range opts {
		o(ts.Server)
	}
	go func() { ts.serve <- ts.Serve(ln) }()
	t.Cleanup(func() {
		if err := ts.Close(); err != nil {
			t.Error(err)
		}
		if err := <-ts.serve; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return ts
}

// echoHandler answers Metadata with the requested topics and a broker at the
// connection's local address, Produce with one topic named after the correlation
// id (nothing at all for acks=0), and panics on a Metadata topic named "boom".
func echoHandler(_ context.Context, c *ConnInfo, r *Request) Response {
	switch m := r.Msg.(type) {
	case *kmsg.MetadataRequest:
		resp := m.ResponseKind().(*kmsg.MetadataResponse)
		host, port, _ := net.SplitHostPort(c.LocalAddr.String())
		p, _ := strconv.Atoi(port)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 1, host, int32(p)
		resp.Brokers = append(resp.Brokers, b)
		for _, rt := range m.Topics {
			if rt.Topic != nil && *rt.Topic == "boom" {
				panic("boom topic")
			}
			st := kmsg.NewMetadataResponseTopic()
			st.Topic = rt.Topic
			resp.Topics = append(resp.Topics, st)
		}
		return Response{Msg: resp}
	case *kmsg.ProduceRequest:
		if m.Acks == 0 {
			return Response{None: true}
		}
		resp := m.ResponseKind().(*kmsg.ProduceResponse)
		st := kmsg.NewProduceResponseTopic()
		st.Topic = strconv.Itoa(int(r.CorrelationID))
		resp.Topics = append(resp.Topics, st)
		return Response{Msg: resp}
	}
	return Response{}
}

// rawClient speaks the wire protocol by hand.
type rawClient struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if err := nc.SetDeadline(time.Now().Add(testTimeout)); err != nil {
		t.Fatal(err)
	}
	return &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawClient) addr() string { return c.nc.LocalAddr().String() }

func (c *rawClient) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawClient) send(req kmsg.Request, version int16, corr int32) {
	c.t.Helper()
	c.write(frameOf(req, version, corr, kmsg.StringPtr("raw")))
}

// readFrame reads one response frame and returns its correlation id and the rest.
func (c *rawClient) readFrame() (int32, []byte) {
	c.t.Helper()
	frame := c.readSized("response")
	return int32(binary.BigEndian.Uint32(frame)), frame[4:]
}

// readSized reads an int32 size and that many bytes (a response frame, or a raw
// SASL token), what naming it in failures.
func (c *rawClient) readSized(what string) []byte {
	c.t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		c.t.Fatalf("reading %s size: %v", what, err)
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.br, b); err != nil {
		c.t.Fatalf("reading %s: %v", what, err)
	}
	return b
}

// read reads the response to req (at version) and checks its correlation id.
func (c *rawClient) read(req kmsg.Request, version int16, corr int32) kmsg.Response {
	c.t.Helper()
	gotCorr, rest := c.readFrame()
	if gotCorr != corr {
		c.t.Fatalf("correlation id %d, want %d", gotCorr, corr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(version)
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		if len(rest) == 0 || rest[0] != 0 {
			c.t.Fatalf("flexible response without an empty tag section: % x", rest[:min(len(rest), 8)])
		}
		rest = rest[1:]
	}
	if err := resp.ReadFrom(rest); err != nil {
		c.t.Fatalf("decoding %s v%d response: %v", kmsg.NameForKey(resp.Key()), version, err)
	}
	return resp
}

func (c *rawClient) roundTrip(req kmsg.Request, version int16, corr int32) kmsg.Response {
	c.t.Helper()
	c.send(req, version, corr)
	return c.read(req, version, corr)
}

// expectClosed reads until the server closes the connection.
func (c *rawClient) expectClosed() {
	c.t.Helper()
	_, err := io.Copy(io.Discard, c.br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open: %v", err)
	}
}

// checkServing checks the server still answers a fresh connection.
func checkServing(t *testing.T, addr string) {
	t.Helper()
	resp := dial(t, addr).roundTrip(kmsg.NewPtrApiVersionsRequest(), 0, 77).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions on a fresh connection: %+v", resp)
	}
}

func TestKgoClient(t *testing.T) {
	var mu sync.Mutex
	connsSeen := map[uint64]bool{}
	var software string
	ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		mu.Lock()
		connsSeen[c.ID] = true
		name, version := c.ClientSoftware()
		software = name + " " + version
		mu.Unlock()
		return echoHandler(ctx, c, r)
	}))
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.ClientID("strata-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	resp, err := cl.Request(ctx, metadataRequest("first"))
	if err != nil {
		t.Fatal(err)
	}
	if topics := resp.(*kmsg.MetadataResponse).Topics; len(topics) != 1 || *topics[0].Topic != "first" {
		t.Fatalf("metadata topics %+v", topics)
	}
	mu.Lock()
	if len(software) < 4 || software[:4] != "kgo " {
		t.Errorf("client software %q, want kgo and its version (ApiVersions v3+ after the KIP-511 retry)", software)
	}
	mu.Unlock()

	// Concurrent requests through one broker connection: kgo pipelines them and
	// fails on any correlation id out of order.
	seed := cl.SeedBrokers()[0]
	const n = 32
	errs := make(chan error, n)
	for i := range n {
		go func() {
			topic := fmt.Sprintf("topic-%d", i)
			resp, err := seed.Request(ctx, metadataRequest(topic))
			if err == nil {
				if topics := resp.(*kmsg.MetadataResponse).Topics; len(topics) != 1 || *topics[0].Topic != topic {
					err = fmt.Errorf("asked for %s, got %+v", topic, topics)
				}
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(connsSeen) != 1 {
		t.Errorf("requests came over %d connections, want 1", len(connsSeen))
	}
}

func TestApiVersions(t *testing.T) {
	ts := startServer(t, HandlerFunc(echoHandler))
	reg := mustRegistry(t)
	c := dial(t, ts.addr)
	for v := int16(0); v <= apiVersionsMax; v++ {
		req := &kmsg.ApiVersionsRequest{ClientSoftwareName: "strata-test", ClientSoftwareVersion: "0.1.0", NodeID: -1}
		corr := int32(100 + v)
		c.send(req, v, corr)
		_, body := c.readFrame() // also checks the exact bytes: response header v0, no tag byte
		if wantBody := fullApiVersions(reg, v); !bytes.Equal(body, wantBody) {
			t.Errorf("v%d body\n got % x\nwant % x", v, body, wantBody)
		}
	}

	// Produce is listed from v0 though v0-v2 are refused, as Kafka 4.4 lists it.
	if produce := reg.apiKeys[0]; produce.ApiKey != 0 || produce.MinVersion != 0 {
		t.Errorf("Produce listed as %+v, want from v0", produce)
	}

	// KIP-511: a version above 5 is not parsed and gets a v0 error response
	// carrying the ApiVersions range.
	for _, v := range []int16{6, 300} {
		c.write(rawFrame(apiVersionsKey, v, 9, []byte{0xFF, 0xFF, 0x01, 0x02, 0x03}))
		resp := c.read(kmsg.NewPtrApiVersionsRequest(), 0, 9).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 ||
			resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != 5 {
			t.Errorf("ApiVersions v%d: got %+v", v, resp)
		}
	}

	// v3+ checks the client software fields.
	resp := c.roundTrip(&kmsg.ApiVersionsRequest{ClientSoftwareName: "bad name", ClientSoftwareVersion: "1"}, 3, 5).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("invalid software name: error %d, want %d", resp.ErrorCode, kerr.InvalidRequest.Code)
	}
	ts.hooks.mu.Lock()
	info := ts.hooks.opened[0]
	ts.hooks.mu.Unlock()
	if name, version := info.ClientSoftware(); name != "strata-test" || version != "0.1.0" || info.ClientID() != "raw" {
		t.Errorf("ConnInfo software %q %q client id %q", name, version, info.ClientID())
	}
}

// TestApiVersionsNegativeVersion: Kafka accepts an ApiVersions request at any
// version (ApiKeys.isVersionEnabled is true for API_VERSIONS whatever the
// version) and answers one it does not support, below its range as above,
// with a v0 UNSUPPORTED_VERSION response listing the ApiVersions range
// (RequestContext.isUnsupportedApiVersionsRequest: !isVersionSupported). The
// body is not parsed and the connection stays open.
func TestApiVersionsNegativeVersion(t *testing.T) {
	ts := startServer(t, HandlerFunc(echoHandler))
	c := dial(t, ts.addr)
	clientID := []byte{0, 3, 'r', 'a', 'w'}
	for _, v := range []int16{-1, -32768} {
		c.write(rawFrame(apiVersionsKey, v, 9, clientID, []byte{0xFF, 0x01}))
		resp := c.read(kmsg.NewPtrApiVersionsRequest(), 0, 9).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != apiVersionsKey ||
			resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != apiVersionsMax {
			t.Fatalf("ApiVersions v%d: got %+v, want a v0 UNSUPPORTED_VERSION answer", v, resp)
		}
	}
	c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 0, 10) // still open
}

func TestBadClientsCloseOnlyTheirConnection(t *testing.T) {
	const maxBytes = 4096
	ts := startServer(t, HandlerFunc(echoHandler), func(s *Server) { s.MaxRequestBytes = maxBytes })
	sized := func(size int32, body ...byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(size)), body...)
	}
	meta := frameOf(metadataRequest("a", "b"), 12, 1, nil)
	shortened := append([]byte(nil), meta[:len(meta)-3]...)
	binary.BigEndian.PutUint32(shortened, uint32(len(shortened)-4))
	tests := []struct {
		name       string
		send       []byte
		closeWrite bool // half-close after sending
		wantErr    error
	}{
		{"oversized frame", sized(maxBytes + 1), false, ErrFrameTooLarge},
		{"negative size", sized(-7), false, ErrFrameSize},
		{"zero size", sized(0), false, ErrFrameSize},
		{"http garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), false, ErrFrameTooLarge},
		{"garbage too short for a header", sized(6, 1, 2, 3, 4, 5, 6), false, ErrTruncatedHeader},
		{"truncated frame then close", sized(100, 0, 3, 0, 1), true, ErrTruncatedFrame},
		{"truncated size then close", []byte{0, 0}, true, ErrTruncatedFrame},
		{"unknown API key", rawFrame(1000, 0, 1, []byte{0xFF, 0xFF}), false, ErrUnknownAPIKey},
		{"unregistered API key", frameOf(kmsg.NewPtrListGroupsRequest(), 1, 1, nil), false, ErrUnknownAPIKey},
		{"unsupported version", rawFrame(3, 99, 1, []byte{0xFF, 0xFF}), false, ErrUnsupportedVersion},
		{"listed but refused version", frameOf(kmsg.NewPtrProduceRequest(), 2, 1, nil), false, ErrUnsupportedVersion},
		{"undecodable body", shortened, false, ErrMalformedRequest},
		{"handler returns an empty Response", frameOf(kmsg.NewPtrFetchRequest(), 12, 1, nil), false, ErrBadResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, ts.addr)
			c.write(tt.send)
			if tt.closeWrite {
				if err := c.nc.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
			}
			c.expectClosed()
			if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, tt.wantErr) {
				t.Fatalf("close error %v, want %v", err, tt.wantErr)
			}
			if logs := ts.logs.String(); !strings.Contains(logs, "conn.remote="+c.addr()) {
				t.Errorf("the close was not logged with the remote address %s:\n%s", c.addr(), logs)
			}
			checkServing(t, ts.addr)
		})
	}
	if logs := ts.logs.String(); !strings.Contains(logs, `level=WARN msg="protocol: closing connection"`) {
		t.Errorf("no warning logged:\n%s", logs)
	}
}

func TestCleanClientCloseIsNotAnError(t *testing.T) {
	ts := startServer(t, HandlerFunc(echoHandler))
	c := dial(t, ts.addr)
	c.roundTrip(metadataRequest("x"), 12, 1)
	c.nc.Close()
	if err := ts.hooks.closeErr(t, c.addr()); err != nil {
		t.Fatalf("close error %v, want nil", err)
	}
}

// produceRequest builds a Produce request with the given acks.
func produceRequest(acks int16) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = acks
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	req.Topics = append(req.Topics, rt)
	return req
}

// readsReached is a RequestHook that closes ch once n requests were read.
type readsReached struct {
	n     int64
	count atomic.Int64
	ch    chan struct{}
}

func (h *readsReached) OnRequest(*ConnInfo, *Request) {
	if h.count.Add(1) == h.n {
		close(h.ch)
	}
}

func TestPipelinedOrderWithNoneResponses(t *testing.T) {
	const n = 20
	allRead := &readsReached{n: n, ch: make(chan struct{})}
	var first atomic.Bool
	ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		if first.CompareAndSwap(false, true) {
			// Hold the first request until the reader has read every other one,
			// so all of them queue up behind it.
			select {
			case <-allRead.ch:
			case <-ctx.Done():
			}
		}
		return echoHandler(ctx, c, r)
	}), func(s *Server) {
		s.MaxInFlight = n
		s.Hooks = append(s.Hooks, allRead)
	})
	c := dial(t, ts.addr)
	var batch []byte
	for i := range int32(n) {
		acks := int16(-1)
		if i%2 == 1 {
			acks = 0 // no response at all
		}
		batch = append(batch, frameOf(produceRequest(acks), 9, i, nil)...)
	}
	c.write(batch) // pipelined: all requests in one write
	for i := int32(0); i < n; i += 2 {
		resp := c.read(produceRequest(-1), 9, i).(*kmsg.ProduceResponse)
		if got := resp.Topics[0].Topic; got != strconv.Itoa(int(i)) {
			t.Fatalf("response %d carries topic %s", i, got)
		}
	}
	// The next response must answer the next request, not a skipped acks=0 one.
	c.send(metadataRequest("after"), 12, 1000)
	c.read(metadataRequest(), 12, 1000)
}

// TestRequestQueued: Request.Queued tells a handler whether the client's next
// request is read already and waits behind the one it serves (a pipelining
// producer, whose appends may then share an fsync), and not when none is.
func TestRequestQueued(t *testing.T) {
	queued := make(chan bool, 2)
	ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		if r.CorrelationID == 0 {
			// Sent in one write with the next one: the reader queues that one
			// while this one is served.
			queued <- wait.Until(time.Now().Add(testTimeout), r.Queued)
		} else {
			queued <- r.Queued()
		}
		return echoHandler(ctx, c, r)
	}))
	c := dial(t, ts.addr)
	c.write(append(frameOf(produceRequest(-1), 9, 0, nil), frameOf(produceRequest(-1), 9, 1, nil)...))
	for i := range int32(2) {
		c.read(produceRequest(-1), 9, i)
	}
	if first, second := <-queued, <-queued; !first || second {
		t.Fatalf("Queued: %t with a request read behind it, %t with none; want true, false", first, second)
	}
}

func TestBackpressureBoundsReadAhead(t *testing.T) {
	const maxInFlight, n = 2, 10
	gate := make(chan struct{})
	ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return echoHandler(ctx, c, r)
	}), func(s *Server) { s.MaxInFlight = maxInFlight })
	c := dial(t, ts.addr)
	var batch []byte
	for i := range int32(n) {
		batch = append(batch, frameOf(produceRequest(-1), 9, i, nil)...)
	}
	c.write(batch)
	// One request in Handle, maxInFlight queued, one decoded and waiting to be
	// queued: the reader then stops reading.
	const bound = maxInFlight + 2
	wait.For(t, "the reader to fill the queue", func() bool { return ts.hooks.read.Load() == bound })
	stay := time.NewTimer(50 * time.Millisecond) // a window for a wrong read-ahead to show
	<-stay.C
	if got := ts.hooks.read.Load(); got != bound {
		t.Fatalf("read %d requests ahead, want %d", got, bound)
	}
	close(gate)
	for i := range int32(n) {
		c.read(produceRequest(-1), 9, i)
	}
}

func TestHandlerPanicClosesOnlyThatConnection(t *testing.T) {
	ts := startServer(t, HandlerFunc(echoHandler))
	good := dial(t, ts.addr)
	good.roundTrip(metadataRequest("ok"), 12, 1)
	bad := dial(t, ts.addr)
	bad.send(metadataRequest("boom"), 12, 1)
	bad.expectClosed()
	if err := ts.hooks.closeErr(t, bad.addr()); !errors.Is(err, ErrPanic) {
		t.Fatalf("close error %v, want ErrPanic", err)
	}
	good.roundTrip(metadataRequest("still"), 12, 2)
	logs := ts.logs.String()
	for _, want := range []string{"level=ERROR", "boom topic", "goroutine", "echoHandler"} {
		if !strings.Contains(logs, want) {
			t.Errorf("panic log lacks %q:\n%s", want, logs)
		}
	}
}

// flakyListener fails its first accepts with errs, then accepts normally.
type flakyListener struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

func TestAcceptBackoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept", syscall.EMFILE)}
	ts := serveOn(t, &flakyListener{Listener: ln, errs: []error{emfile, emfile, emfile}}, HandlerFunc(echoHandler))
	checkServing(t, ts.addr)
	if n := strings.Count(ts.logs.String(), "accept failed"); n != 3 {
		t.Errorf("logged %d accept failures, want 3", n)
	}
}

func TestServeReturnsPermanentAcceptError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	broken := errors.New("listener broke")
	s := &Server{Handler: HandlerFunc(echoHandler), Versions: testVersions}
	if err := s.Serve(&flakyListener{Listener: ln, errs: []error{broken}}); !errors.Is(err, broken) {
		t.Fatalf("Serve = %v, want %v", err, broken)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("listener still open after Serve returned")
	}
}

func TestServeRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		s    *Server
		want error
	}{
		{"nil handler", &Server{Versions: testVersions}, ErrNoHandler},
		{"invalid versions", &Server{Handler: HandlerFunc(echoHandler), Versions: []VersionRange{{Key: 3, Min: 4, Max: 1}}}, ErrInvalidVersions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.s.Serve(ln); !errors.Is(err, tt.want) {
				t.Fatalf("Serve = %v, want %v", err, tt.want)
			}
			if err := tt.s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestServeAfterClose(t *testing.T) {
	s := &Server{Handler: HandlerFunc(echoHandler), Versions: testVersions}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(ln); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestShutdownFinishesInFlightRequests(t *testing.T) {
	entered, gate := make(chan struct{}), make(chan struct{})
	var cancelledEarly atomic.Bool
	ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		close(entered)
		<-gate
		if ctx.Err() != nil {
			cancelledEarly.Store(true)
		}
		return echoHandler(ctx, c, r)
	}))
	idle := dial(t, ts.addr)
	checkServing(t, ts.addr)
	busy := dial(t, ts.addr)
	busy.send(metadataRequest("late"), 12, 3)
	<-entered
	done := make(chan error, 1)
	go func() { done <- ts.Shutdown(context.Background()) }()
	if err := <-ts.serve; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve = %v", err)
	}
	ts.serve <- ErrServerClosed // for the cleanup check
	idle.expectClosed()
	close(gate)
	busy.read(metadataRequest(), 12, 3)
	busy.expectClosed()
	if err := <-done; err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if cancelledEarly.Load() {
		t.Error("Handle's context was cancelled during a graceful shutdown")
	}
	if err := ts.hooks.closeErr(t, busy.addr()); err != nil {
		t.Fatalf("close error %v, want nil", err)
	}
}

func TestShutdownDeadlineClosesConnections(t *testing.T) {
	cancelled := make(chan struct{})
	entered := make(chan struct{})
	ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		close(entered)
		<-ctx.Done()
		close(cancelled)
		return Response{None: true}
	}))
	c := dial(t, ts.addr)
	c.send(metadataRequest("forever"), 12, 1)
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := ts.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want DeadlineExceeded", err)
	}
	<-cancelled
	c.expectClosed()
	if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("close error %v, want ErrServerClosed", err)
	}
}

// eventRecorder is a ResponseHook.
type eventRecorder struct {
	mu     sync.Mutex
	events []ResponseEvent
	keys   []int16
}

func (h *eventRecorder) OnResponse(_ *ConnInfo, r *Request, e ResponseEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
	h.keys = append(h.keys, r.Key)
}

func TestResponseHook(t *testing.T) {
	rec := &eventRecorder{}
	ts := startServer(t, HandlerFunc(echoHandler), func(s *Server) { s.Hooks = append(s.Hooks, rec) })
	c := dial(t, ts.addr)
	c.send(produceRequest(0), 9, 1)
	c.send(metadataRequest("m"), 12, 2)
	_, rest := c.readFrame()
	wait.For(t, "two response events", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.events) == 2
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	none, meta := rec.events[0], rec.events[1]
	if rec.keys[0] != 0 || !none.None || none.Bytes != 0 || none.Err != nil {
		t.Errorf("acks=0 produce: key %d event %+v", rec.keys[0], none)
	}
	if wantBytes := 4 + 4 + len(rest); rec.keys[1] != 3 || meta.None || meta.Bytes != wantBytes || meta.Err != nil {
		t.Errorf("metadata: key %d event %+v, want %d bytes", rec.keys[1], meta, wantBytes)
	}
	for _, e := range rec.events {
		if e.QueueWait < 0 || e.Handling < 0 || e.Total < e.QueueWait+e.Handling {
			t.Errorf("inconsistent durations %+v", e)
		}
	}
}

func TestRequestsReadBeforeHangupAreStillHandled(t *testing.T) {
	const n = 5
	allRead := &readsReached{n: n, ch: make(chan struct{})}
	var mu sync.Mutex
	var handled []int32
	var cancelled int
	ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		if r.CorrelationID == 0 {
			// Wait until every request was read and the client hung up.
			<-allRead.ch
			<-ctx.Done()
		}
		mu.Lock()
		handled = append(handled, r.CorrelationID)
		if ctx.Err() != nil {
			cancelled++
		}
		mu.Unlock()
		return echoHandler(ctx, c, r)
	}), func(s *Server) { s.Hooks = append(s.Hooks, allRead) })
	c := dial(t, ts.addr)
	var batch []byte
	for i := range int32(n) {
		batch = append(batch, frameOf(produceRequest(int16(-(i%2))), 9, i, nil)...) // acks 0 and -1
	}
	c.write(batch)
	<-allRead.ch
	c.nc.Close()
	if err := ts.hooks.closeErr(t, c.addr()); err != nil {
		t.Fatalf("close error %v, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(handled, []int32{0, 1, 2, 3, 4}) || cancelled != n {
		t.Fatalf("handled %v (%d with a cancelled context), want all %d in order, cancelled", handled, cancelled, n)
	}
}

// TestDeferredResponsesKeepOrder: Response.Wait lets the handler move on to the next
// request while an earlier one waits, yet responses still go out in request order,
// and a deferred None sends nothing. A Wait runs on a goroutine of its own from when
// Handle returns, so the later ones run while the first waits; with WaitOnWriter the
// writer runs each in its turn, so none starts before the first is done.
func TestDeferredResponsesKeepOrder(t *testing.T) {
	for _, onWriter := range []bool{false, true} {
		t.Run(fmt.Sprintf("WaitOnWriter=%t", onWriter), func(t *testing.T) {
			const n = 10
			release := make(chan struct{})
			var handled, started, running, overlapped atomic.Int32
			ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
				handled.Add(1)
				i := r.CorrelationID
				return Response{WaitOnWriter: onWriter, Wait: func(ctx context.Context) Response {
					started.Add(1)
					if running.Add(1) > 1 {
						overlapped.Store(1)
					}
					defer running.Add(-1)
					if i == 0 {
						// The first waits until every request was handled: proof that
						// waiting does not hold up the handler.
						select {
						case <-release:
						case <-ctx.Done():
						}
					}
					if i%3 == 2 {
						return Response{None: true}
					}
					return echoHandler(ctx, c, r)
				}}
			}), func(s *Server) { s.MaxInFlight = n })
			c := dial(t, ts.addr)
			var batch []byte
			for i := range int32(n) {
				batch = append(batch, frameOf(produceRequest(-1), 9, i, nil)...)
			}
			c.write(batch)
			wait.For(t, "every request handled while the first waits", func() bool { return handled.Load() == n })
			if onWriter {
				if got := started.Load(); got != 1 {
					t.Fatalf("%d waits started while the first waits, want 1", got)
				}
			} else {
				wait.For(t, "every wait started while the first waits", func() bool { return started.Load() == n })
			}
			close(release)
			for i := int32(0); i < n; i++ {
				if i%3 == 2 {
					continue
				}
				resp := c.read(produceRequest(-1), 9, i).(*kmsg.ProduceResponse)
				if got := resp.Topics[0].Topic; got != strconv.Itoa(int(i)) {
					t.Fatalf("response %d carries topic %s", i, got)
				}
			}
			if onWriter && overlapped.Load() != 0 {
				t.Fatal("two waits run by the writer overlapped")
			}
		})
	}
}

// TestWaitOnWriterAfterClose: a WaitOnWriter wait of a connection that closed
// before its turn still runs, with a cancelled context (its caller may count it,
// as Produce counts delayed produces), and its answer is dropped.
func TestWaitOnWriterAfterClose(t *testing.T) {
	ran := make(chan error, 2)
	ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		i := r.CorrelationID
		return Response{WaitOnWriter: true, Wait: func(ctx context.Context) Response {
			if i == 0 {
				<-ctx.Done()
			}
			ran <- ctx.Err()
			return echoHandler(ctx, c, r)
		}}
	}))
	c := dial(t, ts.addr)
	c.write(append(frameOf(produceRequest(-1), 9, 0, nil), frameOf(produceRequest(-1), 9, 1, nil)...))
	c.nc.Close()
	for i := range 2 {
		select {
		case err := <-ran:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("wait %d ran with context error %v, want context.Canceled", i, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("wait %d of the closed connection never ran", i)
		}
	}
	checkServing(t, ts.addr)
}

// TestNoneWithCloseClosesAfterEarlierResponses: a None response with Close
// (an acks=0 Produce that failed on a partition) closes the connection, but
// only after the response to the request before it, still waiting when the
// close was asked for, is written; a None without Close leaves the connection
// serving. The reason reaches ConnCloseHook as ErrClosedByHandler.
func TestNoneWithCloseClosesAfterEarlierResponses(t *testing.T) {
	release := make(chan struct{})
	ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		req, ok := r.Msg.(*kmsg.ProduceRequest)
		switch {
		case !ok:
			return echoHandler(ctx, c, r)
		case req.Acks == 0 && req.Topics[0].Topic == "fail":
			return Response{None: true, Close: errors.New("partition error")}
		case req.Acks == -1:
			return Response{Wait: func(ctx context.Context) Response {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return echoHandler(ctx, c, r)
			}}
		}
		return echoHandler(ctx, c, r)
	}))

	c := dial(t, ts.addr)
	c.send(produceRequest(0), 9, 1) // succeeds: no answer, the connection stays
	c.roundTrip(metadataRequest("still"), 12, 2)

	c.send(produceRequest(-1), 9, 3) // waits
	failing := produceRequest(0)
	failing.Topics[0].Topic = "fail"
	c.send(failing, 9, 4)
	close(release)
	resp := c.read(produceRequest(-1), 9, 3).(*kmsg.ProduceResponse)
	if got := resp.Topics[0].Topic; got != "3" {
		t.Fatalf("the waiting produce was answered with topic %s", got)
	}
	c.expectClosed()
	if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, ErrClosedByHandler) {
		t.Fatalf("close error %v, want ErrClosedByHandler", err)
	}
	checkServing(t, ts.addr)
}

// TestCloseBesideAnAnswerIsRejected: Close is only for None; beside a Msg it
// is an invalid response.
func TestCloseBesideAnAnswerIsRejected(t *testing.T) {
	ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		return Response{Msg: kmsg.NewPtrMetadataResponse(), Close: errors.New("x")}
	}))
	c := dial(t, ts.addr)
	c.send(metadataRequest("x"), 12, 1)
	c.expectClosed()
	if err := ts.hooks.closeErr(t, c.addr()); !errors.Is(err, ErrBadResponse) {
		t.Fatalf("close error %v, want ErrBadResponse", err)
	}
}

// writeCountingListener counts the socket writes of every connection it accepts.
type writeCountingListener struct {
	net.Listener
	writes atomic.Int32
}

func (l *writeCountingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &writeCountingConn{Conn: nc, writes: &l.writes}, nil
}

type writeCountingConn struct {
	net.Conn
	writes *atomic.Int32
}

func (c *writeCountingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestReadyResponsesShareAWrite: the answers one event completes (the acks=all
// Produces of a connection that one fsync acknowledged) leave in one socket
// write. Five pipelined requests' WaitOnWriter waits are over once the first
// is released (the last four report Ready), so the writer does not send the
// answers before each of them first: the five go out together, before a
// sixth request's answer that still waits. Without Ready (or before it
// existed) each deferred response flushes the ones before it: five writes.
func TestReadyResponsesShareAWrite(t *testing.T) {
	for _, withReady := range []bool{true, false} {
		t.Run(fmt.Sprintf("Ready=%t", withReady), func(t *testing.T) {
			const n = 5 // answered together; request n is the one still waiting
			release, last := make(chan struct{}), make(chan struct{})
			var released atomic.Bool
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			cl := &writeCountingListener{Listener: ln}
			var handled atomic.Int32
			ts := serveOn(t, cl, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
				defer handled.Add(1)
				i := r.CorrelationID
				resp := Response{WaitOnWriter: true, Wait: func(ctx context.Context) Response {
					var gate chan struct{}
					switch i {
					case 0:
						gate = release
					case n:
						gate = last
					}
					if gate != nil {
						select {
						case <-gate:
						case <-ctx.Done():
						}
					}
					return echoHandler(ctx, c, r)
				}}
				if withReady && i < n {
					resp.Ready = func() bool { return i > 0 || released.Load() }
				}
				return resp
			}), func(s *Server) { s.MaxInFlight = n + 1 })
			c := dial(t, ts.addr)
			var batch []byte
			for i := range int32(n + 1) {
				batch = append(batch, frameOf(produceRequest(-1), 9, i, nil)...)
			}
			c.write(batch)
			// Request n was handled after the first n answers were queued.
			wait.For(t, "every request handled", func() bool { return handled.Load() == n+1 })
			released.Store(true)
			close(release)
			for i := range int32(n) {
				resp := c.read(produceRequest(-1), 9, i).(*kmsg.ProduceResponse)
				if got := resp.Topics[0].Topic; got != strconv.Itoa(int(i)) {
					t.Fatalf("response %d carries topic %s", i, got)
				}
			}
			want := int32(1)
			if !withReady {
				want = n
			}
			if got := cl.writes.Load(); got != want {
				t.Fatalf("the %d answers released together took %d socket writes, want %d", n, got, want)
			}
			close(last)
			c.read(produceRequest(-1), 9, n)
		})
	}
}

// TestReadyPanicClosesOnlyThatConnection: a Response.Ready that panics closes
// its connection, as a panicking Wait does; the server goes on serving.
func TestReadyPanicClosesOnlyThatConnection(t *testing.T) {
	release := make(chan struct{})
	ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		i := r.CorrelationID
		return Response{WaitOnWriter: true, Ready: func() bool { panic("ready") }, Wait: func(ctx context.Context) Response {
			if i == 0 {
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return echoHandler(ctx, c, r)
		}}
	}))
	c := dial(t, ts.addr)
	c.write(append(frameOf(produceRequest(-1), 9, 0, nil), frameOf(produceRequest(-1), 9, 1, nil)...))
	close(release)
	c.expectClosed()
	wait.For(t, "the panic logged", func() bool { return strings.Contains(ts.logs.String(), "Response.Ready") })
	checkServing(t, ts.addr)
}
