package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// FuzzTransactions plays sequences of a transactional client's requests,
// in any order and with any producer id, epoch and sequence, against one node
// on a filesystem whose power can be cut, and checks what Kafka's transactions
// promise against a model of what the node answered:
//
//   - every request is answered, with an error code Kafka knows, the node
//     never panics, and its /metrics gather;
//   - a record acknowledged in a transaction the node said it committed is
//     committed on its partition (and survives a power cut), one acknowledged
//     in a transaction it said it aborted (or that InitProducerId ended) never
//     is, and no record of an open transaction is committed;
//   - no record is in the log twice, and none the client never sent;
//   - read_committed returns exactly the committed and non-transactional
//     records below the last stable offset, which is never above an open
//     transaction's first record;
//   - once every transaction is ended, the last stable offset reaches the
//     high-water mark (no hanging transaction), and the offsets committed in
//     committed transactions are the groups' offsets.
//
// Each input uses its own transactional ids and groups; the topic is shared,
// each input reading it from where the previous one left it.
func FuzzTransactions(f *testing.F) {
	h := newTxnFuzz(f)
	for _, seed := range txnFuzzSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		h.inputs++
		r := &txnRun{h: h, t: t, input: h.inputs, ops: ops, fate: map[string]string{}, partitionOf: map[string]int32{},
			seq: map[seqKey]int32{}, groupOffsets: map[string]map[int32]int64{}, unsureGroups: map[string]bool{}}
		for i := range r.ids {
			r.ids[i] = &txnID{name: fmt.Sprintf("t%d-%d", r.input, i)}
		}
		for p := range r.start {
			r.start[p] = r.endOffsets(int32(p), 0)
		}
		r.findCoordinators()
		r.play()
		r.finish()
	})
}

// The operations of a sequence, one byte each (modulo txnOpCount), each followed
// by the bytes of its parameters.
const (
	opInit = iota
	opInitAgain
	opAddPartitions
	opAddPartitionsBatched
	opProduce
	opProduceAgain
	opProduceThird
	opProducePlain
	opAddOffsets
	opTxnOffsetCommit
	opEndTxn
	opEndTxnAgain
	opCheck
	opDescribe
	opPowerCut
	opCheckAgain
	txnOpCount
)

// txnFuzzSeeds are sequences worth starting from: a transaction-version-1
// commit (AddPartitionsToTxn, Produce v11, EndTxn v4), a version-2 commit
// (Produce v12 adds the partition, EndTxn v5), an abort with offsets, and a
// power cut right after a commit and again in an open transaction.
var txnFuzzSeeds = [][]byte{
	{opInit, 0, 0, opAddPartitions, 0, 0, 3, opProduce, 0, 0, 0, 0, opProduce, 0, 0, 1, 0, opEndTxn, 0, 0, 1, opCheck},
	{opInit, 1, 0, opProduce, 1, 0, 2, 0, opProduce, 1, 0, 3, 0x40, opEndTxn, 1, 0, 3, opProduce, 1, 0, 2, 0, opEndTxn, 1, 0, 2},
	{opInit, 0, 0, opAddPartitions, 0, 0, 1, opProduce, 0, 0, 0, 0, opAddOffsets, 0, 0, 0, opTxnOffsetCommit, 0, 0, 0x15,
		opEndTxn, 0, 0, 0, opInit, 2, 0, opAddOffsets, 2, 0, 0, opTxnOffsetCommit, 2, 0, 0x29, opEndTxn, 2, 0, 1},
	{opInit, 1, 0, opProduce, 1, 0, 2, 0, opEndTxn, 1, 0, 3, opPowerCut, opProduce, 1, 0, 3, 0, opPowerCut, opCheck,
		opInit, 1, 0x10, opProduce, 1, 0, 2, 0, opEndTxn, 1, 0, 3},
}

// txnFuzz is the node the inputs share, restarted on what a power cut leaves.
type txnFuzz struct {
	cfg    config.Config
	fs     *vfs.MemFS
	node   *Node
	panics *panicRecorder
	inputs int
}

const txnFuzzTopic = "txf"

// txnFuzzWait bounds every wait of an input, under the 10 s after which the
// fuzzing engine takes a worker for hung (and reports no message).
const txnFuzzWait = 8 * time.Second

func newTxnFuzz(f *testing.F) *txnFuzz {
	cfg := nodeConfig(f.TempDir())
	// Few internal partitions: the first input creates them, within its wait
	// also on a busy machine with the race detector.
	cfg.TransactionStatePartitions, cfg.OffsetsTopicPartition = 1, 2
	h := &txnFuzz{cfg: cfg, fs: vfs.NewMem(), panics: &panicRecorder{}}
	h.start(f)
	f.Cleanup(func() { h.node.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.node.KafkaAddr()))
	if err != nil {
		f.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 2, 1, nil, txnFuzzTopic); err != nil {
		f.Fatal(err)
	}
	return h
}

func (h *txnFuzz) start(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, h.cfg, slog.New(h.panics), h.fs)
	if err != nil {
		tb.Fatal(err)
	}
	h.node = n
}

// powerCut restarts the node on what a power cut at this instant leaves.
func (h *txnFuzz) powerCut(tb testing.TB) {
	cut := h.fs.CrashClone()
	h.node.Close()
	h.fs = cut
	h.start(tb)
}

// txnID is the model of one transactional id: its producer id and epoch as
// the node last gave them, the records acknowledged in its open transaction
// and the offsets committed in it.
type txnID struct {
	name    string
	known   bool
	pid     int64
	epoch   int16
	open    []string
	pending map[string]map[int32]int64 // group -> partition -> offset
}

type seqKey struct {
	pid       int64
	epoch     int16
	partition int32
}

// The fates a record can have.
const (
	fateOpen      = "open" // acknowledged in a transaction not ended
	fateCommitted = "committed"
	fateAborted   = "aborted"
	fatePlain     = "plain"   // acknowledged, not transactional
	fateUnknown   = "unknown" // sent, with an answer that does not settle it
)

// txnRun is one input: its operations and the model of what the node said.
type txnRun struct {
	h     *txnFuzz
	t     *testing.T
	input int
	ops   []byte
	ids   [3]*txnID
	start [2]int64 // the partitions' high-water marks when the input began
	acked [2]int64 // the end of the last batch acknowledged on each partition
	next  int      // the next record value's number

	fate         map[string]string // record value -> what the node's answers say of it
	partitionOf  map[string]int32
	seq          map[seqKey]int32 // the next sequence of each producer, epoch and partition
	groupOffsets map[string]map[int32]int64
	unsureGroups map[string]bool // offsets committed with answers that do not settle them
}

func (r *txnRun) byte() byte {
	if len(r.ops) == 0 {
		return 0
	}
	b := r.ops[0]
	r.ops = r.ops[1:]
	return b
}

func (r *txnRun) play() {
	for steps := 0; len(r.ops) > 0 && steps < 40; steps++ {
		switch r.byte() % txnOpCount {
		case opInit, opInitAgain:
			r.initProducerID(r.id(r.byte()), r.byte())
		case opAddPartitions:
			r.addPartitions(r.byte(), r.byte(), r.byte())
		case opAddPartitionsBatched:
			r.addPartitionsBatched(r.byte(), r.byte(), r.byte())
		case opProduce, opProduceAgain, opProduceThird:
			r.produce(r.byte(), r.byte(), r.byte(), r.byte())
		case opProducePlain:
			r.producePlain(r.byte())
		case opAddOffsets:
			r.addOffsets(r.byte(), r.byte(), r.byte())
		case opTxnOffsetCommit:
			r.txnOffsetCommit(r.byte(), r.byte(), r.byte())
		case opEndTxn, opEndTxnAgain:
			r.endTxn(r.byte(), r.byte(), r.byte())
		case opCheck, opCheckAgain:
			r.check(false)
		case opDescribe:
			r.describe()
		case opPowerCut:
			r.h.powerCut(r.t)
			r.findCoordinators()
		}
		if _, err := r.h.node.metrics.Registry().Gather(); err != nil {
			r.t.Fatalf("/metrics no longer gathers: %v", err)
		}
	}
}

func (r *txnRun) id(b byte) *txnID { return r.ids[int(b)%len(r.ids)] }

// producer picks the producer id and epoch a request names: mostly the ones
// the node gave id, sometimes the epoch before or after it, another id's
// producer or one never given. current tells whether they are id's own.
func (r *txnRun) producer(id *txnID, b byte) (pid int64, epoch int16, current bool) {
	pid, epoch = id.pid, id.epoch
	if !id.known {
		pid, epoch = 424242, 0
	}
	switch {
	case b&0x80 != 0:
		other := r.ids[(int(b>>4)&1+1+slices.Index(r.ids[:], id))%len(r.ids)]
		return other.pid, other.epoch, false
	case b%8 == 6:
		return pid, epoch - 1, false
	case b%8 == 7:
		return pid, epoch + 1, false
	}
	return pid, epoch, id.known
}

// send sends req at its version and wants an answer and no panic.
func (r *txnRun) send(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	resp, err := roundTrip(r.h.node.KafkaAddr(), req, txnFuzzWait)
	if p := r.h.panics.take(); p != "" {
		r.t.Fatalf("%s v%d: the node panicked: %s", kmsg.NameForKey(req.Key()), req.GetVersion(), p)
	}
	if err != nil {
		r.t.Fatalf("%s v%d: no answer: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// known wants code to be one of Kafka's, and not UNKNOWN_SERVER_ERROR.
func (r *txnRun) known(what string, code int16) {
	r.t.Helper()
	if code != 0 && kerr.ErrorForCode(code) == kerr.UnknownServerError {
		r.t.Fatalf("%s: error code %d (%v)", what, code, kerr.ErrorForCode(code))
	}
}

func (r *txnRun) settle(id *txnID, fate string) {
	for _, v := range id.open {
		r.fate[v] = fate
	}
	id.open = nil
	if fate == fateCommitted {
		for group, offsets := range id.pending {
			for p, o := range offsets {
				if r.groupOffsets[group] == nil {
					r.groupOffsets[group] = map[int32]int64{}
				}
				r.groupOffsets[group][p] = o
			}
		}
	}
	id.pending = nil
}

func (r *txnRun) initProducerID(id *txnID, b byte) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(5)
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id.name), 60000
	switch b % 8 {
	case 6:
		req.TransactionTimeoutMillis = -int32(b >> 4)
	case 7:
		req.TransactionTimeoutMillis = int32(r.h.cfg.TransactionMaxTimeout.Milliseconds()) + 1
	}
	if b&0x10 != 0 { // KIP-360: the producer names the id and epoch it had
		req.ProducerID, req.ProducerEpoch, _ = r.producer(id, b>>5)
	}
	resp := r.send(req).(*kmsg.InitProducerIDResponse)
	r.known("InitProducerId", resp.ErrorCode)
	if resp.ErrorCode == 0 {
		r.settle(id, fateAborted) // an open transaction is aborted first
		id.known, id.pid, id.epoch = true, resp.ProducerID, resp.ProducerEpoch
	}
}

func partitionsOf(b byte) []int32 {
	switch b % 3 {
	case 0:
		return []int32{0}
	case 1:
		return []int32{1}
	}
	return []int32{0, 1}
}

func (r *txnRun) addPartitions(idByte, pe, parts byte) {
	id := r.id(idByte)
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(3)
	req.TransactionalID = id.name
	req.ProducerID, req.ProducerEpoch, _ = r.producer(id, pe)
	t := kmsg.NewAddPartitionsToTxnRequestTopic()
	t.Topic, t.Partitions = txnFuzzTopic, partitionsOf(parts)
	req.Topics = append(req.Topics, t)
	resp := r.send(req).(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r.known("AddPartitionsToTxn v3", p.ErrorCode)
		}
	}
}

// addPartitionsBatched sends the broker form (v5): what a partition leader
// asks the coordinator, to verify or to add a partition.
func (r *txnRun) addPartitionsBatched(idByte, pe, parts byte) {
	id := r.id(idByte)
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(5)
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.VerifyOnly = id.name, parts&0x10 != 0
	tx.ProducerID, tx.ProducerEpoch, _ = r.producer(id, pe)
	t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	t.Topic, t.Partitions = txnFuzzTopic, partitionsOf(parts)
	tx.Topics = append(tx.Topics, t)
	req.Transactions = append(req.Transactions, tx)
	resp := r.send(req).(*kmsg.AddPartitionsToTxnResponse)
	r.known("AddPartitionsToTxn v5", resp.ErrorCode)
	for _, tx := range resp.Transactions {
		for _, t := range tx.Topics {
			for _, p := range t.Partitions {
				r.known("AddPartitionsToTxn v5", p.ErrorCode)
			}
		}
	}
}

func (r *txnRun) values(n int) []string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf("%d-%d", r.input, r.next)
		r.next++
	}
	return vs
}

// produceBatch sends one batch of values to partition with acks=all and
// returns the partition's error code.
func (r *txnRun) produceBatch(version int16, txnID *string, partition int32, o batch.BuildOptions, values []string) int16 {
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{Value: []byte(v)}
		r.partitionOf[v] = partition
		r.fate[v] = fateUnknown
	}
	o.FirstTimestamp = time.Now().UnixMilli()
	b, err := batch.Build(o, recs)
	if err != nil {
		r.t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 5000, txnID
	t := kmsg.NewProduceRequestTopic()
	t.Topic = txnFuzzTopic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition, p.Records = partition, b
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp := r.send(req).(*kmsg.ProduceResponse)
	rp := resp.Topics[0].Partitions[0]
	r.known(fmt.Sprintf("Produce v%d", version), rp.ErrorCode)
	if rp.ErrorCode == 0 {
		r.acked[partition] = max(r.acked[partition], rp.BaseOffset+int64(len(values)))
	}
	return rp.ErrorCode
}

// produce sends a transactional batch: v11 as a transaction-version-1 client
// (its partition added first), v12 as a version-2 one (the produce adds it);
// sometimes with a sequence out of order or without the transactional id.
func (r *txnRun) produce(idByte, pe, how, seqByte byte) {
	id := r.id(idByte)
	pid, epoch, current := r.producer(id, pe)
	partition := int32(how & 1)
	version := int16(11)
	if how&2 != 0 {
		version = 12
	}
	txnID := kmsg.StringPtr(id.name)
	if how&0x0c == 0x0c {
		txnID, current = nil, false
	}
	key := seqKey{pid, epoch, partition}
	seq, duplicate := r.seq[key], false
	switch seqByte % 8 {
	case 6:
		seq, current = seq+3, false
	case 7:
		// The last sequence accepted, again: a duplicate, answered as the
		// first was but not appended. With none accepted, it is a first batch.
		seq, duplicate, current = max(seq-1, 0), seq > 0, false
	}
	values := r.values(1 + int(seqByte>>6))
	code := r.produceBatch(version, txnID, partition, batch.BuildOptions{Idempotent: true, Transactional: true,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, values)
	if code != 0 {
		return
	}
	if !duplicate { // an accepted batch moves the producer's sequence on, whoever sent it
		r.seq[key] = seq + int32(len(values))
	}
	if !current {
		return
	}
	for _, v := range values {
		r.fate[v] = fateOpen
	}
	id.open = append(id.open, values...)
}

func (r *txnRun) producePlain(b byte) {
	values := r.values(1)
	if r.produceBatch(12, nil, int32(b&1), batch.BuildOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, values) == 0 {
		r.fate[values[0]] = fatePlain
	}
}

// group is one of the two groups of id's offsets: each id has its own, so
// the order in which two ids' commits reach a group never matters.
func (r *txnRun) group(id *txnID, b byte) string {
	return fmt.Sprintf("%s-g%d", id.name, b&1)
}

func (r *txnRun) addOffsets(idByte, pe, g byte) {
	id := r.id(idByte)
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.SetVersion(3 + int16(g>>4)%2)
	req.TransactionalID, req.Group = id.name, r.group(id, g)
	req.ProducerID, req.ProducerEpoch, _ = r.producer(id, pe)
	resp := r.send(req).(*kmsg.AddOffsetsToTxnResponse)
	r.known("AddOffsetsToTxn", resp.ErrorCode)
}

func (r *txnRun) txnOffsetCommit(idByte, pe, what byte) {
	id := r.id(idByte)
	group, partition, offset := r.group(id, what), int32(what>>1&1), int64(what>>2)
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.SetVersion(3 + int16(pe>>3)%3)
	req.TransactionalID, req.Group, req.Generation = id.name, group, -1
	pid, epoch, current := r.producer(id, pe)
	req.ProducerID, req.ProducerEpoch = pid, epoch
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = txnFuzzTopic
	p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = partition, offset, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp := r.send(req).(*kmsg.TxnOffsetCommitResponse)
	code := resp.Topics[0].Partitions[0].ErrorCode
	r.known("TxnOffsetCommit", code)
	switch {
	case code != 0:
	case !current:
		r.unsureGroups[group] = true
	default:
		if id.pending == nil {
			id.pending = map[string]map[int32]int64{}
		}
		if id.pending[group] == nil {
			id.pending[group] = map[int32]int64{}
		}
		id.pending[group][partition] = offset
	}
}

func (r *txnRun) endTxn(idByte, pe, how byte) {
	id := r.id(idByte)
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(4)
	if how&2 != 0 {
		req.SetVersion(5)
	}
	req.TransactionalID, req.Commit = id.name, how&1 != 0
	pid, epoch, current := r.producer(id, pe)
	req.ProducerID, req.ProducerEpoch = pid, epoch
	resp := r.send(req).(*kmsg.EndTxnResponse)
	r.known("EndTxn", resp.ErrorCode)
	if resp.ErrorCode != 0 || !current {
		return
	}
	if req.Commit {
		r.settle(id, fateCommitted)
	} else {
		r.settle(id, fateAborted)
	}
	if req.Version >= 5 {
		id.pid, id.epoch = resp.ProducerID, resp.ProducerEpoch
	}
}

func (r *txnRun) describe() {
	valid := []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}
	req := kmsg.NewPtrDescribeTransactionsRequest()
	for _, id := range r.ids {
		req.TransactionalIDs = append(req.TransactionalIDs, id.name)
	}
	resp := r.send(req).(*kmsg.DescribeTransactionsResponse)
	for _, s := range resp.TransactionStates {
		r.known("DescribeTransactions", s.ErrorCode)
		if s.ErrorCode == 0 && !slices.Contains(valid, s.State) {
			r.t.Fatalf("DescribeTransactions: %s in state %q", s.TransactionalID, s.State)
		}
	}
	list := r.send(kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse)
	r.known("ListTransactions", list.ErrorCode)
	producers := kmsg.NewPtrDescribeProducersRequest()
	t := kmsg.NewDescribeProducersRequestTopic()
	t.Topic, t.Partitions = txnFuzzTopic, []int32{0, 1}
	producers.Topics = append(producers.Topics, t)
	presp := r.send(producers).(*kmsg.DescribeProducersResponse)
	for _, t := range presp.Topics {
		for _, p := range t.Partitions {
			r.known("DescribeProducers", p.ErrorCode)
		}
	}
}

// findCoordinators waits for the node to coordinate the input's groups and
// ids, as a client asks before its first request to a coordinator: the first
// ask creates __consumer_offsets and __transaction_state.
func (r *txnRun) findCoordinators() {
	var ids, groups []string
	for _, id := range r.ids {
		ids = append(ids, id.name)
		groups = append(groups, r.group(id, 0), r.group(id, 1))
	}
	for typ, keys := range [][]string{groups, ids} {
		wait.Within(r.t, txnFuzzWait, "FindCoordinator", func() bool {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.SetVersion(4)
			req.CoordinatorType, req.CoordinatorKeys = int8(typ), keys
			resp := r.send(req).(*kmsg.FindCoordinatorResponse)
			for _, c := range resp.Coordinators {
				r.known("FindCoordinator", c.ErrorCode)
				if c.ErrorCode != 0 {
					return false
				}
			}
			return true
		})
	}
}

// finish ends every transaction of the input with InitProducerId, as a
// restarted producer would, waits for the last stable offsets to reach the
// high-water marks, and checks everything the node said.
func (r *txnRun) finish() {
	for _, id := range r.ids {
		wait.Eventually(r.t, txnFuzzWait, "InitProducerId to end "+id.name+"'s transaction", func() error {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.SetVersion(5)
			req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id.name), 60000
			resp := r.send(req).(*kmsg.InitProducerIDResponse)
			r.known("InitProducerId", resp.ErrorCode)
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				return err
			}
			r.settle(id, fateAborted)
			return nil
		})
	}
	for p := range int32(2) {
		wait.Eventually(r.t, txnFuzzWait, fmt.Sprintf("the last stable offset of partition %d to reach its high-water mark", p), func() error {
			if lso, hwm := r.endOffsets(p, 1), r.endOffsets(p, 0); lso != hwm {
				return fmt.Errorf("last stable offset %d, high-water mark %d, producers %s", lso, hwm, r.producers(p))
			}
			return nil
		})
	}
	r.check(true)
	r.checkGroupOffsets()
}

// producers describes partition's active producers, for a failure's message.
func (r *txnRun) producers(partition int32) string {
	req := kmsg.NewPtrDescribeProducersRequest()
	t := kmsg.NewDescribeProducersRequestTopic()
	t.Topic, t.Partitions = txnFuzzTopic, []int32{partition}
	req.Topics = append(req.Topics, t)
	resp := r.send(req).(*kmsg.DescribeProducersResponse)
	return fmt.Sprintf("%+v", resp.Topics[0].Partitions[0].ActiveProducers)
}

// endOffsets is partition's last stable offset (isolation 1) or high-water
// mark (0), retried while the node is not ready to answer.
func (r *txnRun) endOffsets(partition int32, isolation int8) int64 {
	var offset int64
	wait.Within(r.t, txnFuzzWait, "ListOffsets", func() bool {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(7)
		req.ReplicaID, req.IsolationLevel = -1, isolation
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = txnFuzzTopic
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp, p.CurrentLeaderEpoch = partition, -1, -1
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		resp := r.send(req).(*kmsg.ListOffsetsResponse)
		rp := resp.Topics[0].Partitions[0]
		r.known("ListOffsets", rp.ErrorCode)
		offset = rp.Offset
		return rp.ErrorCode == 0
	})
	return offset
}

// fetchedBatch is a batch read back: its header, values, and for a marker
// whether it commits.
type fetchedBatch struct {
	h      batch.Header
	values []string
	commit bool
}

// read fetches partition from the input's start to its end at isolation
// (the last stable offset for 1, the high-water mark for 0, as the first
// answer gives it) and returns the batches, the end and the aborted
// transactions the answers listed.
func (r *txnRun) read(partition int32, isolation int8) ([]fetchedBatch, int64, []kmsg.FetchResponseTopicPartitionAbortedTransaction) {
	var batches []fetchedBatch
	var aborted []kmsg.FetchResponseTopicPartitionAbortedTransaction
	offset, end := r.start[partition], int64(-1)
	deadline := time.Now().Add(txnFuzzWait)
	for end < 0 || offset < end {
		if time.Now().After(deadline) {
			r.t.Fatalf("reading %s[%d] at isolation %d: at %d of %d after %v", txnFuzzTopic, partition, isolation, offset, end, txnFuzzWait)
		}
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes, req.IsolationLevel, req.SessionEpoch = -1, 1<<20, isolation, -1
		t := kmsg.NewFetchRequestTopic()
		t.Topic = txnFuzzTopic
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch, p.LogStartOffset = partition, offset, 1<<20, -1, -1
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		resp := r.send(req).(*kmsg.FetchResponse)
		r.known("Fetch", resp.ErrorCode)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			r.t.Fatalf("Fetch of %s[%d] at %d: %+v", txnFuzzTopic, partition, offset, resp)
		}
		rp := resp.Topics[0].Partitions[0]
		if code := rp.ErrorCode; code != 0 {
			r.known("Fetch", code)
			if code == kerr.NotLeaderForPartition.Code || code == kerr.UnknownTopicOrPartition.Code {
				continue // the node restarting the partition after a power cut
			}
			r.t.Fatalf("Fetch of %s[%d] at %d: %v", txnFuzzTopic, partition, offset, kerr.ErrorForCode(code))
		}
		if end < 0 {
			end = rp.HighWatermark
			if isolation == 1 {
				end = rp.LastStableOffset
			}
		}
		aborted = append(aborted, rp.AbortedTransactions...)
		it := batch.NewStoredIter(rp.RecordBatches)
		read := 0
		for it.Next() {
			h := it.Header()
			if h.NextOffset() <= offset {
				continue // a batch before the one asked for
			}
			if h.BaseOffset >= end {
				break
			}
			fb := fetchedBatch{h: h}
			if h.Control() {
				typ, err := batch.ParseControl(it.Batch())
				if err != nil {
					r.t.Fatalf("%s[%d] at %d: %v", txnFuzzTopic, partition, h.BaseOffset, err)
				}
				fb.commit = typ == batch.ControlCommit
			} else if err := batch.Records(it.Batch(), func(_ batch.Header, rec batch.Record) error {
				fb.values = append(fb.values, string(rec.Value))
				return nil
			}); err != nil {
				r.t.Fatalf("%s[%d] at %d: %v", txnFuzzTopic, partition, h.BaseOffset, err)
			}
			batches = append(batches, fb)
			offset = h.NextOffset()
			read++
		}
		if err := it.Err(); err != nil {
			r.t.Fatalf("%s[%d] at %d: %v", txnFuzzTopic, partition, offset, err)
		}
		if read == 0 && offset < end {
			r.t.Fatalf("Fetch of %s[%d] at %d, below its end %d at isolation %d, returned no batch", txnFuzzTopic, partition, offset, end, isolation)
		}
	}
	return batches, end, aborted
}

// readCommitted is what a read_committed consumer returns of batches, a
// fetch up to the last stable offset: Kafka's consumer drops the batches of
// the aborted transactions the fetch listed, and every marker.
func readCommitted(batches []fetchedBatch, aborted []kmsg.FetchResponseTopicPartitionAbortedTransaction) []string {
	slices.SortFunc(aborted, func(a, b kmsg.FetchResponseTopicPartitionAbortedTransaction) int {
		return int(a.FirstOffset - b.FirstOffset)
	})
	abortedProducers := map[int64]bool{}
	var visible []string
	for _, b := range batches {
		for len(aborted) > 0 && aborted[0].FirstOffset <= b.h.LastOffset() {
			abortedProducers[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		switch {
		case b.h.Control():
			if !b.commit {
				delete(abortedProducers, b.h.ProducerID)
			}
		case b.h.Transactional() && abortedProducers[b.h.ProducerID]:
		default:
			visible = append(visible, b.values...)
		}
	}
	return visible
}

// check reads both partitions read_committed and then whole, takes each
// record's fate from the markers after it, and holds both against the model.
// A record's fate only goes from open to settled, so the first read's view
// below its last stable offset must agree with the second read's fates. At
// the end of an input (final) every transaction is ended and settled.
func (r *txnRun) check(final bool) {
	r.t.Helper()
	seen := map[string]bool{}
	for p := range int32(2) {
		// After a power cut the high-water mark is the active segment's
		// base until recovery's fsync of it: its end is not known durable.
		wait.Within(r.t, txnFuzzWait, "the high-water mark to pass what was acknowledged", func() bool {
			return r.endOffsets(p, 0) >= r.acked[p]
		})
		committedBatches, lso, aborted := r.read(p, 1)
		visible := readCommitted(committedBatches, aborted)
		all, hwm, _ := r.read(p, 0)
		fail := func(format string, args ...any) {
			r.t.Helper()
			r.t.Fatalf("%s[%d]: %s; from %d to the high-water mark %d (last stable offset %d) the log holds:\n%s", txnFuzzTopic, p, fmt.Sprintf(format, args...), r.start[p], hwm, lso, logString(all))
		}

		inLog := map[string]string{} // value -> its fate by the log's markers
		offsetOf := map[string]int64{}
		openOf := map[int64][]string{} // producer -> values before its next marker
		for _, b := range all {
			switch {
			case b.h.Control():
				for _, v := range openOf[b.h.ProducerID] {
					inLog[v] = map[bool]string{true: fateCommitted, false: fateAborted}[b.commit]
				}
				delete(openOf, b.h.ProducerID)
			default:
				for _, v := range b.values {
					if seen[v] {
						fail("%s is in the log twice", v)
					}
					seen[v], offsetOf[v] = true, b.h.BaseOffset
					if _, sent := r.fate[v]; !sent || r.partitionOf[v] != p {
						fail("at %d: %s, which was not sent there", b.h.BaseOffset, v)
					}
					inLog[v] = fatePlain
					if b.h.Transactional() {
						inLog[v] = fateOpen
						openOf[b.h.ProducerID] = append(openOf[b.h.ProducerID], v)
					}
				}
			}
		}
		for _, vs := range openOf {
			if offsetOf[vs[0]] < lso {
				fail("last stable offset %d is above %s at %d, of a transaction not ended", lso, vs[0], offsetOf[vs[0]])
			}
		}
		var want []string
		for v, fate := range inLog {
			if offsetOf[v] < lso && (fate == fateCommitted || fate == fatePlain) {
				want = append(want, v)
			}
		}
		slices.Sort(want)
		got := slices.Sorted(slices.Values(visible))
		if !slices.Equal(got, want) {
			fail("read_committed below %d returned %v, the log's markers commit %v", lso, got, want)
		}
		if final && (lso != hwm || len(openOf) > 0) {
			fail("transactions still open after every id was re-initialized: last stable offset %d, high-water mark %d", lso, hwm)
		}
		for v, fate := range r.fate {
			if r.partitionOf[v] != p {
				continue
			}
			got, ok := inLog[v]
			bad := false
			switch fate {
			case fateCommitted:
				bad = !ok || got == fateAborted || final && got != fateCommitted
			case fateAborted:
				bad = !ok || got == fateCommitted || final && got != fateAborted
			case fateOpen:
				bad = !ok || got == fateCommitted
			case fatePlain:
				bad = got != fatePlain
			}
			if bad {
				fail("%s, %s by the node's answers, is %q in the log (%v)", v, fate, got, ok)
			}
		}
	}
}

// logString lists batches, one a line, for a failure's message.
func logString(batches []fetchedBatch) string {
	var b strings.Builder
	for _, f := range batches {
		fmt.Fprintf(&b, "  %d: producer %d epoch %d", f.h.BaseOffset, f.h.ProducerID, f.h.ProducerEpoch)
		switch {
		case f.h.Control():
			fmt.Fprintf(&b, " marker commit=%v\n", f.commit)
		default:
			fmt.Fprintf(&b, " transactional=%v %v\n", f.h.Transactional(), f.values)
		}
	}
	return b.String()
}

// checkGroupOffsets wants each group's committed offsets to be those its
// committed transactions wrote, the last one winning.
func (r *txnRun) checkGroupOffsets() {
	for _, id := range r.ids {
		for g := range byte(2) {
			group := r.group(id, g)
			if r.unsureGroups[group] {
				continue
			}
			got := map[int32]int64{}
			wait.Eventually(r.t, txnFuzzWait, "OffsetFetch of "+group, func() error {
				req := kmsg.NewPtrOffsetFetchRequest()
				req.SetVersion(7)
				req.Group, req.RequireStable = group, true
				resp := r.send(req).(*kmsg.OffsetFetchResponse)
				r.known("OffsetFetch", resp.ErrorCode)
				if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
					return err
				}
				clear(got)
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						r.known("OffsetFetch", p.ErrorCode)
						if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
							return fmt.Errorf("partition %d: %w", p.Partition, err)
						}
						if p.Offset >= 0 {
							got[p.Partition] = p.Offset
						}
					}
				}
				return nil
			})
			want := r.groupOffsets[group]
			if len(want) == 0 {
				want = map[int32]int64{}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				r.t.Fatalf("group %s: committed offsets %v, its committed transactions wrote %v", group, got, want)
			}
		}
	}
}
