package replica

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
)

// FuzzReplication plays sequences of client writes and failures against one
// partition replicated on a memCluster of four brokers (replicas 1, 2 and 3 to
// start, min.insync.replicas 2), under synctest, with the controller's own
// plans for every metadata change: broker fencing (a session that expired),
// registration after a restart (which fences the old process), unfencing,
// preferred elections and reassignments. The failures are power cuts (what was
// not synced is lost, writes may tear), clean restarts, brokers cut off from
// each other or from the controller's metadata, lost fetch answers and failed
// fsyncs. The writes are plain batches (acks=all and acks=1), an idempotent
// producer that retries a batch until it is acknowledged, and a transactional
// producer whose transactions end with markers as a coordinator writes them
// (transaction version 2, retried until written).
//
// After every step it checks, on every running replica:
//   - a batch once below any replica's high-water mark stays at its offset with
//     the same bytes, and every replica in the ISR holds all of them (nothing
//     acknowledged or seen by a consumer is lost or changed);
//   - a log end is never below its high-water mark;
//   - the leader's last stable offset is that of its log: the first offset of
//     the oldest transaction open below the high-water mark, else the mark;
//   - read_committed (Kafka's consumer algorithm over the aborted list) shows
//     no batch of an aborted transaction, none twice, and every batch of a
//     committed transaction whose marker was acknowledged, below the LSO;
//   - no batch is in a log twice (the idempotent retries).
//
// At the end it heals the cluster and checks that every replica rejoins the
// ISR, every transaction ends and the LSO reaches the high-water mark.
func FuzzReplication(f *testing.F) {
	for _, seed := range [][]byte{
		{opProduce, 2, opIdempotent, 1, opTxnProduce, 0, opTxnEnd, 0, opSleep, 2},
		// The leader loses power after a write: the followers keep it.
		{opProduce, 0, opAcks1, 0, opPowerCut, 0, opFence, 0, opProduce, 1, opStart, 0, opRegister, 0, opSleep, 3},
		// A transaction across a failover, aborted on the new leader.
		{opTxnProduce, 0, opTxnProduce, 1, opIsolate, 0, opSleep, 4, opFence, 0, opTxnEnd, 1, opIsolate, 0, opUnfence, 0, opSleep, 3},
		// A stale leader keeps taking acks=1 writes while another leads.
		{opStale, 0, opFence, 0, opAcks1, 0, opAcks1, 1, opProduce, 0, opStale, 0, opUnfence, 0, opSleep, 2},
		// Every replica loses power at once with an idempotent batch in flight.
		{opIdempotent, 0, opLoseAnswers, 1, opIdempotent, 0, opPowerCut, 0, opPowerCut, 1, opPowerCut, 2, opStart, 0, opStart, 1, opStart, 2, opRegister, 0, opRegister, 1, opRegister, 2, opIdempotent, 0},
		// A reassignment onto broker 4 while a transaction is open.
		{opTxnProduce, 2, opReassign, 1, opSleep, 2, opTxnProduce, 0, opPreferred, 0, opTxnEnd, 0, opReassign, 0, opSleep, 2},
		// A follower's fsyncs fail.
		{opProduce, 0, opFailSync, 1, opProduce, 0, opSleep, 4, opProduce, 0, opCleanRestart, 1, opRegister, 1, opSleep, 3},
		// The first failure found: a follower truncated by the answer of one
		// leader epoch appended the next epoch's answer to a fetch sent from
		// its old log end (TestAnswerFromAnotherLogEndChangesNothing).
		{opUnfence, 221, opPowerCut, 221, opPowerCut, 221, opPowerCut, 221, opProduce, 0, opProduce, 229, opProduce, 108,
			opFailSync, 212, opFence, 243, opFence, 231, opFence, 231, opSleep, 231, opReassign, 110, opProduce, 0,
			opFailSync, 15, opTxnEnd, 12, opStart, 151, opStart, 151, opStart, 151, opStart, 1, opAcks1, 0, opProduce, 1,
			opFence, 243, opLoseAnswers, 3},
		// Writes in flight while the leader changes, and records deleted.
		{opProduceAsync, 0, opProduceAsync, 1, opFence, 0, opDeleteRecords, 2, opProduceAsync, 2, opUnfence, 0, opPreferred, 0, opDeleteRecords, 9, opSleep, 2},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 2*maxReplFuzzOps {
			ops = ops[:2*maxReplFuzzOps]
		}
		synctest.Test(t, func(t *testing.T) {
			r := newReplFuzz(t)
			for i := 0; i+1 < len(ops); i += 2 {
				r.step(ops[i], ops[i+1])
				synctest.Wait()
				when := fmt.Sprintf("after step %d (%s %d)", i/2, replOpNames[ops[i]%opCount], ops[i+1])
				t.Logf("%s: %s", when, r.state())
				r.check(when)
			}
			r.heal()
		})
	})
}

const maxReplFuzzOps = 40

// The operations of FuzzReplication: a byte of kind, a byte of argument.
const (
	opProduce       = iota // a plain batch, acks=all
	opAcks1                // a plain batch, acks=1
	opIdempotent           // the idempotent producer's batch (its unacknowledged one again, if any)
	opTxnProduce           // the transactional producer's batch, in its open transaction
	opTxnEnd               // end the open transaction: commit (even argument) or abort
	opPowerCut             // a broker loses power: it stops with what it synced
	opCleanRestart         // a broker stops cleanly and starts again, unregistered
	opStart                // a stopped broker starts, unregistered
	opRegister             // a started broker registers (fencing its old process)
	opFence                // the controller fences a broker (its session expired)
	opUnfence              // a registered broker's heartbeat unfences it
	opIsolate              // cut a broker off from the other brokers, or heal it
	opStale                // cut a broker off from the metadata, or bring it back
	opLoseAnswers          // lose the answers to a broker's fetches, or stop
	opFailSync             // a broker's fsyncs fail from now on (until it restarts)
	opSleep                // time passes
	opPreferred            // a preferred leader election
	opReassign             // reassign the partition
	opProduceAsync         // a plain batch, acks=all, acknowledged while the next steps run
	opDeleteRecords        // DeleteRecords on the leader, up to its high-water mark at most
	opCount
)

var replOpNames = [opCount]string{"produce", "acks1", "idempotent", "txn-produce", "txn-end", "power-cut",
	"clean-restart", "start", "register", "fence", "unfence", "isolate", "stale", "lose-answers",
	"fail-sync", "sleep", "preferred", "reassign", "produce-async", "delete-records"}

// replFuzzAckWait is how long a writer waits for an acknowledgement (fake
// time), shorter than the lag limit, as a client's request timeout is.
const replFuzzAckWait = 3 * time.Second

var (
	replFuzzSleeps   = []time.Duration{10 * time.Millisecond, 200 * time.Millisecond, time.Second, 4 * time.Second, 15 * time.Second}
	replFuzzTargets  = [][]int32{{1, 2, 3}, {2, 3, 4}, {4, 1, 2}, {3, 4}, {1, 2}, {2, 4, 1, 3}}
	replFuzzBrokers  = []int32{1, 2, 3, 4}
	idempotentPID    = int64(100)
	transactionalPID = int64(200)
)

// fuzzBatch is what the fuzzer knows of a batch it wrote (replFuzz.batches
// keys it by the value that names it).
type fuzzBatch struct {
	txn int // the transaction it belongs to (index in replFuzz.txns), or -1
}

// fuzzTxn is one transaction of the transactional producer.
type fuzzTxn struct {
	decided bool // its end is decided (and will be retried until written)
	commit  bool
	done    bool     // its marker was acknowledged
	acked   []string // its batches acknowledged
}

// seenBatch is a batch once below a replica's high-water mark.
type seenBatch struct {
	base int64 // only in replFuzz.acked
	last int64
	crc  uint32
	who  string
}

type replFuzz struct {
	t *testing.T
	c *memCluster

	disks   map[int32]*vfs.MemFS // the disk of every broker that ever ran
	running map[int32]bool
	// epoch is the broker epoch each running process registered at (0: not yet).
	epoch       map[int32]int64
	failedSync  map[int32]bool
	isolated    map[int32]bool
	stale       map[int32]bool
	losing      map[int32]bool
	incarnation byte

	seen map[int64]seenBatch // by base offset
	// mu guards acked: what produceAsync's goroutines saw acknowledged, to
	// join seen at the next check.
	mu      sync.Mutex
	acked   []seenBatch
	batches map[string]fuzzBatch
	next    int // the next batch's number

	idemSeq     int32
	idemPending []byte // built, not yet acknowledged

	txnEpoch   int16
	txnSeq     int32
	txnPending []byte
	txns       []*fuzzTxn
	open       int // the open (or ending) transaction, -1 for none
	markerTS   int64
}

func newReplFuzz(t *testing.T) *replFuzz {
	c := newMemClusterOn(t, 4, []int32{1, 2, 3}, 2)
	r := &replFuzz{t: t, c: c, disks: map[int32]*vfs.MemFS{}, running: map[int32]bool{}, epoch: map[int32]int64{},
		failedSync: map[int32]bool{}, isolated: map[int32]bool{}, stale: map[int32]bool{}, losing: map[int32]bool{},
		seen: map[int64]seenBatch{}, batches: map[string]fuzzBatch{}, open: -1}
	for _, id := range replFuzzBrokers {
		r.disks[id] = c.nodes[id].mem
		r.running[id] = true
		r.epoch[id] = 1
	}
	return r
}

func (r *replFuzz) step(kind, arg byte) {
	id := replFuzzBrokers[int(arg)%len(replFuzzBrokers)]
	switch kind % opCount {
	case opProduce:
		r.produce(r.plainBatch(int(arg)%3+1), -1)
	case opAcks1:
		r.produce(r.plainBatch(1), 1)
	case opIdempotent:
		if r.idemPending == nil {
			r.idemPending = r.build(batch.BuildOptions{Idempotent: true, ProducerID: idempotentPID, BaseSequence: r.idemSeq}, int(arg)%3+1, -1)
		}
		if _, err := r.produce(r.idemPending, -1); err == nil {
			h, _ := batch.ParseHeader(r.idemPending)
			r.idemSeq += h.LastOffsetDelta + 1
			r.idemPending = nil
		}
	case opTxnProduce:
		r.txnProduce(int(arg)%3 + 1)
	case opTxnEnd:
		r.txnEnd(arg%2 == 0)
	case opPowerCut:
		if r.running[id] {
			var opts []vfs.CrashOption
			if arg >= 128 {
				opts = append(opts, vfs.WithTornWrites(uint64(arg)))
			}
			r.c.mu.Lock()
			disk := r.c.nodes[id].mem.CrashClone(opts...)
			r.c.mu.Unlock()
			r.c.stopNode(id)
			r.stopped(id, disk)
		}
	case opCleanRestart:
		if r.running[id] {
			nd := r.c.stopNode(id)
			r.stopped(id, nd.mem)
			r.start(id)
		}
	case opStart:
		if !r.running[id] {
			r.start(id)
		}
	case opRegister:
		r.register(id, arg >= 128)
	case opFence:
		r.plan(func(img *metadata.Image) ([]metadata.Record, error) {
			b := img.Broker(id)
			if b == nil {
				return nil, nil
			}
			return controller.PlanFenceBroker(img, id, b.Epoch, nil)
		})
	case opUnfence:
		if r.running[id] && r.epoch[id] != 0 && !r.isolated[id] {
			r.plan(func(img *metadata.Image) ([]metadata.Record, error) {
				return controller.PlanUnfenceBroker(img, id, r.epoch[id], nil)
			})
		}
	case opIsolate:
		r.isolated[id] = !r.isolated[id]
		r.c.isolate(id, r.isolated[id])
	case opStale:
		r.stale[id] = !r.stale[id]
		r.c.setStale(id, r.stale[id])
	case opLoseAnswers:
		r.losing[id] = !r.losing[id]
		from := int64(-1)
		if r.losing[id] {
			from = 0
			if r.running[id] {
				if p := r.partitionOn(id); p != nil {
					from = p.LogEndOffset()
				}
			}
		}
		r.c.loseAnswers(id, from)
	case opFailSync:
		if r.running[id] {
			r.failedSync[id] = true
			r.c.mu.Lock()
			r.c.nodes[id].fsync.Enable()
			r.c.mu.Unlock()
		}
	case opSleep:
		time.Sleep(replFuzzSleeps[int(arg)%len(replFuzzSleeps)])
	case opPreferred:
		r.plan(func(img *metadata.Image) ([]metadata.Record, error) {
			recs, _ := controller.PlanElectLeaders(img, []controller.TopicPartitionRef{{Topic: memTopic, Partition: 0}}, controller.ElectPreferred, nil)
			return recs, nil
		})
	case opProduceAsync:
		r.produceAsync(r.plainBatch(int(arg)%3 + 1))
	case opDeleteRecords:
		if p := r.leader(); p != nil {
			p.DeleteRecords(min(p.HighWatermark(), p.LogStartOffset()+int64(arg%8)))
		}
	case opReassign:
		target := replFuzzTargets[int(arg)%len(replFuzzTargets)]
		r.plan(func(img *metadata.Image) ([]metadata.Record, error) {
			recs, errs := controller.PlanAlterReassignments(img, []controller.Reassignment{{Topic: memTopic, Partition: 0, Replicas: target}}, nil)
			return recs, errors.Join(errs...)
		})
	}
}

// plan applies what the controller plans against its image; a refusal
// changes nothing, as at a controller.
func (r *replFuzz) plan(fn func(img *metadata.Image) ([]metadata.Record, error)) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	recs, err := fn(r.c.img)
	if err != nil || len(recs) == 0 {
		return
	}
	if err := r.c.applyLocked(recs); err != nil {
		r.t.Fatalf("applying what the controller planned: %v", err)
	}
}

func (r *replFuzz) stopped(id int32, disk *vfs.MemFS) {
	r.disks[id] = disk
	r.running[id], r.epoch[id], r.failedSync[id] = false, 0, false
}

// start runs a stopped broker on its disk, not registered yet: it applies the
// metadata it has, as a restarted broker does before it registers.
func (r *replFuzz) start(id int32) {
	r.c.startAt(id, r.disks[id], 0)
	r.running[id] = true
}

// register registers a started broker's new process; with liveSession the
// controller still counts the old one's session, and refuses while that one
// is not fenced.
func (r *replFuzz) register(id int32, liveSession bool) {
	if !r.running[id] || r.epoch[id] != 0 || r.isolated[id] {
		return
	}
	r.incarnation++
	var epoch int64
	r.plan(func(img *metadata.Image) ([]metadata.Record, error) {
		recs, e, err := controller.PlanRegisterBroker(img, controller.RegisterBroker{
			ID: id, Incarnation: metadata.UUID{r.incarnation}, Host: "127.0.0.1", Port: 9092,
		}, liveSession, nil)
		epoch = e
		return recs, err
	})
	if epoch != 0 {
		r.epoch[id] = epoch
		r.c.mu.Lock()
		r.c.nodes[id].epoch.Store(epoch)
		r.c.mu.Unlock()
	}
}

// partitionOn is broker id's replica, nil when it hosts none.
func (r *replFuzz) partitionOn(id int32) *Partition {
	r.c.mu.Lock()
	nd := r.c.nodes[id]
	r.c.mu.Unlock()
	if nd == nil {
		return nil
	}
	p, err := nd.mgr.Partition(memTopic, 0)
	if err != nil {
		return nil
	}
	return p
}

// leader is the replica a client would write to: the leader in the metadata,
// running and registered (a restarted broker opens its listener only then).
func (r *replFuzz) leader() *Partition {
	leader := r.c.partition().Leader
	if leader < 0 || !r.running[leader] || r.epoch[leader] == 0 {
		return nil
	}
	return r.partitionOn(leader)
}

func (r *replFuzz) build(o batch.BuildOptions, n, txn int) []byte {
	recs := make([]batch.Record, n)
	value := fmt.Sprintf("b%d", r.next)
	r.next++
	for i := range recs {
		recs[i].Value = fmt.Appendf(nil, "%s/%d", value, i)
	}
	b, err := batch.Build(o, recs)
	if err != nil {
		r.t.Fatal(err)
	}
	r.batches[value] = fuzzBatch{txn: txn}
	return b
}

func (r *replFuzz) plainBatch(n int) []byte { return r.build(batch.BuildOptions{}, n, -1) }

// produce writes b to the leader with acks and, for acks=all, waits for the
// acknowledgement as a producer does; err is nil once acknowledged.
func (r *replFuzz) produce(b []byte, acks int16) (AppendResult, error) {
	p := r.leader()
	if p == nil {
		return AppendResult{}, ErrNotLeader
	}
	res, err := p.Append(slices.Clone(b), acks)
	if err != nil || acks != -1 {
		return res, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), replFuzzAckWait)
	defer cancel()
	if err := p.WaitHighWatermark(ctx, res.LastOffset+1, replFuzzAckWait); err != nil {
		return res, err
	}
	r.observe(p, "an acknowledgement")
	return res, nil
}

// produceAsync writes b to the leader with acks=all and waits for the
// acknowledgement on a goroutine, while the next steps run; what it
// acknowledges joins what was seen committed.
func (r *replFuzz) produceAsync(b []byte) {
	p := r.leader()
	if p == nil {
		return
	}
	res, err := p.Append(slices.Clone(b), -1)
	if err != nil {
		return
	}
	h, _ := batch.ParseHeader(b)
	go func() {
		if p.WaitHighWatermark(context.Background(), res.LastOffset+1, replFuzzAckWait) != nil {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.acked = append(r.acked, seenBatch{base: res.BaseOffset, last: res.LastOffset, crc: h.CRC, who: fmt.Sprintf("an acknowledgement of %d-%d in flight", res.BaseOffset, res.LastOffset)})
	}()
}

func (r *replFuzz) txnProduce(n int) {
	if r.open >= 0 && r.txns[r.open].decided {
		return // the client waits for EndTxn
	}
	if r.open < 0 {
		r.txns = append(r.txns, &fuzzTxn{})
		r.open = len(r.txns) - 1
		r.txnSeq = 0
	}
	if r.txnPending == nil {
		r.txnPending = r.build(batch.BuildOptions{Idempotent: true, Transactional: true, ProducerID: transactionalPID,
			ProducerEpoch: r.txnEpoch, BaseSequence: r.txnSeq}, n, r.open)
	}
	_, err := r.produce(r.txnPending, -1)
	switch {
	case err == nil:
		h, _ := batch.ParseHeader(r.txnPending)
		r.txnSeq += h.LastOffsetDelta + 1
		r.txns[r.open].acked = append(r.txns[r.open].acked, batchValue(r.txnPending))
		r.txnPending = nil
	case errors.Is(err, ErrOutOfOrderSequence), errors.Is(err, ErrInvalidProducerEpoch), errors.Is(err, ErrTxnMarkerPending):
		r.t.Fatalf("the transactional producer's batch at epoch %d sequence %d: %v", r.txnEpoch, r.txnSeq, err)
	}
}

// txnEnd ends the open transaction as its coordinator does: the decision is
// final once taken, and its marker (transaction version 2: at the next epoch)
// is written to the leader until acknowledged. A transaction with a batch that
// was never acknowledged can only abort.
func (r *replFuzz) txnEnd(commit bool) {
	if r.open < 0 {
		return
	}
	txn := r.txns[r.open]
	if !txn.decided {
		txn.decided, txn.commit = true, commit && r.txnPending == nil
	}
	p := r.leader()
	if p == nil {
		return
	}
	r.markerTS++
	m := batch.Marker{ProducerID: transactionalPID, ProducerEpoch: r.txnEpoch + 1, Commit: txn.commit, Timestamp: r.markerTS}
	res, err := p.WriteTxnMarker(m, 2)
	end := res.LastOffset + 1
	if errors.Is(err, ErrInvalidProducerEpoch) {
		// Written already (a retry): done once what the log holds is committed.
		err, end = nil, p.LogEndOffset()
	}
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), replFuzzAckWait)
	defer cancel()
	if err := p.WaitHighWatermark(ctx, end, replFuzzAckWait); err != nil {
		return
	}
	r.observe(p, "a marker's acknowledgement")
	txn.done = true
	r.open, r.txnPending = -1, nil
	r.txnEpoch++
}

// batchValue is the name of a batch the fuzzer built: its first value up to
// the slash.
func batchValue(b []byte) string {
	var v string
	batch.Records(b, func(_ batch.Header, rec batch.Record) error {
		if v == "" {
			v, _, _ = strings.Cut(string(rec.Value), "/")
		}
		return nil
	})
	return v
}

// logBatches reads a replica's batches from its log start up to end.
func logBatches(p *Partition, end int64) ([][]byte, error) {
	var out [][]byte
	l := p.Log()
	for off := l.LogStartOffset(); off < end; {
		ch, err := l.Read(off, 1<<20, end)
		if err != nil {
			if errors.Is(err, storage.ErrOffsetOutOfRange) {
				break
			}
			return nil, err
		}
		if ch.Size == 0 {
			break
		}
		b, err := ch.Bytes()
		ch.Release()
		if err != nil {
			return nil, err
		}
		for it := batch.NewStoredIter(b); it.Next(); {
			out = append(out, it.Batch())
		}
		off = ch.NextOffset
	}
	return out, nil
}

// observe records what lies below p's high-water mark as committed, and fails
// if it differs from what was committed before.
func (r *replFuzz) observe(p *Partition, who string) {
	r.t.Helper()
	hwm := p.HighWatermark()
	bs, err := logBatches(p, hwm)
	if err != nil {
		return // a failed log: its replica serves nothing
	}
	for _, b := range bs {
		h, _ := batch.ParseHeader(b)
		if h.NextOffset() > hwm {
			break
		}
		r.see(h.BaseOffset, seenBatch{last: h.LastOffset(), crc: h.CRC, who: who}, fmt.Sprintf("below the high-water mark %d", hwm))
	}
}

// see records a batch at base as committed, and fails if another was.
func (r *replFuzz) see(base int64, b seenBatch, where string) {
	r.t.Helper()
	prev, ok := r.seen[base]
	switch {
	case !ok:
		r.seen[base] = b
	case prev.last != b.last || prev.crc != b.crc:
		r.t.Fatalf("%s: batch %d-%d (crc %08x) %s; %s saw %d-%d (crc %08x) there",
			b.who, base, b.last, b.crc, where, prev.who, base, prev.last, prev.crc)
	}
}

// state describes the partition's state, for the log of a failing sequence.
func (r *replFuzz) state() string {
	ip := r.c.partition()
	s := fmt.Sprintf("leader %d epoch %d, replicas %v, ISR %v;", ip.Leader, ip.LeaderEpoch, ip.Replicas, ip.ISR)
	for _, id := range replFuzzBrokers {
		p := r.partitionOn(id)
		switch {
		case !r.running[id]:
			s += fmt.Sprintf(" %d down", id)
		case p == nil:
			s += fmt.Sprintf(" %d none", id)
		default:
			s += fmt.Sprintf(" %d[epoch %d leader %v hwm %d leo %d durable %d]", id, p.LeaderEpoch(), p.IsLeader(), p.HighWatermark(), p.LogEndOffset(), p.Log().DurableOffset())
		}
	}
	return s
}

// logs describes every running replica's batches and epochs, for the log
// of a failing sequence.
func (r *replFuzz) logs() string {
	var s string
	for _, id := range replFuzzBrokers {
		p := r.partitionOn(id)
		if !r.running[id] || p == nil {
			continue
		}
		s += fmt.Sprintf("\n  broker %d (epochs %v):", id, p.Log().Epochs())
		bs, err := logBatches(p, p.LogEndOffset())
		if err != nil {
			s += " " + err.Error()
		}
		for _, b := range bs {
			h, _ := batch.ParseHeader(b)
			s += fmt.Sprintf(" %d-%d@%d:%s", h.BaseOffset, h.LastOffset(), h.PartitionLeaderEpoch, batchValue(b))
		}
	}
	return s
}

// check runs the invariants on every running replica.
func (r *replFuzz) check(when string) {
	r.t.Helper()
	r.mu.Lock()
	acked := r.acked
	r.acked = nil
	r.mu.Unlock()
	for _, a := range acked {
		r.see(a.base, a, when)
	}
	ids := slices.Sorted(maps.Keys(r.running))
	for _, id := range ids {
		if p := r.partitionOn(id); r.running[id] && p != nil {
			if hwm, leo := p.HighWatermark(), p.LogEndOffset(); leo < hwm {
				r.t.Fatalf("%s: broker %d's log end %d is below its high-water mark %d", when, id, leo, hwm)
			}
			r.observe(p, fmt.Sprintf("broker %d %s", id, when))
			r.checkAbortIndex(p, fmt.Sprintf("%s: broker %d", when, id))
		}
	}
	ip := r.c.partition()
	for _, id := range ip.ISR {
		p := r.partitionOn(id)
		if !r.running[id] || p == nil || r.failedSync[id] {
			continue
		}
		r.checkHoldsSeen(p, fmt.Sprintf("%s: in-sync replica %d", when, id))
	}
	if p := r.leader(); p != nil && p.IsLeader() {
		r.checkTransactions(p, when)
	}
}

// checkAbortIndex fails unless p's aborted-transaction index names exactly the
// aborted transactions of its log (when the log starts at 0, so that a scan
// from there knows every transaction): the index is what a read_committed
// fetch, and the upload of a tiered segment, take them from, on whichever
// replica leads then.
func (r *replFuzz) checkAbortIndex(p *Partition, who string) {
	r.t.Helper()
	l := p.Log()
	leo := l.LogEndOffset()
	if l.LogStartOffset() != 0 || leo == 0 || l.Err() != nil {
		return
	}
	bs, err := logBatches(p, leo)
	if err != nil {
		return
	}
	var want []AbortedTxn
	open := map[int64]int64{}
	for _, b := range bs {
		h, _ := batch.ParseHeader(b)
		switch {
		case h.Control():
			typ, _, err := batch.ParseMarker(b)
			if first, ok := open[h.ProducerID]; ok && err == nil && typ == batch.ControlAbort {
				want = append(want, AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.BaseOffset})
			}
			delete(open, h.ProducerID)
		case h.Transactional():
			if _, ok := open[h.ProducerID]; !ok {
				open[h.ProducerID] = h.BaseOffset
			}
		}
	}
	got, err := l.AbortedTxns(0, leo)
	if err != nil {
		r.t.Fatalf("%s: aborted-transaction index: %v", who, err)
	}
	if !slices.Equal(got, want) {
		r.t.Fatalf("%s: aborted-transaction index %v, its log [0, %d) has %v; %s; logs:%s", who, got, leo, want, r.state(), r.logs())
	}
}

// checkHoldsSeen fails unless p's log holds every batch ever committed.
func (r *replFuzz) checkHoldsSeen(p *Partition, who string) {
	r.t.Helper()
	bs, err := logBatches(p, p.LogEndOffset())
	if err != nil {
		return
	}
	have := map[int64]batch.Header{}
	for _, b := range bs {
		h, _ := batch.ParseHeader(b)
		have[h.BaseOffset] = h
	}
	for _, off := range slices.Sorted(maps.Keys(r.seen)) {
		s := r.seen[off]
		if off < p.LogStartOffset() {
			continue
		}
		h, ok := have[off]
		if !ok || h.LastOffset() != s.last || h.CRC != s.crc {
			r.t.Fatalf("%s (log %d-%d, high-water mark %d) lacks batch %d-%d that %s saw committed; logs:%s",
				who, p.LogStartOffset(), p.LogEndOffset(), p.HighWatermark(), off, s.last, s.who, r.logs())
		}
	}
}

// checkTransactions checks the leader's last stable offset and what a
// read_committed consumer reads from it.
func (r *replFuzz) checkTransactions(p *Partition, when string) {
	r.t.Helper()
	hwm := p.HighWatermark()
	bs, err := logBatches(p, hwm)
	if err != nil {
		return
	}
	// The LSO the log implies: the first offset of the oldest transaction
	// open below the high-water mark.
	open := map[int64]int64{}
	values := map[string]batch.Header{}
	for _, b := range bs {
		h, _ := batch.ParseHeader(b)
		if h.NextOffset() > hwm {
			break
		}
		switch {
		case h.Control():
			delete(open, h.ProducerID)
		case h.Transactional():
			if _, ok := open[h.ProducerID]; !ok {
				open[h.ProducerID] = h.BaseOffset
			}
		}
		if !h.Control() {
			v := batchValue(b)
			if prev, dup := values[v]; dup {
				r.t.Fatalf("%s: batch %s is in the log twice, at %d and %d", when, v, prev.BaseOffset, h.BaseOffset)
			}
			values[v] = h
		}
	}
	wantLSO := hwm
	for _, first := range open {
		wantLSO = min(wantLSO, first)
	}
	res, err := p.Read(p.LogStartOffset(), 1<<30, ReadCommitted)
	if err != nil {
		if errors.Is(err, ErrNotLeader) || errors.Is(err, storage.ErrOffsetOutOfRange) {
			return
		}
		r.t.Fatalf("%s: read_committed: %v", when, err)
	}
	var chunk []byte
	if res.Chunk.Size > 0 {
		chunk, err = res.Chunk.Bytes()
		res.Chunk.Release()
		if err != nil {
			return
		}
	}
	if res.HighWatermark != hwm {
		return // the leader moved on between the two reads
	}
	// A transaction begun below the log start (DeleteRecords) holds the LSO
	// at the log start, as in Kafka, until its marker is below the high-water
	// mark: then the log read from there tells only a bound.
	start := p.LogStartOffset()
	wantLSO = max(wantLSO, min(start, hwm))
	exact := start == 0
	if lso := res.LastStableOffset; lso < min(start, hwm) || lso > wantLSO || exact && lso != wantLSO {
		r.t.Fatalf("%s: last stable offset %d, the log [%d, %d) below the high-water mark has it at %d (open: %v)",
			when, lso, start, hwm, wantLSO, open)
	}
	// Kafka's consumer: a transactional batch of a producer with an aborted
	// transaction begun at or before it is skipped until that abort marker.
	aborted := slices.Clone(res.Aborted)
	slices.SortFunc(aborted, func(a, b AbortedTxn) int { return int(a.FirstOffset - b.FirstOffset) })
	abortedPIDs := map[int64]bool{}
	visible := map[string]bool{}
	for it := batch.NewStoredIter(chunk); it.Next(); {
		h := it.Header()
		for len(aborted) > 0 && aborted[0].FirstOffset <= h.LastOffset() {
			abortedPIDs[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		b := it.Batch()
		switch {
		case h.Control():
			if typ, _, err := batch.ParseMarker(b); err == nil && typ == batch.ControlAbort {
				delete(abortedPIDs, h.ProducerID)
			}
			continue
		case h.Transactional() && abortedPIDs[h.ProducerID]:
			continue
		}
		v := batchValue(b)
		if visible[v] {
			r.t.Fatalf("%s: read_committed shows batch %s twice", when, v)
		}
		visible[v] = true
		if fb := r.batches[v]; fb.txn >= 0 {
			if txn := r.txns[fb.txn]; !txn.decided || !txn.commit {
				r.t.Fatalf("%s: read_committed shows batch %s at %d of transaction %d (decided %v, commit %v)",
					when, v, h.BaseOffset, fb.txn, txn.decided, txn.commit)
			}
		}
	}
	for i, txn := range r.txns {
		if !txn.done || !txn.commit {
			continue
		}
		for _, v := range txn.acked {
			// A batch shows once it is wholly below the LSO (which may stop
			// inside one: at a log start that DeleteRecords moved there).
			if h, ok := values[v]; ok && h.NextOffset() <= res.LastStableOffset && !visible[v] {
				r.t.Fatalf("%s: batch %s at %d-%d of committed transaction %d is below the LSO %d and not shown",
					when, v, h.BaseOffset, h.LastOffset(), i, res.LastStableOffset)
			}
		}
	}
}

// heal ends every failure, lets the cluster settle, and checks that it
// recovers: every replica in the ISR, the open transaction ended, the LSO at
// the high-water mark.
func (r *replFuzz) heal() {
	r.t.Helper()
	for _, id := range replFuzzBrokers {
		if r.failedSync[id] {
			nd := r.c.stopNode(id)
			r.stopped(id, nd.mem.CrashClone())
		}
		if !r.running[id] {
			r.start(id)
		}
		if r.isolated[id] {
			r.isolated[id] = false
			r.c.isolate(id, false)
		}
		if r.stale[id] {
			r.stale[id] = false
			r.c.setStale(id, false)
		}
		if r.losing[id] {
			r.losing[id] = false
			r.c.loseAnswers(id, -1)
		}
	}
	for _, id := range replFuzzBrokers {
		r.register(id, false)
		r.step(opUnfence, byte(id-1))
	}
	for range 10 {
		time.Sleep(5 * time.Second)
		synctest.Wait()
		r.plan(func(img *metadata.Image) ([]metadata.Record, error) {
			recs, _ := controller.PlanElectLeaders(img, []controller.TopicPartitionRef{{Topic: memTopic, Partition: 0}}, controller.ElectPreferred, nil)
			return recs, nil
		})
		if r.open >= 0 {
			r.txnEnd(false)
		}
		synctest.Wait()
	}
	r.check("after healing")
	ip := r.c.partition()
	if ip.Leader < 0 {
		r.t.Fatalf("after healing: no leader (replicas %v, ISR %v)", ip.Replicas, ip.ISR)
	}
	if !slices.Equal(slices.Sorted(slices.Values(ip.ISR)), slices.Sorted(slices.Values(ip.Replicas))) {
		r.t.Fatalf("after healing: ISR %v, replicas %v (leader %d)", ip.ISR, ip.Replicas, ip.Leader)
	}
	if r.open >= 0 {
		r.t.Fatalf("after healing: transaction %d never ended", r.open)
	}
	p := r.leader()
	if lso, hwm := p.LastStableOffset(), p.HighWatermark(); lso != hwm {
		r.t.Fatalf("after healing: last stable offset %d, high-water mark %d", lso, hwm)
	}
}
