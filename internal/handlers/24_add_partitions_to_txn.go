package handlers

// AddPartitionsToTxn (key 24), v0-v5.
//   v0-v3 (clients): one transaction; v2+: PRODUCER_FENCED for a fenced epoch
//   (INVALID_PRODUCER_EPOCH before); v3+ flexible. v4-v5 (KIP-890, brokers): a
//   batch of transactions, each optionally VerifyOnly (is each partition already
//   in the ongoing transaction? if not TRANSACTION_ABORTABLE, and
//   CONCURRENT_TRANSACTIONS while it commits or aborts; what a partition leader
//   asks before it appends a Produce v11 or older transactional batch), and a
//   top-level error code; v5 is what a
//   partition leader sends to add the partition of a Produce v12 or the offsets
//   partition of a TxnOffsetCommit v5 (the same answer). An add of the broker
//   form that the coordinator answers CONCURRENT_TRANSACTIONS (the id's previous
//   transaction still completing) is held and tried again the moment the
//   coordinator signals the change over, for up to joinTxnRetryMax, before it
//   is answered: the leader that sent it is woken by the answer instead of
//   polling (Kafka's clients send v3 or older, answered at once).
// The coordinator of the transactional id adds the partitions to its ongoing
// transaction (starting one). A partition that does not exist is
// UNKNOWN_TOPIC_OR_PARTITION, one of a topic the client may not WRITE
// (v0-v3; an internal topic never, as Kafka) TOPIC_AUTHORIZATION_FAILED, and then the transaction's other
// partitions OPERATION_NOT_ATTEMPTED; an empty transactional id is
// INVALID_REQUEST; coordinator errors (NOT_COORDINATOR,
// CONCURRENT_TRANSACTIONS, INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE, ...)
// apply to every partition.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/txn"
)

func (h *Handlers) addPartitionsToTxn(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	img := h.cluster.Image()
	if req.Version < 4 {
		topics := make([]kmsg.AddPartitionsToTxnRequestTransactionTopic, len(req.Topics))
		for i, t := range req.Topics {
			topics[i] = kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: t.Topic, Partitions: t.Partitions}
		}
		// As Kafka, an internal topic is never authorized for a client's add.
		mayWrite := h.topicCheck(ctx, c, kmsg.ACLOperationWrite)
		writable := func(topic string) bool { return !IsInternalTopic(topic) && mayWrite(topic) }
		codes := h.addToTxn(ctx, img, writable, req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, topics)
		for ti, t := range req.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = t.Topic
			for pi, p := range t.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, fencedCode(codes[ti][pi], req.Version, 2)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return reply(resp)
	}
	var held []int // transactions answered CONCURRENT_TRANSACTIONS, by index
	for i, rt := range req.Transactions {
		codes := h.addToTxn(ctx, img, nil, rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly, rt.Topics)
		st := kmsg.NewAddPartitionsToTxnResponseTransaction()
		st.TransactionalID = rt.TransactionalID
		for ti, t := range rt.Topics {
			tt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			tt.Topic = t.Topic
			for pi, p := range t.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				sp.Partition, sp.ErrorCode = p, codes[ti][pi]
				tt.Partitions = append(tt.Partitions, sp)
			}
			st.Topics = append(st.Topics, tt)
		}
		resp.Transactions = append(resp.Transactions, st)
		if !rt.VerifyOnly && len(codes) > 0 && len(codes[0]) > 0 && codes[0][0] == kerr.ConcurrentTransactions.Code {
			held = append(held, i)
		}
	}
	if len(held) == 0 {
		return reply(resp)
	}
	// Off the connection's handler: the connection's later requests are
	// served meanwhile (their answers follow this one, in order).
	return protocol.Response{Wait: func(ctx context.Context) protocol.Response {
		for _, i := range held {
			rt, st := req.Transactions[i], &resp.Transactions[i]
			tps := txnPartitions(rt.Topics)
			code := retryConcurrentTxn(ctx, joinTxnRetryBackoff, joinTxnRetryMax, func() int16 {
				return h.cfg.Transactions.AddPartitions(ctx, rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, tps)
			}, func() <-chan struct{} { return h.cfg.Transactions.Completed(rt.TransactionalID) })
			for ti := range st.Topics {
				for pi := range st.Topics[ti].Partitions {
					st.Topics[ti].Partitions[pi].ErrorCode = code
				}
			}
		}
		return reply(resp)
	}}
}

// txnPartitions lists the partitions of an add's topics.
func txnPartitions(topics []kmsg.AddPartitionsToTxnRequestTransactionTopic) []txn.TopicPartition {
	var tps []txn.TopicPartition
	for _, t := range topics {
		for _, p := range t.Partitions {
			tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	return tps
}

// addToTxn adds (or verifies) the partitions of one transaction and returns a
// code per partition, indexed like topics. writable, when set (a client's
// add), is WRITE on a topic: a partition of a topic it denies is
// TOPIC_AUTHORIZATION_FAILED, and then, as for an unknown partition, the
// others are OPERATION_NOT_ATTEMPTED.
func (h *Handlers) addToTxn(ctx context.Context, img *metadata.Image, writable func(string) bool, id string, pid int64, epoch int16, verifyOnly bool, topics []kmsg.AddPartitionsToTxnRequestTransactionTopic) [][]int16 {
	codes := make([][]int16, len(topics))
	var tps []txn.TopicPartition
	refused := false
	for ti, t := range topics {
		codes[ti] = make([]int16, len(t.Partitions))
		for pi, p := range t.Partitions {
			switch {
			case writable != nil && !writable(t.Topic):
				codes[ti][pi] = kerr.TopicAuthorizationFailed.Code
				refused = true
				continue
			case img.Partition(t.Topic, p) == nil:
				codes[ti][pi] = kerr.UnknownTopicOrPartition.Code
				refused = true
				continue
			}
			tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	var code int16
	switch {
	case refused:
		code = kerr.OperationNotAttempted.Code
	case id == "":
		code = kerr.InvalidRequest.Code
	case h.cfg.Transactions == nil:
		code = kerr.TransactionalIDAuthorizationFailed.Code
	case verifyOnly:
		// Each partition answered on its own, as Kafka does: the ones in the
		// transaction succeed, the others are TRANSACTION_ABORTABLE.
		i := 0
		for ti := range codes {
			for pi := range codes[ti] {
				codes[ti][pi] = h.cfg.Transactions.VerifyPartitions(id, pid, epoch, tps[i:i+1])
				i++
			}
		}
		return codes
	default:
		code = h.cfg.Transactions.AddPartitions(ctx, id, pid, epoch, tps)
	}
	for ti := range codes {
		for pi := range codes[ti] {
			if codes[ti][pi] == 0 {
				codes[ti][pi] = code
			}
		}
	}
	return codes
}

// fencedCode answers INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED to
// versions below since, which predate KIP-588.
func fencedCode(code int16, version, since int16) int16 {
	if code == kerr.ProducerFenced.Code && version < since {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
