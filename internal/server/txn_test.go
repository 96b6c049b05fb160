package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/txn"
	"github.com/strata-stream/strata/internal/txntest"
	"github.com/strata-stream/strata/internal/wait"
)

// TestReadCommittedWithMarkers drives the partition side of transactions through
// the Kafka API: two producers write transactional batches (raw Produce), one
// plain record follows, and WriteTxnMarkers commits one transaction and aborts the
// other. franz-go's read_committed consumer must see nothing while both are open,
// then the committed records and the plain one but never the aborted ones;
// read_uncommitted sees every data record; ListOffsets follows the isolation level.
func TestReadCommittedWithMarkers(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, nodeConfig(t.TempDir()))
	cl, adm := n.client(t, kgo.ClientID(txntest.ClientID))
	const topic = "txn"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	pidOf := func() int64 {
		t.Helper()
		pid, err := txntest.ProducerID(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	produce := func(pid int64, seq int32, transactional bool, values ...string) {
		t.Helper()
		if err := txntest.Produce(ctx, cl, topic, 0, pid, seq, transactional, values...); err != nil {
			t.Fatal(err)
		}
	}
	endTxn := func(pid int64, commit bool) {
		t.Helper()
		if err := txntest.EndTxn(ctx, cl, topic, 0, pid, commit); err != nil {
			t.Fatal(err)
		}
	}
	latest := func(iso int8) int64 {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.IsolationLevel = iso
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("ListOffsets: %v %+v", err, resp)
		}
		return resp.Topics[0].Partitions[0].Offset
	}

	committer, aborter := pidOf(), pidOf()
	produce(committer, 0, true, "c0", "c1")
	produce(aborter, 0, true, "a0", "a1")
	produce(committer, 2, true, "c2")
	produce(pidOf(), 0, false, "plain")
	if got, want := latest(1), int64(0); got != want {
		t.Fatalf("read_committed end offset %d while both transactions are open, want %d", got, want)
	}
	if got, want := latest(0), int64(6); got != want {
		t.Fatalf("read_uncommitted end offset %d, want %d", got, want)
	}
	if got := pollFor(t, n.KafkaAddr(), topic, kgo.ReadCommitted(), 0, 2*time.Second); len(got) != 0 {
		t.Fatalf("read_committed consumer saw %v while both transactions were open", got)
	}

	endTxn(aborter, false)
	endTxn(committer, true)
	if got, want := latest(1), int64(8); got != want {
		t.Fatalf("read_committed end offset %d after both markers, want %d", got, want)
	}
	want := []string{"c0", "c1", "c2", "plain"}
	if got := pollFor(t, n.KafkaAddr(), topic, kgo.ReadCommitted(), len(want), 20*time.Second); !slices.Equal(got, want) {
		t.Fatalf("read_committed consumer saw %v, want %v", got, want)
	}
	all := []string{"a0", "a1", "c0", "c1", "c2", "plain"}
	if got := pollFor(t, n.KafkaAddr(), topic, kgo.ReadUncommitted(), len(all), 20*time.Second); !slices.Equal(got, all) {
		t.Fatalf("read_uncommitted consumer saw %v, want %v", got, all)
	}
}

// pollFor consumes topic from the start with the isolation level until it has
// want values (or, with want 0, for wait) and returns the values read, sorted.
func pollFor(t *testing.T, addr, topic string, iso kgo.IsolationLevel, want int, wait time.Duration) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var got []string
	for want == 0 || len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch: %v", fmt.Errorf("%s[%d]: %w", e.Topic, e.Partition, e.Err))
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	return got
}

// TestTransactionalProducer: franz-go's transactional producer against the
// coordinator: committed transactions become visible to read_committed
// consumers, aborted ones never; a second producer with the same transactional
// id fences the first.
func TestTransactionalProducer(t *testing.T) {
	ctx := context.Background()
	cfg := nodeConfig(t.TempDir())
	cfg.TransactionStatePartitions = 3
	n := startNode(t, cfg)
	_, adm := n.client(t)
	const topic = "eos"
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod, _ := n.client(t, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(30*time.Second))
	run := func(commit bool, values ...string) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction (commit %v): %v", commit, err)
		}
	}
	run(true, "a", "b", "c")
	run(false, "x", "y")
	run(true, "d")

	want := []string{"a", "b", "c", "d"}
	if got := pollFor(t, n.KafkaAddr(), topic, kgo.ReadCommitted(), len(want), 20*time.Second); !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v, want %v", got, want)
	}
	all := []string{"a", "b", "c", "d", "x", "y"}
	if got := pollFor(t, n.KafkaAddr(), topic, kgo.ReadUncommitted(), len(all), 20*time.Second); !slices.Equal(got, all) {
		t.Fatalf("read_uncommitted saw %v, want %v", got, all)
	}

	// A new incarnation fences the old one.
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	next, _ := n.client(t, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic(topic))
	if err := next.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := next.ProduceSync(ctx, &kgo.Record{Value: []byte("e")}).FirstErr(); err != nil {
		t.Fatalf("new incarnation: %v", err)
	}
	if err := next.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer committed")
	}
	want = []string{"a", "b", "c", "d", "e"}
	if got := pollFor(t, n.KafkaAddr(), topic, kgo.ReadCommitted(), len(want), 20*time.Second); !slices.Equal(got, want) {
		t.Fatalf("after fencing, read_committed saw %v, want %v", got, want)
	}
}

// TestTransactionAdmin: ListTransactions, DescribeTransactions and
// DescribeProducers (kadm, as kafka-transactions.sh uses them) show an open
// transaction, and no longer show it open once it commits.
func TestTransactionAdmin(t *testing.T) {
	ctx := context.Background()
	cfg := nodeConfig(t.TempDir())
	cfg.TransactionStatePartitions = 3
	n := startNode(t, cfg)
	_, adm := n.client(t)
	const topic = "admin-txn"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod, _ := n.client(t, kgo.TransactionalID("tx-admin"), kgo.DefaultProduceTopic(topic))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		t.Fatal(err)
	}
	lt, ok := listed["tx-admin"]
	if !ok || lt.State != "Ongoing" || lt.ProducerID < 0 {
		t.Fatalf("ListTransactions: %+v", listed)
	}
	if other, err := adm.ListTransactions(ctx, nil, []string{"CompleteCommit"}); err != nil || len(other) != 0 {
		t.Fatalf("ListTransactions(CompleteCommit) = %+v, %v", other, err)
	}
	described, err := adm.DescribeTransactions(ctx, "tx-admin", "no-such-id")
	if err != nil {
		t.Fatal(err)
	}
	d := described["tx-admin"]
	if d.Err != nil || d.State != "Ongoing" || d.ProducerID != lt.ProducerID || d.StartTimestamp <= 0 {
		t.Fatalf("DescribeTransactions: %+v", d)
	}
	if ps, ok := d.Topics[topic]; !ok || len(ps) != 1 {
		t.Fatalf("DescribeTransactions partitions: %+v", d.Topics)
	}
	if e := described["no-such-id"].Err; !errors.Is(e, kerr.TransactionalIDNotFound) {
		t.Fatalf("unknown id: %v", e)
	}
	producers, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var found *kadm.DescribedProducer
	for _, p := range producers.SortedProducers() {
		if p.ProducerID == lt.ProducerID {
			found = &p
		}
	}
	if found == nil || found.CurrentTxnStartOffset != 0 || found.LastSequence != 2 {
		t.Fatalf("DescribeProducers: %+v", producers.SortedProducers())
	}

	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the transaction completes", func() bool {
		described, err := adm.DescribeTransactions(ctx, "tx-admin")
		return err == nil && described["tx-admin"].State == "CompleteCommit"
	})
	producers, err = adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range producers.SortedProducers() {
		if p.CurrentTxnStartOffset != -1 {
			t.Fatalf("producer still in a transaction after the commit: %+v", p)
		}
	}
}

// TestGroupTransactSession: franz-go's read-process-write loop. Each input record
// is copied to the output topic in a transaction that also commits the group's
// offsets; the first transaction is aborted. At the end the output holds every
// input exactly once (read_committed) and the group's committed offset is the
// input's end: offsets moved exactly with the committed transactions, and stay
// there when the coordinator replays the log after a restart.
func TestGroupTransactSession(t *testing.T) {
	ctx := context.Background()
	cfg := nodeConfig(t.TempDir())
	cfg.TransactionStatePartitions = 3
	cfg.OffsetsTopicPartition = 3
	cfg.GroupInitialDelay = 0
	n := startNode(t, cfg)
	cl, adm := n.client(t, kgo.DefaultProduceTopic("in"))
	for _, topic := range []string{"in", "out"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	const total = 30
	for i := range total {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%02d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(n.KafkaAddr()),
		kgo.TransactionalID("etl"), kgo.ConsumerGroup("etl-group"), kgo.ConsumeTopics("in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic("out"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	pollCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	aborted := false
	for copied := 0; copied < total; {
		fs := sess.PollFetches(pollCtx)
		if pollCtx.Err() != nil {
			t.Fatalf("the loop did not finish: %v", pollCtx.Err())
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(pollCtx, &kgo.Record{Value: r.Value}, nil)
		})
		commit := kgo.TryCommit
		if !aborted && len(fs.Records()) > 0 {
			commit, aborted = kgo.TryAbort, true
		}
		committed, err := sess.End(pollCtx, commit)
		if err != nil {
			t.Fatalf("end: %v", err)
		}
		if committed {
			copied += len(fs.Records())
		}
	}
	wait.For(t, "the group's offset reaches the input's end", func() bool {
		committed, err := adm.FetchOffsets(ctx, "etl-group")
		o, ok := committed.Lookup("in", 0)
		return err == nil && ok && o.At == total
	})
	if !aborted {
		t.Fatal("no transaction was aborted")
	}
	got := pollFor(t, n.KafkaAddr(), "out", kgo.ReadCommitted(), total, 20*time.Second)
	for i, v := range got {
		if want := fmt.Sprintf("v%02d", i); v != want {
			t.Fatalf("output %v: position %d is %q, want every input exactly once", got, i, v)
		}
	}
	if len(got) != total {
		t.Fatalf("output has %d records, want %d", len(got), total)
	}

	// A restarted coordinator replays the transactional commit at its marker.
	sess.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, cfg)
	_, adm = n.client(t)
	wait.For(t, "the replayed group offset", func() bool {
		committed, err := adm.FetchOffsets(ctx, "etl-group")
		o, ok := committed.Lookup("in", 0)
		return err == nil && ok && o.At == total
	})
}

// TestWriteTxnMarkersVersion2: over the wire, a WriteTxnMarkers v2 marker of
// transaction version 2 at the producer's epoch on the partition while its
// transaction is open there (a late marker: KIP-1228) is INVALID_PRODUCER_EPOCH
// and leaves the log and the open transaction as they were; one above it ends
// the transaction, and the same marker sent again, with no transaction open,
// is written again and answered, as Kafka 4.4's checkProducerEpoch allows a
// retried marker.
func TestWriteTxnMarkersVersion2(t *testing.T) {
	ctx := context.Background()
	cfg := nodeConfig(t.TempDir())
	cfg.TransactionStatePartitions = 1
	n := startNode(t, cfg)
	cl, adm := n.client(t, kgo.ClientID(txntest.ClientID))
	const topic = "tv2markers"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	pid, err := txntest.ProducerID(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	ends := func() (int64, int64) {
		t.Helper()
		hwm, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		lso, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := hwm.Lookup(topic, 0)
		l, _ := lso.Lookup(topic, 0)
		return h.Offset, l.Offset
	}
	if err := txntest.ProduceAs(ctx, cl, topic, 0, pid, 2, 0, true, "a"); err != nil {
		t.Fatal(err)
	}
	if err := txntest.EndTxnV2(ctx, cl, topic, 0, pid, 2, true); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("version 2 marker at the open transaction's epoch: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if end, stable := ends(); end != 1 || stable != 0 {
		t.Fatalf("log end %d, last stable offset %d after the refused marker, want 1 and 0", end, stable)
	}
	if err := txntest.EndTxnV2(ctx, cl, topic, 0, pid, 3, true); err != nil {
		t.Fatalf("version 2 marker above the epoch: %v", err)
	}
	if end, stable := ends(); end != 2 || stable != 2 {
		t.Fatalf("log end %d, last stable offset %d after the commit, want 2 and 2", end, stable)
	}
	if err := txntest.EndTxnV2(ctx, cl, topic, 0, pid, 3, true); err != nil {
		t.Fatalf("the marker again: %v, want it written again", err)
	}
	if end, stable := ends(); end != 3 || stable != 3 {
		t.Fatalf("log end %d, last stable offset %d after the repeated marker, want 3 and 3", end, stable)
	}
}

// TestWriteTxnMarkersCoordinatorFenced: a partition refuses a marker from an
// older coordinator epoch than its producer's last marker there
// (TRANSACTION_COORDINATOR_FENCED: a deposed coordinator's late marker) and
// its log and open transaction are unchanged; DescribeProducers shows the
// coordinator epoch (what kafka-transactions.sh abort sends back), and the
// markers a coordinator writes carry its __transaction_state leader epoch.
func TestWriteTxnMarkersCoordinatorFenced(t *testing.T) {
	ctx := context.Background()
	cfg := nodeConfig(t.TempDir())
	cfg.TransactionStatePartitions = 1
	n := startNode(t, cfg)
	cl, adm := n.client(t, kgo.ClientID(txntest.ClientID))
	const topic = "fenced"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	pid, err := txntest.ProducerID(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	coordinatorEpoch := func(pid int64) int32 {
		t.Helper()
		req := kmsg.NewPtrDescribeProducersRequest()
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("DescribeProducers: %v %+v", err, resp)
		}
		for _, ap := range resp.Topics[0].Partitions[0].ActiveProducers {
			if ap.ProducerID == pid {
				return ap.CoordinatorEpoch
			}
		}
		t.Fatalf("producer %d not described", pid)
		return 0
	}
	logEnd := func() int64 {
		t.Helper()
		offsets, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := offsets.Lookup(topic, 0)
		return o.Offset
	}
	if err := txntest.Produce(ctx, cl, topic, 0, pid, 0, true, "a"); err != nil {
		t.Fatal(err)
	}
	if err := txntest.EndTxnAt(ctx, cl, topic, 0, pid, 5, true); err != nil {
		t.Fatalf("marker at coordinator epoch 5: %v", err)
	}
	if got := coordinatorEpoch(pid); got != 5 {
		t.Fatalf("DescribeProducers coordinator epoch %d, want 5", got)
	}
	if err := txntest.Produce(ctx, cl, topic, 0, pid, 1, true, "b"); err != nil {
		t.Fatal(err)
	}
	end := logEnd()
	if err := txntest.EndTxnAt(ctx, cl, topic, 0, pid, 4, false); !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Fatalf("marker at coordinator epoch 4 after 5: %v, want TRANSACTION_COORDINATOR_FENCED", err)
	}
	if got := logEnd(); got != end {
		t.Fatalf("the refused marker moved the log end from %d to %d", end, got)
	}
	if err := txntest.EndTxnAt(ctx, cl, topic, 0, pid, 5, true); err != nil {
		t.Fatalf("marker at coordinator epoch 5: %v", err)
	}
	if got, want := pollFor(t, n.KafkaAddr(), topic, kgo.ReadCommitted(), 2, 20*time.Second), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v, want %v", got, want)
	}

	// A coordinator's own markers carry the leader epoch of its partition.
	prod, _ := n.client(t, kgo.TransactionalID("fenced-tx"), kgo.DefaultProduceTopic(topic))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("c")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	state := n.ctrl.Image().Partition(txn.StateTopic, 0)
	desc, err := adm.DescribeTransactions(ctx, "fenced-tx")
	if err != nil || state == nil {
		t.Fatalf("describing: %v (state partition %v)", err, state)
	}
	d, _ := desc.On("fenced-tx", nil)
	wait.For(t, "the coordinator's marker", func() bool { return coordinatorEpoch(d.ProducerID) == state.LeaderEpoch })
}
