package handlers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/txn"
)

// remoteTxnCoordinator is the transaction coordinator on broker 2, as a leader
// on broker 1 reaches it (Config.AddToRemoteTxn): it records every request and
// answers each partition with refuse's code for it (0: in the transaction).
type remoteTxnCoordinator struct {
	mu     sync.Mutex
	reqs   []*kmsg.AddPartitionsToTxnRequest
	refuse map[string]int16 // "topic/partition" -> code
}

func (r *remoteTxnCoordinator) AddPartitionsToTxn(_ context.Context, broker int32, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if broker != 2 {
		return nil, fmt.Errorf("sent to broker %d, the coordinator is 2", broker)
	}
	r.reqs = append(r.reqs, req)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, rt := range req.Transactions {
		st := kmsg.NewAddPartitionsToTxnResponseTransaction()
		st.TransactionalID = rt.TransactionalID
		for _, t := range rt.Topics {
			tt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			tt.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				sp.Partition, sp.ErrorCode = p, r.refuse[fmt.Sprintf("%s/%d", t.Topic, p)]
				tt.Partitions = append(tt.Partitions, sp)
			}
			st.Topics = append(st.Topics, tt)
		}
		resp.Transactions = append(resp.Transactions, st)
	}
	return resp, nil
}

// asked lists what the coordinator was asked since the last call: one string
// per request, its VerifyOnly flag and partitions.
func (r *remoteTxnCoordinator) asked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, req := range r.reqs {
		for _, rt := range req.Transactions {
			s := fmt.Sprintf("verify=%v", rt.VerifyOnly)
			for _, t := range rt.Topics {
				for _, p := range t.Partitions {
					s += fmt.Sprintf(" %s/%d", t.Topic, p)
				}
			}
			out = append(out, s)
		}
	}
	r.reqs = nil
	return out
}

var verifyTopicID = metadata.UUID{7}

// newTxnVerifyHandlers is broker 1 (newErrorsHandlers' broker) also leading
// v-0, v-1 and v-2, with the transaction coordinator (__transaction_state) on
// broker 2, reached through coord. groups serves the group APIs (nil: none).
func newTxnVerifyHandlers(t *testing.T, coord *remoteTxnCoordinator, groups Groups) (*Handlers, *replica.Manager) {
	t.Helper()
	base := newErrorsHandlers(t)
	img, err := metadata.ApplyAll(base.cluster.Image(), []metadata.Record{
		&metadata.TopicRecord{Name: "v", ID: verifyTopicID},
		&metadata.PartitionRecord{TopicID: verifyTopicID, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		&metadata.PartitionRecord{TopicID: verifyTopicID, Partition: 1, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		&metadata.PartitionRecord{TopicID: verifyTopicID, Partition: 2, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		&metadata.TopicRecord{Name: txn.StateTopic, ID: metadata.UUID{8}},
		&metadata.PartitionRecord{TopicID: metadata.UUID{8}, Partition: 0, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	img = img.WithOffset(2)
	if err := base.replicas.Apply(img); err != nil {
		t.Fatal(err)
	}
	cfg := base.cfg
	cfg.Transactions, cfg.AddToRemoteTxn = &recordingTxns{}, coord.AddPartitionsToTxn
	return New(cfg, fakeCluster{img: img}, base.replicas, groups, nil, base.log), base.replicas
}

// txnProduce is a Produce of version with transactional id "tx" and, per
// partition of topic v, one transactional batch of producer pid at epoch
// starting at sequence seq[partition].
func txnProduce(version int16, pid int64, epoch int16, seq map[int32]int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	id := "tx"
	req.TransactionID, req.Acks, req.TimeoutMillis = &id, 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "v"
	for _, p := range slices.Sorted(mapsKeys(seq)) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p
		rp.Records = batchtest.Build(batchtest.Options{Idempotent: true, ProducerID: pid, ProducerEpoch: epoch,
			BaseSequence: seq[p], Attributes: 0x10}) // transactional
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func mapsKeys(m map[int32]int32) func(func(int32) bool) {
	return func(yield func(int32) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// produceCodes is each partition's answer, "v/p=code".
func produceCodes(resp kmsg.Response) []string {
	var out []string
	for _, t := range resp.(*kmsg.ProduceResponse).Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s/%d=%v", t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode)))
		}
	}
	slices.Sort(out)
	return out
}

// TestProduceVerificationBatched: the transactional batches of one Produce
// v11 for several partitions are verified with the coordinator in one
// VerifyOnly request (it used to be one per partition); each partition gets
// its own answer (a partition not in the transaction is refused, the others
// appended). Batches of transactions open on their partitions ask nothing;
// Produce v12's implicit adds are batched the same way; batches of two
// producers in one request are INVALID_PRODUCER_ID_MAPPING, as Kafka answers.
func TestProduceVerificationBatched(t *testing.T) {
	coord := &remoteTxnCoordinator{refuse: map[string]int16{"v/2": kerr.TransactionAbortable.Code}}
	h, m := newTxnVerifyHandlers(t, coord, nil)
	ok, abortable := "<nil>", kerr.TransactionAbortable.Error()

	got := produceCodes(serve(t, h, txnProduce(11, 7, 0, map[int32]int32{0: 0, 1: 0, 2: 0})))
	if want := []string{"v/0=" + ok, "v/1=" + ok, "v/2=" + abortable}; !slices.Equal(got, want) {
		t.Fatalf("Produce v11: %v, want %v", got, want)
	}
	if asked, want := coord.asked(), []string{"verify=true v/0 v/1 v/2"}; !slices.Equal(asked, want) {
		t.Fatalf("the coordinator was asked %q, want one request for the three partitions %q", asked, want)
	}
	for p, want := range map[int32]int64{0: 1, 1: 1, 2: 0} {
		part, err := m.Partition("v", p)
		if err != nil {
			t.Fatal(err)
		}
		if end := part.LogEndOffset(); end != want {
			t.Errorf("v-%d ends at %d, want %d", p, end, want)
		}
	}

	// The transaction is open on v-0 and v-1: nothing to ask.
	got = produceCodes(serve(t, h, txnProduce(11, 7, 0, map[int32]int32{0: 1, 1: 1})))
	if want := []string{"v/0=" + ok, "v/1=" + ok}; !slices.Equal(got, want) {
		t.Fatalf("second Produce v11: %v, want %v", got, want)
	}
	if asked := coord.asked(); len(asked) != 0 {
		t.Fatalf("the coordinator was asked %q about a transaction open on both partitions, want nothing", asked)
	}

	// Produce v12, another producer: its partitions are added in one request.
	delete(coord.refuse, "v/2")
	got = produceCodes(serve(t, h, txnProduce(12, 8, 0, map[int32]int32{0: 0, 1: 0, 2: 0})))
	if want := []string{"v/0=" + ok, "v/1=" + ok, "v/2=" + ok}; !slices.Equal(got, want) {
		t.Fatalf("Produce v12: %v, want %v", got, want)
	}
	if asked, want := coord.asked(), []string{"verify=false v/0 v/1 v/2"}; !slices.Equal(asked, want) {
		t.Fatalf("the coordinator was asked %q, want one add of the three partitions %q", asked, want)
	}

	// Two producers in one request.
	req := txnProduce(11, 9, 0, map[int32]int32{0: 0})
	other := txnProduce(11, 10, 0, map[int32]int32{1: 0})
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, other.Topics[0].Partitions...)
	mapping := kerr.InvalidProducerIDMapping.Error()
	if got, want := produceCodes(serve(t, h, req)), []string{"v/0=" + mapping, "v/1=" + mapping}; !slices.Equal(got, want) {
		t.Fatalf("two producers: %v, want %v", got, want)
	}
	if asked := coord.asked(); len(asked) != 0 {
		t.Fatalf("the coordinator was asked %q for a request of two producers, want nothing", asked)
	}
}

// guardGroups commits every transactional offset commit it is given and
// notes whether its context carried a verification guard.
type guardGroups struct {
	txnCommittingGroups
	commits, guarded int
}

func (g *guardGroups) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	g.commits++
	if _, ok := replica.VerificationGuardFrom(ctx); ok {
		g.guarded++
	}
	return g.txnCommittingGroups.TxnOffsetCommit(ctx, req)
}

// TestTxnOffsetCommitVerification: a TxnOffsetCommit of v4 or older is
// verified with the transaction coordinator before the group coordinator
// writes it (KIP-890 part 1, as Kafka 4 does for older clients): one
// VerifyOnly request for the group's __consumer_offsets partition; a
// partition not in the transaction is INVALID_TXN_STATE to v3 and
// TRANSACTION_ABORTABLE to v4, fencing INVALID_PRODUCER_EPOCH, and the group
// coordinator writes nothing; once confirmed it writes with the guard.
func TestTxnOffsetCommitVerification(t *testing.T) {
	coord := &remoteTxnCoordinator{refuse: map[string]int16{}}
	groups := &guardGroups{}
	h, _ := newTxnVerifyHandlers(t, coord, groups)
	commit := func(version int16) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.SetVersion(version)
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "tx", "g", 7, 0, -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "v"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 5
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := serve(t, h, req).(*kmsg.TxnOffsetCommitResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: answer %+v, want one partition", version, resp.Topics)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	offsets := "verify=true " + OffsetsTopic + "/0"
	for _, c := range []struct {
		version int16
		refuse  int16
		want    int16
	}{
		{3, kerr.TransactionAbortable.Code, kerr.InvalidTxnState.Code},
		{4, kerr.TransactionAbortable.Code, kerr.TransactionAbortable.Code},
		{4, kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code},
		{0, kerr.ConcurrentTransactions.Code, kerr.ConcurrentTransactions.Code},
	} {
		coord.refuse[OffsetsTopic+"/0"] = c.refuse
		if got := commit(c.version); got != c.want {
			t.Errorf("v%d, coordinator %v: %v, want %v", c.version, kerr.ErrorForCode(c.refuse), kerr.ErrorForCode(got), kerr.ErrorForCode(c.want))
		}
		if asked := coord.asked(); !slices.Equal(asked, []string{offsets}) {
			t.Errorf("v%d: the coordinator was asked %q, want %q", c.version, asked, offsets)
		}
	}
	if groups.commits != 0 {
		t.Fatalf("the group coordinator wrote %d refused commits", groups.commits)
	}
	delete(coord.refuse, OffsetsTopic+"/0")
	for _, version := range []int16{3, 4} {
		if got := commit(version); got != 0 {
			t.Errorf("v%d, in the transaction: %v", version, kerr.ErrorForCode(got))
		}
		if asked := coord.asked(); !slices.Equal(asked, []string{offsets}) {
			t.Errorf("v%d: the coordinator was asked %q, want %q", version, asked, offsets)
		}
	}
	if groups.commits != 2 || groups.guarded != 2 {
		t.Fatalf("the group coordinator wrote %d commits, %d with a guard; want 2 and 2", groups.commits, groups.guarded)
	}
}

// TestProduceNextTxnBehindMarker: a Produce v12 of a producer's next
// transaction (epoch bumped by its EndTxn v5) that its coordinator added
// while the previous transaction's marker is not on the partition yet (the
// overlap) is not appended ahead of that marker: without it the partition
// answers NOT_ENOUGH_REPLICAS (which clients retry) and the log is unchanged;
// once the marker is written, the retry is appended after it, opening the
// next transaction. Appended first, it joined the previous transaction and
// the version-2 marker was refused, leaving the partition's transaction open.
func TestProduceNextTxnBehindMarker(t *testing.T) {
	h, m := newTxnVerifyHandlers(t, &remoteTxnCoordinator{}, nil)
	ok := "<nil>"
	if got := produceCodes(serve(t, h, txnProduce(12, 7, 0, map[int32]int32{0: 0}))); !slices.Equal(got, []string{"v/0=" + ok}) {
		t.Fatalf("the previous transaction's produce: %v", got)
	}
	part, err := m.Partition("v", 0)
	if err != nil {
		t.Fatal(err)
	}
	leo := part.LogEndOffset()
	next := txnProduce(12, 7, 1, map[int32]int32{0: 0})
	if got, want := produceCodes(serve(t, h, next)), []string{"v/0=" + kerr.NotEnoughReplicas.Error()}; !slices.Equal(got, want) {
		t.Fatalf("the next transaction's produce before the marker: %v, want %v", got, want)
	}
	if part.LogEndOffset() != leo {
		t.Fatalf("log end %d after the refused batch, want %d", part.LogEndOffset(), leo)
	}
	mres, err := part.WriteTxnMarker(batch.Marker{ProducerID: 7, ProducerEpoch: 1, Commit: true}, 2)
	if err != nil {
		t.Fatalf("the previous transaction's marker: %v", err)
	}
	resp := serve(t, h, next).(*kmsg.ProduceResponse)
	if got := produceCodes(resp); !slices.Equal(got, []string{"v/0=" + ok}) {
		t.Fatalf("the retry after the marker: %v", got)
	}
	if base := resp.Topics[0].Partitions[0].BaseOffset; base != mres.LastOffset+1 || !part.InTxnAt(7, 1) {
		t.Fatalf("the next transaction's batch at %d (open at epoch 1: %v), want it after the marker at %d", base, part.InTxnAt(7, 1), mres.LastOffset)
	}
}

// TestProduceTransactionVersion2FirstSequence: a Produce v12's transactional
// batch from a producer with no batch on the partition must start at sequence
// 0 (OUT_OF_ORDER_SEQUENCE_NUMBER, as Kafka's partition leader answers a
// transaction of version 2), while v11 starts an unknown producer at any
// sequence.
func TestProduceTransactionVersion2FirstSequence(t *testing.T) {
	h, _ := newTxnVerifyHandlers(t, &remoteTxnCoordinator{}, nil)
	for _, tc := range []struct {
		version int16
		pid     int64
		want    string
	}{
		{12, 7, kerr.OutOfOrderSequenceNumber.Error()},
		{11, 8, "<nil>"},
	} {
		if got := produceCodes(serve(t, h, txnProduce(tc.version, tc.pid, 0, map[int32]int32{0: 3}))); !slices.Equal(got, []string{"v/0=" + tc.want}) {
			t.Errorf("v%d, first batch at sequence 3: %v, want %s", tc.version, got, tc.want)
		}
	}
}
