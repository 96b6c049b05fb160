package handlers

// EndTxn (key 26), v0-v5.
//   v2+: PRODUCER_FENCED for a fenced epoch (INVALID_PRODUCER_EPOCH before);
//   v3+ flexible.
//   v5 (KIP-890, transaction version 2): every commit and abort bumps the
//   producer epoch (a new producer id once the epoch is exhausted), the answer
//   carries the id and epoch for the next transaction, an abort without a
//   transaction is allowed, and a retry with the epoch before the bump succeeds.
// The coordinator writes PrepareCommit or PrepareAbort and answers; the markers and
// the completed state follow in the background, and until they are written the
// transactional id answers CONCURRENT_TRANSACTIONS. An EndTxn that meets it (the
// next transaction ended while the previous one's markers are still being
// written) is held until the coordinator signals the change over, up to
// joinTxnRetryMax, and tried again, as the implicit add of Produce v12 is: else
// franz-go and Kafka's clients back off 20 ms or more. Without an ongoing
// transaction: INVALID_TXN_STATE (a retried EndTxn of the transaction just
// completed the same way succeeds). An empty transactional id is INVALID_REQUEST.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) endTxn(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	switch {
	case h.cfg.Transactions == nil:
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return reply(resp)
	case req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	var pid int64
	var epoch int16
	code := retryConcurrentTxn(ctx, joinTxnRetryBackoff, joinTxnRetryMax, func() int16 {
		var code int16
		pid, epoch, code = h.cfg.Transactions.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, req.Version >= 5)
		return code
	}, func() <-chan struct{} { return h.cfg.Transactions.Completed(req.TransactionalID) })
	resp.ErrorCode = fencedCode(code, req.Version, 2)
	resp.ProducerID, resp.ProducerEpoch = pid, epoch
	return reply(resp)
}
