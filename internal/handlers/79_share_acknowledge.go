package handlers

// ShareAcknowledge (key 79), v1-v2: a share-group member acknowledges records it
// acquired (ACCEPT, RELEASE, REJECT; RENEW from v2) outside a ShareFetch. A record the
// member does not hold is INVALID_RECORD_STATE. The answer comes once the new state
// is durable, so it finishes off the connection's goroutine.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) shareAcknowledge(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	return waitFor(func(ctx context.Context) kmsg.Response {
		return h.cfg.Shares.ShareAcknowledge(ctx, r.Msg.(*kmsg.ShareAcknowledgeRequest))
	})
}
