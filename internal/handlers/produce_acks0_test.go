package handlers

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/wait"
)

// serveConn serves h on a loopback listener and dials it; the connection
// has a deadline of a minute, so a read that should fail never hangs.
func serveConn(t *testing.T, h *Handlers) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &protocol.Server{Handler: h, Versions: Versions(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, protocol.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if err := nc.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	return nc
}

func sendRequest(t *testing.T, nc net.Conn, req kmsg.Request, corr int32) {
	t.Helper()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, corr)
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
}

// readCorrelation reads one response frame and returns its correlation id;
// io.EOF (or a reset) when the broker closed the connection.
func readCorrelation(br *bufio.Reader) (int32, error) {
	var size [4]byte
	if _, err := io.ReadFull(br, size[:]); err != nil {
		return 0, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(br, frame); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(frame)), nil
}

// TestAcksZeroErrorClosesConnection: an acks=0 produce gets no answer, so
// a partition error closes the connection (Kafka's cue to the client to
// refresh its metadata): to a partition led by another broker, to an unknown
// topic or partition, with a valid partition beside a failing one (which is
// still appended). A successful acks=0 produce leaves the connection serving.
func TestAcksZeroErrorClosesConnection(t *testing.T) {
	h := newErrorsHandlers(t)
	p, err := h.replicas.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	produce := func(parts ...struct {
		topic     string
		partition int32
	}) *kmsg.ProduceRequest {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks, req.TimeoutMillis = 0, 1000
		for _, tp := range parts {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = tp.topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = tp.partition, batchtest.Build(batchtest.Options{})
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	type tp = struct {
		topic     string
		partition int32
	}
	for _, tc := range []struct {
		name      string
		req       *kmsg.ProduceRequest
		closes    bool
		appending bool // the batch to t-0 is appended
	}{
		{"success", produce(tp{"t", 0}), false, true},
		{"led by another broker", produce(tp{"t", 1}), true, false},
		{"unknown topic", produce(tp{"nope", 0}), true, false},
		{"unknown partition", produce(tp{"t", 9}), true, false},
		{"valid beside failing", produce(tp{"t", 0}, tp{"t", 1}), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := serveConn(t, h)
			br := bufio.NewReader(nc)
			before := p.LogEndOffset()
			sendRequest(t, nc, tc.req, 1)
			// A request behind it: answered while the connection stays.
			sendRequest(t, nc, kmsg.NewPtrApiVersionsRequest(), 2)
			corr, err := readCorrelation(br)
			switch {
			case tc.closes && err == nil:
				t.Fatalf("the connection answered request %d after the failed acks=0 produce", corr)
			case tc.closes && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err):
				t.Fatalf("reading after the failed produce: %v, want the connection closed", err)
			case !tc.closes && err != nil:
				t.Fatalf("the connection closed after a successful acks=0 produce: %v", err)
			case !tc.closes && corr != 2:
				t.Fatalf("answer to request %d, want 2 (acks=0 gets none)", corr)
			}
			if tc.appending {
				wait.For(t, "the acks=0 batch appended", func() bool { return p.LogEndOffset() > before })
			} else if got := p.LogEndOffset(); got != before {
				t.Fatalf("log end offset moved %d -> %d", before, got)
			}
		})
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}
