package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/vfs"
)

// testNode runs a node on ephemeral loopback ports in dir.
type testNode struct {
	*Node
	cfg config.Config
}

func nodeConfig(dir string) config.Config {
	cfg := config.Default()
	cfg.DataDir = dir
	cfg.KafkaAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.ControllerAddr = "127.0.0.1:0"
	cfg.AdvertisedKafkaAddr = ""
	return cfg
}

func testLogger() *slog.Logger {
	if os.Getenv("STRATA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func startNode(t *testing.T, cfg config.Config) *testNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg, testLogger(), vfs.Default)
	if err != nil {
		t.Fatalf("starting node: %v", err)
	}
	tn := &testNode{Node: n, cfg: cfg}
	t.Cleanup(func() { n.Close() })
	return tn
}

func (n *testNode) client(t *testing.T, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.KafkaAddr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// rawRequest sends req at its set version on a fresh connection, bypassing any
// client-side rewriting, and decodes the response.
func rawRequest(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := roundTrip(addr, req, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// roundTrip is rawRequest returning its errors, the whole exchange within
// timeout. A Produce request with acks 0 gets no response: it is followed by
// an ApiVersions request on the same connection, whose answer it returns.
func roundTrip(addr string, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	return roundTripAfter(addr, nil, req, timeout)
}

// roundTripAfter is roundTrip on a connection that opens with preamble (the
// controller link's marker byte; nil for none).
func roundTripAfter(addr string, preamble []byte, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write(preamble); err != nil {
		return nil, err
	}
	if err := writeRequest(conn, req, 7); err != nil {
		return nil, err
	}
	if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		req = kmsg.NewPtrApiVersionsRequest()
		if err := writeRequest(conn, req, 8); err != nil {
			return nil, err
		}
	}
	return readResponse(conn, req)
}

// readResponse reads the response to req, the next frame of r.
func readResponse(r io.Reader, req kmsg.Request) (kmsg.Response, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, fmt.Errorf("reading response: %w", err)
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	buf = buf[4:] // correlation id
	if resp.IsFlexible() && req.Key() != 18 {
		buf = buf[1:]
	}
	if err := resp.ReadFrom(buf); err != nil {
		return nil, fmt.Errorf("decoding response: %w", err)
	}
	return resp, nil
}

// writeRequest writes req in one frame with a v1 or v2 request header.
func writeRequest(w io.Writer, req kmsg.Request, correlationID int32) error {
	body := kbin.AppendInt16(nil, req.Key())
	body = kbin.AppendInt16(body, req.GetVersion())
	body = kbin.AppendInt32(body, correlationID)
	body = kbin.AppendNullableString(body, nil)
	if req.IsFlexible() {
		body = append(body, 0)
	}
	body = req.AppendTo(body)
	_, err := w.Write(append(kbin.AppendInt32(nil, int32(len(body))), body...))
	return err
}
