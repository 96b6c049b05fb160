package handlers

// ListTransactions (key 66), v0-v2 (flexible). The transactional ids of the
// __transaction_state partitions this broker leads (an admin client asks every
// broker), filtered by state names (unknown names come back in
// UnknownStateFilters), producer ids, v1+ a minimum running time
// (DurationFilterMillis, -1: none) and v2+ a regular expression the whole id
// must match, as Kafka's Matcher.matches (KIP-1152; one that does not compile
// is INVALID_REGULAR_EXPRESSION).
// Only the ids the principal may DESCRIBE are listed, as Kafka lists them.
// While a partition of __transaction_state is loading here the answer is
// COORDINATOR_LOAD_IN_PROGRESS, as Kafka's.

import (
	"context"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/txn"
)

func (h *Handlers) listTransactions(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	if h.cfg.Transactions == nil {
		return reply(resp)
	}
	f := txn.ListFilter{ProducerIDs: req.ProducerIDFilters, MinRunningMs: -1, NowMs: time.Now().UnixMilli()}
	if req.Version >= 1 {
		f.MinRunningMs = req.DurationFilterMillis
	}
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile(`^(?:` + *req.TransactionalIDPattern + `)$`)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return reply(resp)
		}
		f.IDPattern = re
	}
	for _, name := range req.StateFilters {
		s, ok := stateByName(name)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		f.States = append(f.States, s)
	}
	if len(req.StateFilters) > 0 && len(f.States) == 0 {
		return reply(resp) // only unknown states: nothing matches
	}
	listed, code := h.cfg.Transactions.List(f)
	if code != 0 {
		resp.ErrorCode = code
		return reply(resp)
	}
	for _, d := range listed {
		if !h.authorize(ctx, c, kmsg.ACLOperationDescribe, resTxnID, d.TransactionalID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = d.TransactionalID, d.ProducerID, d.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return reply(resp)
}

// stateByName maps Kafka's transaction state names (exact, as Kafka matches
// them), Dead and PrepareEpochFence included: Kafka knows them, though no id
// is ever listed in them.
func stateByName(name string) (txn.State, bool) {
	for s := txn.Empty; s <= kmsg.TransactionStatePrepareEpochFence; s++ {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}
