package controllerlink

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

// Transport is a node's one path to the active controller: every request for
// it, from the Kafka handlers, the HTTP API and console (through them or
// directly) and the broker's own lifecycle (registration, heartbeats, ISR
// changes, producer-id blocks, --add-scram), goes through a Transport.
//
// There are two, as in hashicorp/raft an in-memory transport sits beside the
// network one, and both carry the same messages (Kafka requests at the
// caller's version; the answer comes back at that version):
//   - *Client sends over the network to the active controller's link. A
//     broker-only node uses it alone.
//   - *Local serves the request in process with this node's link handler when
//     this node's controller is the active one, and hands it to its Forward
//     transport (a *Client) otherwise.
//
// Request errors are transport failures (no controller known, a dial or read
// failed); a controller that is no longer active answers NOT_CONTROLLER in the
// response, and callers retry as they see fit.
type Transport interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// Local serves link requests in process on a node with a controller role.
type Local struct {
	// Leads reports whether this node's controller is the active one; nil means
	// it always is (a single node).
	Leads func() bool
	// Handler serves the link's API keys (handlers.LinkHandler); it answers
	// NOT_CONTROLLER itself if leadership moved since Leads was asked.
	Handler protocol.Handler
	// Forward carries requests while another node is the active controller; nil
	// fails them.
	Forward Transport
}

// Request serves req here when this node is the active controller, else
// forwards it.
func (l *Local) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if l.Leads != nil && !l.Leads() {
		if l.Forward == nil {
			return nil, errNoController
		}
		return l.Forward.Request(ctx, req)
	}
	resp := l.Handler.Handle(ctx, &protocol.ConnInfo{}, &protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req})
	if resp.Wait != nil {
		resp = resp.Wait(ctx)
	}
	if resp.Msg == nil {
		return nil, fmt.Errorf("controllerlink: %s served in process without a response", kmsg.NameForKey(req.Key()))
	}
	resp.Msg.SetVersion(req.GetVersion())
	return resp.Msg, nil
}
