package handlers

// InitProducerId (key 22), v0-v5. Hands an idempotent producer a fresh producer id
// with epoch 0. Ids come from blocks the controller allocates through the metadata
// log, so they never repeat, across restarts too. v2+ flexible; v3+ the client may
// pass its current id and epoch (KIP-360): a non-transactional producer then simply
// gets a fresh id. With a transactional id the transaction coordinator (this broker
// must lead the id's __transaction_state partition, else NOT_COORDINATOR) answers:
// the id's producer with its epoch bumped, fencing older incarnations
// (PRODUCER_FENCED for them); an open transaction is aborted first
// (CONCURRENT_TRANSACTIONS until it is); a timeout above transaction.max.timeout.ms
// is INVALID_TRANSACTION_TIMEOUT. An empty (not null) transactional id is
// INVALID_REQUEST, as in Kafka, and so is a v3+ producer id given without an
// epoch or an epoch without a producer id. No producer id to hand out (the controller
// allocated no block) is COORDINATOR_LOAD_IN_PROGRESS, as in Kafka.

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/protocol"
)

// producerIDs hands out ids from the broker's current block.
type producerIDs struct {
	mu        sync.Mutex
	next, end int64
}

func (h *Handlers) initProducerID(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		if h.cfg.Transactions == nil || !h.authorize(ctx, c, kmsg.ACLOperationWrite, resTxnID, *req.TransactionalID) {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return reply(resp)
		}
		if *req.TransactionalID == "" || halfGiven(req) { // null asks for an idempotent producer; empty is a mistake
			resp.ErrorCode = kerr.InvalidRequest.Code
			return reply(resp)
		}
		reqPID, reqEpoch := int64(-1), int16(-1)
		if req.Version >= 3 {
			reqPID, reqEpoch = req.ProducerID, req.ProducerEpoch
		}
		var code int16
		resp.ProducerID, resp.ProducerEpoch, code = h.cfg.Transactions.InitProducerID(ctx, *req.TransactionalID, req.TransactionTimeoutMillis, reqPID, reqEpoch)
		resp.ErrorCode = fencedCode(code, req.Version, 4)
		return reply(resp)
	}
	if !h.mayWriteIdempotently(ctx, c) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply(resp)
	}
	if halfGiven(req) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	id, err := h.nextProducerID(ctx)
	if err != nil {
		// No block to hand an id out from: Kafka's ProducerIdManager
		// answers COORDINATOR_LOAD_IN_PROGRESS, retriable for every client.
		h.log.Warn("allocating producer ids", "err", err)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return reply(resp)
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return reply(resp)
}

// halfGiven tells whether a v3+ request gives only one of its producer id and
// epoch (-1: not given), which Kafka refuses with INVALID_REQUEST.
func halfGiven(req *kmsg.InitProducerIDRequest) bool {
	return req.Version >= 3 && (req.ProducerID == -1) != (req.ProducerEpoch == -1)
}

func (h *Handlers) nextProducerID(ctx context.Context) (int64, error) {
	h.pids.mu.Lock()
	defer h.pids.mu.Unlock()
	if h.pids.next >= h.pids.end {
		block, err := h.allocateProducerIDBlock(ctx)
		if err != nil {
			return 0, err
		}
		h.pids.next, h.pids.end = block.First, block.First+int64(block.Len)
	}
	id := h.pids.next
	h.pids.next++
	return id, nil
}

// allocateProducerIDBlock asks the active controller, local or not, for a block.
func (h *Handlers) allocateProducerIDBlock(ctx context.Context) (controller.ProducerIDBlock, error) {
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = h.cfg.NodeID, h.cfg.BrokerEpoch()
	resp, err := h.ctrl.Request(ctx, req)
	if err != nil {
		return controller.ProducerIDBlock{}, err
	}
	r := resp.(*kmsg.AllocateProducerIDsResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return controller.ProducerIDBlock{}, err
	}
	return controller.ProducerIDBlock{First: r.ProducerIDStart, Len: r.ProducerIDLen}, nil
}
