package controllerlink

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

// transportFunc is a Transport made of a function.
type transportFunc func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)

func (f transportFunc) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return f(ctx, req)
}

// TestLocalRoutes: Local serves in process while this node leads (at the
// request's own version, a deferred answer waited for) and forwards
// otherwise; with nowhere to forward it fails rather than serve.
func TestLocalRoutes(t *testing.T) {
	var leads bool
	var served, forwarded []int16 // versions seen
	l := &Local{
		Leads: func() bool { return leads },
		Handler: protocol.HandlerFunc(func(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
			served = append(served, r.Version)
			if r.Version != r.Msg.GetVersion() {
				t.Errorf("request version %d, message version %d", r.Version, r.Msg.GetVersion())
			}
			resp := kmsg.NewPtrBrokerHeartbeatResponse()
			resp.IsCaughtUp = true
			return protocol.Response{Wait: func(context.Context) protocol.Response { return protocol.Response{Msg: resp} }}
		}),
		Forward: transportFunc(func(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
			forwarded = append(forwarded, req.GetVersion())
			return req.ResponseKind(), nil
		}),
	}
	ctx := context.Background()
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.Version = 1

	leads = true
	resp, err := l.Request(ctx, req)
	if err != nil || !resp.(*kmsg.BrokerHeartbeatResponse).IsCaughtUp || resp.GetVersion() != 1 {
		t.Fatalf("served in process: %v %+v", err, resp)
	}
	leads = false
	if _, err := l.Request(ctx, req); err != nil {
		t.Fatalf("forwarded: %v", err)
	}
	if len(served) != 1 || served[0] != 1 || len(forwarded) != 1 || forwarded[0] != 1 {
		t.Fatalf("served at %v, forwarded at %v; want one each at v1", served, forwarded)
	}

	l.Forward = nil
	if _, err := l.Request(ctx, req); !errors.Is(err, errNoController) {
		t.Fatalf("no forward transport: %v, want %v", err, errNoController)
	}
	if len(served) != 1 {
		t.Fatal("a node that does not lead served the request itself")
	}
}

// TestClientSendsTheRequestVersion: the link sends a request at its own
// version (a forwarded client request keeps the fields of the version the
// client chose) and refuses one the link does not serve.
func TestClientSendsTheRequestVersion(t *testing.T) {
	c := &Client{
		Leader:   func() (int32, string, bool) { return 1, silentController(t), true },
		Versions: map[int16]int16{kmsg.DeleteTopics.Int16(): 6},
	}
	t.Cleanup(c.Close)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 7
	if _, err := c.Request(context.Background(), req); err == nil || !strings.Contains(err.Error(), "does not serve DeleteTopics v7") {
		t.Fatalf("v7 above the link's v6: %v", err)
	}
	if _, err := c.Request(context.Background(), kmsg.NewPtrCreateTopicsRequest()); err == nil || !strings.Contains(err.Error(), "does not serve CreateTopics") {
		t.Fatalf("a key the link does not serve: %v", err)
	}
	got := make(chan int16, 1)
	c.Leader = func() (int32, string, bool) { return 1, headerReader(t, got), true }
	req.Version = 5
	if _, err := c.Request(context.Background(), req); err == nil {
		t.Fatal("the fake controller hangs up without answering, yet the request succeeded")
	}
	if v := <-got; v != 5 {
		t.Fatalf("DeleteTopics v5 sent as v%d", v)
	}
}

// headerReader is a controller that reads one link request's header, sends
// its version on got and hangs up.
func headerReader(t *testing.T, got chan<- int16) string {
	t.Helper()
	ln := listen(t)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var b [1 + 4 + 2 + 2]byte // marker, size, key, version
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return
		}
		got <- int16(binary.BigEndian.Uint16(b[7:]))
	}()
	return ln.Addr().String()
}
