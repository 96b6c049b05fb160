package handlers

// TxnOffsetCommit (key 28), v0-v4 (v2+: leader epochs; v3+: generation, member
// and instance ids (KIP-447), flexible). Served by the group coordinator: the offsets are written in a
// transactional batch of the producer on the group's __consumer_offsets partition
// and become the group's committed offsets only when the transaction commits (see
// package group, txn_offsets.go). The answer comes once they are appended.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) txnOffsetCommit(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.TxnOffsetCommitRequest)
	return waitFor(func(ctx context.Context) kmsg.Response {
		return h.groups.TxnOffsetCommit(ctx, req)
	})
}
