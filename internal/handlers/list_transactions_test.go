package handlers

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/txn"
)

// listedTxns is a transaction coordinator that knows a few ongoing
// transactional ids and lists those its filter's states and pattern match.
type listedTxns struct{ Transactions }

func (listedTxns) List(f txn.ListFilter) ([]txn.Described, int16) {
	var out []txn.Described
	if len(f.States) > 0 && !slices.Contains(f.States, txn.Ongoing) {
		return nil, 0
	}
	for _, id := range []string{"a-tx", "tx", "tx-1"} {
		if f.IDPattern == nil || f.IDPattern.MatchString(id) {
			out = append(out, txn.Described{TransactionalID: id, Meta: txn.Meta{State: txn.Ongoing}})
		}
	}
	return out, 0
}

// TestListTransactionsAsKafka: ListTransactions v2's transactional id pattern
// must match the whole id (Kafka 4.4's listTransactionStates uses
// Matcher.matches), and the state names Kafka knows but never lists (Dead,
// PrepareEpochFence) are not unknown state filters: they match nothing.
func TestListTransactionsAsKafka(t *testing.T) {
	h := newAdminHandlersWith(t, Config{Transactions: listedTxns{}})
	for _, tt := range []struct {
		pattern string
		want    []string
	}{
		{"tx", []string{"tx"}},
		{"tx.*", []string{"tx", "tx-1"}},
		{".*tx", []string{"a-tx", "tx"}},
		{"tx|a-tx", []string{"a-tx", "tx"}},
	} {
		req := kmsg.NewPtrListTransactionsRequest()
		req.Version = 2
		req.TransactionalIDPattern = &tt.pattern
		resp := serve(t, h, req).(*kmsg.ListTransactionsResponse)
		var ids []string
		for _, st := range resp.TransactionStates {
			ids = append(ids, st.TransactionalID)
		}
		if resp.ErrorCode != 0 || !slices.Equal(ids, tt.want) {
			t.Errorf("pattern %q: code %d, ids %q, want %q", tt.pattern, resp.ErrorCode, ids, tt.want)
		}
	}

	req := kmsg.NewPtrListTransactionsRequest()
	req.StateFilters = []string{"Dead", "PrepareEpochFence", "Bogus"}
	resp := serve(t, h, req).(*kmsg.ListTransactionsResponse)
	if !slices.Equal(resp.UnknownStateFilters, []string{"Bogus"}) || len(resp.TransactionStates) != 0 {
		t.Errorf("state filters Dead, PrepareEpochFence, Bogus: unknown %q, listed %d, want [Bogus] and none", resp.UnknownStateFilters, len(resp.TransactionStates))
	}
}
