package handlers

// DescribeTransactions (key 65), v0 (flexible). The state of each transactional
// id whose __transaction_state partition this broker leads: state name, timeout,
// start time, producer id and epoch, partitions. Others: NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS or TRANSACTIONAL_ID_NOT_FOUND; the empty id
// INVALID_REQUEST.
// Authorization, as Kafka's: DESCRIBE on each transactional id (else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it); the partitions listed are
// those of the topics the principal may DESCRIBE.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/txn"
)

func (h *Handlers) describeTransactions(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	describable := h.topicCheck(ctx, c, kmsg.ACLOperationDescribe)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		if !h.authorize(ctx, c, kmsg.ACLOperationDescribe, resTxnID, id) {
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
		if h.cfg.Transactions == nil {
			st.ErrorCode = kerr.CoordinatorNotAvailable.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		d, code := h.cfg.Transactions.Describe(id)
		st.ErrorCode = code
		if code == 0 {
			st.State, st.TimeoutMillis, st.StartTimestamp = d.State.String(), d.TimeoutMs, d.StartMs
			st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
			txn.EachTopic(d.Partitions, func(topic string, partitions []int32) {
				if !describable(topic) {
					return
				}
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic, t.Partitions = topic, partitions
				st.Topics = append(st.Topics, t)
			})
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return reply(resp)
}
