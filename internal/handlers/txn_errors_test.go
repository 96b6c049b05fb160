package handlers

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/txn"
)

// recordingTxns is a transaction coordinator that answers success and
// records the partitions it was asked to add; what else is called fails the
// test by panicking.
type recordingTxns struct {
	Transactions
	added []txn.TopicPartition
	calls int
}

func (r *recordingTxns) AddPartitions(_ context.Context, _ string, _ int64, _ int16, add []txn.TopicPartition) int16 {
	r.calls++
	r.added = append(r.added, add...)
	return 0
}

func (r *recordingTxns) InitProducerID(context.Context, string, int32, int64, int16) (int64, int16, int16) {
	r.calls++
	return 5, 0, 0
}

func (r *recordingTxns) EndTxn(context.Context, string, int64, int16, bool, bool) (int64, int16, int16) {
	r.calls++
	return -1, -1, 0
}

// TestTxnRequestErrors: the transactional APIs refuse, before the
// coordinator sees them, what Kafka refuses: an empty transactional id
// (INVALID_REQUEST), a transactional id the client may not WRITE, a group it
// may not READ (AddOffsetsToTxn), and in AddPartitionsToTxn a topic it may not
// WRITE or an unknown partition (the others then OPERATION_NOT_ATTEMPTED).
func TestTxnRequestErrors(t *testing.T) {
	txns := &recordingTxns{}
	write, read := kmsg.ACLOperationWrite, kmsg.ACLOperationRead
	h := newErrorsHandlersWith(t, Config{Transactions: txns, Authorizer: allowAnonymous(
		write, resTxnID, "tx", write, resTxnID, "", write, resTopic, "t", read, resGroup, "g")})

	initPID := func(id string) int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.SetVersion(4)
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		req.ProducerID, req.ProducerEpoch = -1, -1
		return serve(t, h, req).(*kmsg.InitProducerIDResponse).ErrorCode
	}
	endTxn := func(id string) int16 {
		req := kmsg.NewPtrEndTxnRequest()
		req.SetVersion(4)
		req.TransactionalID, req.ProducerID, req.Commit = id, 5, true
		return serve(t, h, req).(*kmsg.EndTxnResponse).ErrorCode
	}
	addOffsets := func(id, group string) int16 {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.SetVersion(3)
		req.TransactionalID, req.ProducerID, req.Group = id, 5, group
		return serve(t, h, req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
	}
	for _, tc := range []struct {
		name string
		got  int16
		want *kerr.Error
	}{
		{"InitProducerId empty id", initPID(""), kerr.InvalidRequest},
		{"InitProducerId id denied", initPID("other"), kerr.TransactionalIDAuthorizationFailed},
		{"EndTxn empty id", endTxn(""), kerr.InvalidRequest},
		{"EndTxn id denied", endTxn("other"), kerr.TransactionalIDAuthorizationFailed},
		{"AddOffsetsToTxn group denied", addOffsets("tx", "other"), kerr.GroupAuthorizationFailed},
		{"AddOffsetsToTxn empty id", addOffsets("", "g"), kerr.InvalidRequest},
	} {
		if tc.got != tc.want.Code {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(tc.got), tc.want)
		}
	}
	if txns.calls != 0 {
		t.Fatalf("the coordinator was called %d times for refused requests", txns.calls)
	}

	add := func(id string, topics map[string][]int32, order ...string) []int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.SetVersion(3)
		req.TransactionalID, req.ProducerID = id, 5
		for _, topic := range order {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = topic, topics[topic]
			req.Topics = append(req.Topics, rt)
		}
		var codes []int16
		for _, rt := range serve(t, h, req).(*kmsg.AddPartitionsToTxnResponse).Topics {
			for _, p := range rt.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
		return codes
	}
	parts := map[string][]int32{"t": {0, 9}, "secret": {0}}
	got := add("tx", parts, "t", "secret")
	want := []int16{kerr.OperationNotAttempted.Code, kerr.UnknownTopicOrPartition.Code, kerr.TopicAuthorizationFailed.Code}
	if !slices.Equal(got, want) {
		t.Errorf("AddPartitionsToTxn with refused partitions: %v, want %v", got, want)
	}
	if got := add("", map[string][]int32{"t": {0}}, "t"); !slices.Equal(got, []int16{kerr.InvalidRequest.Code}) {
		t.Errorf("AddPartitionsToTxn with an empty id: %v, want INVALID_REQUEST", got)
	}
	if txns.calls != 0 {
		t.Fatalf("the coordinator was called %d times for refused adds", txns.calls)
	}
	if got := add("tx", map[string][]int32{"t": {0, 1}}, "t"); !slices.Equal(got, []int16{0, 0}) ||
		!slices.Equal(txns.added, []txn.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}) {
		t.Errorf("AddPartitionsToTxn: %v, added %v; want both partitions added", got, txns.added)
	}
}
