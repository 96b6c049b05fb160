package handlers

// ShareFetch (key 78), v1-v2: a share-group member fetches records of partitions this
// broker leads, acquiring them under an acquisition lock, and acknowledges earlier
// deliveries (package share).
//   v1: MaxRecords, BatchSize; AcquisitionLockTimeoutMs in the response.
//   v2: ShareAcquireMode (record_limit acquires at most MaxRecords, splitting
//       batches), IsRenewAck and the RENEW acknowledgement type.
// v0 (Kafka 4.0's early access) is not served. Share sessions: epoch 0 opens one, -1
// acknowledges and closes it, anything else must be the session's next epoch. The
// request may long-poll up to MaxWaitMs, so it finishes off the connection's
// goroutine.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

// Shares is the share-partition leader as the handlers use it.
type Shares interface {
	ShareFetch(ctx context.Context, req *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse
	ShareAcknowledge(ctx context.Context, req *kmsg.ShareAcknowledgeRequest) *kmsg.ShareAcknowledgeResponse
}

// noShares answers share-group record requests of handlers built without a
// share-partition leader (some test harnesses): UNSUPPORTED_VERSION.
type noShares struct{}

func (noShares) ShareFetch(_ context.Context, req *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	return resp
}

func (noShares) ShareAcknowledge(_ context.Context, req *kmsg.ShareAcknowledgeRequest) *kmsg.ShareAcknowledgeResponse {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	return resp
}

func (h *Handlers) shareFetch(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	return waitFor(func(ctx context.Context) kmsg.Response {
		return h.cfg.Shares.ShareFetch(ctx, r.Msg.(*kmsg.ShareFetchRequest))
	})
}
