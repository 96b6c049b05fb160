package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
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

	// Produce: transactional batches need WRITE on the request's transactional
	// id (the whole request is refused, its plain partitions too).
	transactional := batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: 7, Attributes: 0x10})
	plain := batchtest.Build(batchtest.Options{})
	produce := func(id *string) []int16 {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks, req.TimeoutMillis, req.TransactionID = 1, 1000, id
		for i, records := range [][]byte{plain, transactional} {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = []int32{0, 3}[i], records
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		var codes []int16
		for _, rt := range serve(t, h, req).(*kmsg.ProduceResponse).Topics {
			codes = append(codes, rt.Partitions[0].ErrorCode)
		}
		return codes
	}
	denied := kerr.TransactionalIDAuthorizationFailed.Code
	for _, tc := range []struct {
		name string
		id   *string
		want []int16
	}{
		{"no transactional id", nil, []int16{denied, denied}},
		{"an id not writable", kmsg.StringPtr("other"), []int16{denied, denied}},
		// A writable id passes: the plain partition is appended, and the
		// transactional one goes on to KIP-890's verification, for which this
		// harness has no transaction coordinator (NOT_ENOUGH_REPLICAS, which
		// clients retry).
		{"a writable id", kmsg.StringPtr("tx"), []int16{0, kerr.NotEnoughReplicas.Code}},
	} {
		if got := produce(tc.id); !slices.Equal(got, tc.want) {
			t.Errorf("produce with %s: %v, want %v", tc.name, got, tc.want)
		}
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

// verifyingTxns is a transaction coordinator that finds every partition it is
// asked about in the transaction.
type verifyingTxns struct{ Transactions }

func (verifyingTxns) VerifyPartitions(string, int64, int16, []txn.TopicPartition) int16 { return 0 }

// txnCommittingGroups commits every transactional offset it is given and
// remembers the partitions.
type txnCommittingGroups struct {
	Groups
	got []string
}

func (g *txnCommittingGroups) TxnOffsetCommit(_ context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			g.got = append(g.got, fmt.Sprintf("%s/%d", t.Topic, p.Partition))
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// TestTxnOffsetCommitErrors: as in Kafka, TxnOffsetCommit needs READ on the
// group (else every partition is GROUP_AUTHORIZATION_FAILED); a partition of
// a topic the client may not READ is TOPIC_AUTHORIZATION_FAILED, one of an
// unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION, and only the others
// reach the coordinator.
func TestTxnOffsetCommitErrors(t *testing.T) {
	write, read := kmsg.ACLOperationWrite, kmsg.ACLOperationRead
	base := newErrorsHandlersWith(t, Config{Authorizer: allowAnonymous(
		write, resTxnID, "tx", read, resGroup, "g", read, resTopic, "t", read, resTopic, "nope")})
	groups := &txnCommittingGroups{}
	// The transaction coordinator is here and verifies the commit (v3:
	// KIP-890 part 1).
	img, err := metadata.ApplyAll(base.cluster.Image(), []metadata.Record{
		&metadata.TopicRecord{Name: txn.StateTopic, ID: metadata.UUID{8}},
		&metadata.PartitionRecord{TopicID: metadata.UUID{8}, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := base.cfg
	cfg.Transactions = verifyingTxns{}
	h := New(cfg, fakeCluster{img: img}, base.replicas, groups, nil, base.log)
	commit := func(group string, parts map[string][]int32, order ...string) []string {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.SetVersion(3)
		req.TransactionalID, req.Group, req.ProducerID, req.Generation = "tx", group, 5, -1
		for _, topic := range order {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = topic
			for _, p := range parts[topic] {
				rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset = p, 1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		var got []string
		for _, rt := range serve(t, h, req).(*kmsg.TxnOffsetCommitResponse).Topics {
			for _, p := range rt.Partitions {
				got = append(got, fmt.Sprintf("%s/%d=%v", rt.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode)))
			}
		}
		slices.Sort(got)
		return got
	}
	parts := map[string][]int32{"t": {0, 9}, "secret": {0}, "nope": {1}}
	got := commit("other", parts, "t", "secret", "nope")
	denied := kerr.GroupAuthorizationFailed
	if want := []string{"nope/1=" + denied.Error(), "secret/0=" + denied.Error(), "t/0=" + denied.Error(), "t/9=" + denied.Error()}; !slices.Equal(got, want) {
		t.Errorf("group denied: %q, want %q", got, want)
	}
	got = commit("g", parts, "t", "secret", "nope")
	unknown, topicDenied := kerr.UnknownTopicOrPartition.Error(), kerr.TopicAuthorizationFailed.Error()
	if want := []string{"nope/1=" + unknown, "secret/0=" + topicDenied, "t/0=<nil>", "t/9=" + unknown}; !slices.Equal(got, want) {
		t.Errorf("mixed partitions: %q, want %q", got, want)
	}
	if !slices.Equal(groups.got, []string{"t/0"}) {
		t.Errorf("the coordinator committed %v, want only t/0", groups.got)
	}
}

// codeTxns is a transaction coordinator whose AddPartitions answers code.
type codeTxns struct {
	Transactions
	code int16
}

func (c *codeTxns) AddPartitions(context.Context, string, int64, int16, []txn.TopicPartition) int16 {
	return c.code
}

// TestAddOffsetsToTxnVersions: AddOffsetsToTxn answers the coordinator's code at
// every version but PRODUCER_FENCED before v2 (INVALID_PRODUCER_EPOCH); v4 is
// answered as v3, as a Kafka 4.4 node answered fenced, current, unknown and
// empty transactional ids side by side.
func TestAddOffsetsToTxnVersions(t *testing.T) {
	fenced, epoch := kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code
	mapping, abortable := kerr.InvalidProducerIDMapping.Code, kerr.TransactionAbortable.Code
	txns := &codeTxns{}
	h := newErrorsHandlersWith(t, Config{Transactions: txns})
	for _, tc := range []struct {
		version int16
		id      string
		coord   int16 // the coordinator's answer
		want    int16
	}{
		{1, "tx", fenced, epoch},
		{3, "tx", fenced, fenced},
		{4, "tx", fenced, fenced},
		{4, "tx", 0, 0},
		{4, "tx", mapping, mapping},
		{4, "tx", abortable, abortable},
		{4, "tx", kerr.ConcurrentTransactions.Code, kerr.ConcurrentTransactions.Code},
		{4, "", 0, kerr.InvalidRequest.Code},
	} {
		txns.code = tc.coord
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.SetVersion(tc.version)
		req.TransactionalID, req.ProducerID, req.Group = tc.id, 5, "g"
		if got := serve(t, h, req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; got != tc.want {
			t.Errorf("v%d id %q, coordinator %v: %v, want %v", tc.version, tc.id,
				kerr.ErrorForCode(tc.coord), kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
}

// TestInitProducerIDWithoutBlock: an idempotent producer's InitProducerId
// that finds no producer id block to hand out from (the controller could not
// allocate one) is answered COORDINATOR_LOAD_IN_PROGRESS, as Kafka's
// RPCProducerIdManager answers it (retriable for every client version); it
// was COORDINATOR_NOT_AVAILABLE.
func TestInitProducerIDWithoutBlock(t *testing.T) {
	h := newErrorsHandlers(t)
	h.cluster = noProducerIDs{h.cluster}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp := serve(t, h, req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code || resp.ProducerID != -1 || resp.ProducerEpoch != -1 {
		t.Fatalf("InitProducerId without a producer id block: code %v, producer %d epoch %d; want COORDINATOR_LOAD_IN_PROGRESS, -1, -1",
			kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
	}
}

// noProducerIDs is a cluster whose controller allocates no producer ids.
type noProducerIDs struct{ Cluster }

func (noProducerIDs) AllocateProducerIDs(context.Context, int32, int64) (controller.ProducerIDBlock, error) {
	return controller.ProducerIDBlock{}, errors.New("no producer ids")
}

// TestInitProducerIDHalfGiven: an InitProducerId v3+ that gives a producer id
// without an epoch, or an epoch without a producer id, is INVALID_REQUEST, as
// Kafka 4.4's handleInitProducerIdRequest answers it (both -1: none given),
// with a transactional id or without; the coordinator never sees it.
func TestInitProducerIDHalfGiven(t *testing.T) {
	txns := &recordingTxns{}
	h := newErrorsHandlersWith(t, Config{Transactions: txns})
	id := "tx"
	for _, tc := range []struct {
		name  string
		txnID *string
		pid   int64
		epoch int16
	}{
		{"transactional, producer id alone", &id, 5, -1},
		{"transactional, epoch alone", &id, -1, 3},
		{"idempotent, producer id alone", nil, 5, -1},
		{"idempotent, epoch alone", nil, -1, 3},
	} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.SetVersion(4)
		req.TransactionalID, req.TransactionTimeoutMillis = tc.txnID, 60000
		req.ProducerID, req.ProducerEpoch = tc.pid, tc.epoch
		resp := serve(t, h, req).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != kerr.InvalidRequest.Code || resp.ProducerID != -1 {
			t.Errorf("%s: code %v, producer %d, want INVALID_REQUEST, -1", tc.name, kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID)
		}
	}
	if txns.calls != 0 {
		t.Fatalf("the coordinator saw %d requests", txns.calls)
	}
}
