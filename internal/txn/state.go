package txn

import (
	"cmp"
	"maps"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
)

// State is a transaction's state, numbered as Kafka stores it in
// __transaction_state (kmsg.TransactionState).
type State = kmsg.TransactionState

// The states used here.
const (
	Empty          = kmsg.TransactionStateEmpty
	Ongoing        = kmsg.TransactionStateOngoing
	PrepareCommit  = kmsg.TransactionStatePrepareCommit
	PrepareAbort   = kmsg.TransactionStatePrepareAbort
	CompleteCommit = kmsg.TransactionStateCompleteCommit
	CompleteAbort  = kmsg.TransactionStateCompleteAbort
)

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Meta is the state of one transactional id: what __transaction_state holds for
// it. It is a value; transitions return a new one.
type Meta struct {
	ProducerID    int64
	ProducerEpoch int16
	TimeoutMs     int32
	State         State
	Partitions    []TopicPartition // sorted, no duplicates
	StartMs       int64            // when the id's last transaction began, kept once it ended (-1: none since InitProducerId)
	LastUpdateMs  int64
	// TV2 is set when the id's last transaction ended with EndTxn v5
	// (KIP-890): each end bumps the epoch, so a retried end arrives with the
	// epoch just before the current one. An EndTxn v4 clears it (as Kafka's
	// prepareAbortOrCommit takes each end's version): its markers go at the
	// batches' epoch, as version 1 (markerVersion).
	TV2 bool
	// NextProducerID is the producer id a TV2 end moves to when the epoch is
	// exhausted: its Prepare state holds epoch math.MaxInt16 (markers are
	// written with it) and its Complete state NextProducerID at epoch 0, with
	// the exhausted id kept in PrevProducerID for retries. 0 on a fence to
	// math.MaxInt16 (bumpEpoch): the id keeps its producer id until the next
	// InitProducerId.
	NextProducerID int64
	PrevProducerID int64
	// LastProducerEpoch is the epoch the producer held before the
	// InitProducerId (KIP-360: with its producer id and epoch) or the EndTxn
	// v5 that gave it this one; at epoch 0 after a move to a new producer id,
	// PrevProducerID's epoch. A retry of that InitProducerId, whose answer
	// the client lost, is answered with the current id and epoch (Kafka's
	// lastProducerEpoch, isInitRetry); the timeout's abort keeps it too
	// (expire). -1 (not the zero value) when none: a new id, a new
	// incarnation's InitProducerId and its fence; lastEpochUnknown in a state
	// loaded from a record written before it was kept.
	LastProducerEpoch int16
	// Owed, when set, is the previous transaction of this id, whose markers
	// may not all be written yet: the state was written while they were in
	// flight (the overlap, see canOverlap). A coordinator that loads it writes
	// those markers again before it serves the id.
	Owed *Owed
	// Preadded, on a Prepare state an EndTxn v5 wrote, is the partitions the
	// producer's next transaction (at this state's epoch) may be added to
	// without waiting for a state write: the transaction's own, but for
	// __consumer_offsets partitions (see preaddable). A coordinator that
	// loads such a state resumes it (resumed): the producer may have
	// written to them at that epoch, its add in no committed state. Never
	// set on other states.
	Preadded []TopicPartition
	// Resumed, on the Ongoing state a coordinator made of a loaded Prepare
	// state with pre-added partitions (resumed), is the Complete state of
	// that Prepare state: a retried EndTxn of it is answered from it. Empty
	// (0) on every other state; never written.
	Resumed State
}

// Owed is an ended transaction whose markers are owed: what a coordinator
// needs to write them again.
type Owed struct {
	Commit        bool
	ProducerID    int64
	ProducerEpoch int16 // the markers' epoch: above the one the batches were written at
	Partitions    []TopicPartition
}

// markers is the round of markers that writes o.
func (o *Owed) markers(coordinatorEpoch int32) Markers {
	return Markers{ProducerID: o.ProducerID, ProducerEpoch: o.ProducerEpoch, CoordinatorEpoch: coordinatorEpoch, Commit: o.Commit,
		TransactionVersion: 2, Partitions: o.Partitions}
}

// canOverlap tells whether, while the markers of Prepare state m are being
// written, the next transaction of the producer may begin (its partitions
// added, an Ongoing state naming m's markers as owed written): only when the
// markers are of transaction version 2, so that a marker written again after
// the next transaction's batches is refused by their partitions (KIP-1228),
// and m keeps its producer id (the epoch bump did not move to a new one).
func (m Meta) canOverlap() bool {
	return m.markerVersion() == 2 && m.ProducerEpoch < math.MaxInt16 && len(m.Partitions) > 0
}

// owed is the Owed of Prepare state m.
func (m Meta) owed() *Owed {
	return &Owed{Commit: m.State == PrepareCommit, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Partitions: m.Partitions}
}

// preaddable is the partitions of Prepare state m that its producer's next
// transaction may begin on without a state write waited for (Meta.Preadded):
// those of a transaction-version-2 end that can overlap (canOverlap, the
// same condition: a marker of m written again later is refused where the
// next transaction wrote), but for __consumer_offsets partitions (the
// overlap's exception, addsOwedOffsets).
func (m Meta) preaddable() []TopicPartition {
	if !m.canOverlap() {
		return nil
	}
	var out []TopicPartition
	for _, tp := range m.Partitions {
		if tp.Topic != group.OffsetsTopic {
			out = append(out, tp)
		}
	}
	return out
}

// resumed is the state a coordinator that loads Prepare state m with
// pre-added partitions gives the id once m's markers are written: the
// producer may have begun its next transaction on them (at m's epoch) with
// nothing of it committed but m, so they are taken as that transaction's,
// begun now. Markers for partitions it never wrote to change nothing. A
// retry of the EndTxn that wrote m is answered from m's Complete state.
func resumed(m Meta, nowMs int64) Meta {
	next := complete(m, nowMs)
	next.Resumed = next.State
	next.State, next.Partitions, next.StartMs = Ongoing, m.Preadded, nowMs
	return next
}

// Answered is the producer id and epoch an EndTxn v5 answers for m: the ones the
// producer uses for its next transaction.
func (m Meta) Answered() (int64, int16) {
	if m.ProducerEpoch == math.MaxInt16 && m.NextProducerID != 0 {
		return m.NextProducerID, 0
	}
	return m.ProducerID, m.ProducerEpoch
}

// markerVersion is the transaction version the markers of Prepare state m
// carry (KIP-1228). 2 when m's epoch is above the one the transaction's
// batches were written at: every end of a transaction-version-2 producer
// bumps it (EndTxn v5, and the aborts of InitProducerId and of the timeout).
// Earlier builds saturated those aborts' bump at math.MaxInt16-1, so a
// Prepare state at that epoch may hold the batches' own epoch: its markers
// are sent as version 1, which accepts the equal epoch. (A fence at
// math.MaxInt16 cannot bump either, but no producer holds that epoch to
// begin a transaction at it.)
func (m Meta) markerVersion() int8 {
	if m.TV2 && m.ProducerEpoch != math.MaxInt16-1 {
		return 2
	}
	return 1
}

// A transition is the verdict on a request: an error code (0: accepted), the new
// Meta to write when write is set, and whether markers must be written next.
type transition struct {
	code  int16
	next  Meta
	write bool
}

func refuse(e *kerr.Error) transition { return transition{code: e.Code} }

// initProducer answers InitProducerId for an existing Meta m (nil: a new id, for
// which newPID is used). reqPID/reqEpoch are the client's current id and epoch
// (KIP-360; -1 when it has none).
func initProducer(m *Meta, newPID func() (int64, error), timeoutMs int32, reqPID int64, reqEpoch int16, nowMs int64) (transition, error) {
	if m == nil {
		pid, err := newPID()
		if err != nil {
			return transition{}, err
		}
		return transition{write: true, next: Meta{ProducerID: pid, TimeoutMs: timeoutMs, State: Empty, StartMs: -1, LastUpdateMs: nowMs, LastProducerEpoch: -1}}, nil
	}
	if reqPID >= 0 && isInitRetry(m, reqPID, reqEpoch) {
		return transition{}, nil // answered with m's producer id and epoch
	}
	if reqPID >= 0 && (reqPID != m.ProducerID || reqEpoch != m.ProducerEpoch) {
		return refuse(kerr.ProducerFenced), nil
	}
	switch m.State {
	case PrepareCommit, PrepareAbort:
		return refuse(kerr.ConcurrentTransactions), nil
	case Ongoing:
		// A new incarnation of the producer: fence the old one by bumping the
		// epoch and abort what it left open; the client retries until done.
		// A KIP-360 request (the producer's own id and epoch) keeps the epoch
		// before, as Kafka's abort does, so its retry is answered
		// (isInitRetry); a new incarnation's does not: the fenced producer's
		// EndTxn at that epoch is not a retry (isEndRetry).
		next := *m
		next.ProducerEpoch, next.State, next.LastUpdateMs, next.Resumed = bumpEpoch(m.ProducerEpoch), PrepareAbort, nowMs, Empty
		next.LastProducerEpoch = -1
		if reqPID >= 0 && next.ProducerEpoch < math.MaxInt16 {
			next.LastProducerEpoch = m.ProducerEpoch
		}
		return transition{code: kerr.ConcurrentTransactions.Code, write: true, next: next}, nil
	}
	next := *m
	next.TimeoutMs, next.State, next.Partitions, next.StartMs, next.LastUpdateMs, next.Resumed = timeoutMs, Empty, nil, -1, nowMs, Empty
	next.LastProducerEpoch = -1 // a new incarnation: the epoch before is fenced
	if reqPID >= 0 {
		next.LastProducerEpoch = m.ProducerEpoch
	}
	if m.ProducerEpoch >= math.MaxInt16-1 {
		pid, err := newPID()
		if err != nil {
			return transition{}, err
		}
		next.PrevProducerID, next.ProducerID, next.ProducerEpoch = m.ProducerID, pid, 0
	} else {
		next.ProducerEpoch = m.ProducerEpoch + 1
	}
	return transition{write: true, next: next}, nil
}

// isInitRetry tells whether a KIP-360 InitProducerId from pid at epoch is the
// retry of the request that gave m its producer id and epoch (an
// InitProducerId, or an EndTxn v5), whose answer the client lost: only the
// client that sent it holds that epoch, as a new incarnation's InitProducerId
// and its fence clear LastProducerEpoch (after the timeout's abort it is the
// timed-out producer's, see expire). Kafka answers it with the current
// epoch (TransactionMetadata.prepareIncrementProducerEpoch); so it is while
// the id has no transaction, as it has until that client begins one.
func isInitRetry(m *Meta, pid int64, epoch int16) bool {
	switch {
	case m.LastProducerEpoch < 0 || epoch != m.LastProducerEpoch:
		return false
	case m.State != Empty && m.State != CompleteCommit && m.State != CompleteAbort:
		return false
	case m.ProducerEpoch == 0:
		return pid == m.PrevProducerID // moved to a new producer id
	}
	return pid == m.ProducerID
}

// bumpEpoch is the epoch a fence moves the producer to (the aborts of
// InitProducerId and of the timeout): one up, to math.MaxInt16 included, as
// Kafka's prepareFenceProducerEpoch. That epoch is never answered to a
// client, and the next InitProducerId moves the id to a new producer id. At
// math.MaxInt16 the abort goes on at the same epoch, as Kafka's does.
func bumpEpoch(e int16) int16 {
	if e == math.MaxInt16 {
		return e
	}
	return e + 1
}

// checkProducer validates a request's producer id and epoch against m. Any
// epoch but the current one is PRODUCER_FENCED, a newer one included, as
// Kafka 4's coordinator answers AddPartitionsToTxn, its VerifyOnly form and
// EndTxn.
func checkProducer(m *Meta, pid int64, epoch int16) *kerr.Error {
	switch {
	case m == nil || m.ProducerID != pid:
		return kerr.InvalidProducerIDMapping
	case epoch != m.ProducerEpoch:
		return kerr.ProducerFenced
	}
	return nil
}

// addPartitions answers AddPartitionsToTxn (and AddOffsetsToTxn, with the group's
// offsets partition).
func addPartitions(m *Meta, pid int64, epoch int16, add []TopicPartition, nowMs int64) transition {
	if e := checkProducer(m, pid, epoch); e != nil {
		return refuse(e)
	}
	switch m.State {
	case PrepareCommit, PrepareAbort:
		return refuse(kerr.ConcurrentTransactions)
	case Ongoing:
		if containsAll(m.Partitions, add) {
			return transition{}
		}
	}
	next := *m
	if m.State != Ongoing {
		next.Partitions, next.StartMs = nil, nowMs
	}
	next.Partitions = union(next.Partitions, add)
	next.State, next.LastUpdateMs = Ongoing, nowMs
	return transition{write: true, next: next}
}

// endTxn answers EndTxn: an Ongoing transaction moves to PrepareCommit or
// PrepareAbort (markers follow); a retried EndTxn of a completed one succeeds.
func endTxn(m *Meta, pid int64, epoch int16, commit bool, nowMs int64) transition {
	if e := checkProducer(m, pid, epoch); e != nil {
		return refuse(e)
	}
	switch m.State {
	case Ongoing:
		next := *m
		next.TV2, next.State, next.LastUpdateMs, next.Resumed = false, PrepareAbort, nowMs, Empty
		if commit {
			next.State = PrepareCommit
		}
		return transition{write: true, next: next}
	case CompleteCommit:
		if commit {
			return transition{}
		}
	case CompleteAbort:
		if !commit {
			return transition{}
		}
	case PrepareCommit, PrepareAbort:
		if (m.State == PrepareCommit) == commit {
			return refuse(kerr.ConcurrentTransactions)
		}
	}
	return refuse(kerr.InvalidTxnState)
}

// endTxnV2 answers EndTxn v5 (KIP-890, transaction version 2): every commit and
// abort bumps the epoch, so a late batch of the ended transaction is fenced at
// its partitions by the markers' newer epoch instead of joining the next one. An
// abort without a transaction is allowed (it only bumps the epoch). A retry
// carries the epoch before the bump: it succeeds once the transaction completed
// the same way (CONCURRENT_TRANSACTIONS while it completes); asking for the
// other outcome it is INVALID_TXN_STATE, as Kafka answers it.
func endTxnV2(m *Meta, pid int64, epoch int16, commit bool, newPID func() (int64, error), nowMs int64) (transition, error) {
	if m != nil && (m.TV2 || m.LastProducerEpoch >= 0) && isEndRetry(m, pid, epoch) {
		state := m.State
		if m.Resumed != Empty {
			state = m.Resumed
		}
		switch {
		case state == CompleteCommit && commit, state == CompleteAbort && !commit:
			return transition{}, nil
		case state == PrepareCommit && commit, state == PrepareAbort && !commit:
			return refuse(kerr.ConcurrentTransactions), nil
		case state != Ongoing && state != Empty:
			return refuse(kerr.InvalidTxnState), nil // the retry of the other outcome
		}
	}
	if e := checkProducer(m, pid, epoch); e != nil {
		return refuse(e), nil
	}
	switch m.State {
	case PrepareCommit, PrepareAbort:
		return refuse(kerr.ConcurrentTransactions), nil
	case Empty, CompleteCommit, CompleteAbort:
		if commit {
			return refuse(kerr.InvalidTxnState), nil
		}
	}
	next := *m
	next.TV2, next.State, next.LastUpdateMs, next.Resumed = true, PrepareAbort, nowMs, Empty
	next.LastProducerEpoch = m.ProducerEpoch
	if commit {
		next.State = PrepareCommit
	}
	if m.State != Ongoing {
		next.Partitions, next.StartMs = nil, nowMs // as Kafka, the abort is a transaction begun now
	}
	next.ProducerEpoch = m.ProducerEpoch + 1 // at most MaxInt16: no client holds that epoch (bumpEpoch, Answered)
	if next.ProducerEpoch == math.MaxInt16 {
		id, err := newPID()
		if err != nil {
			return transition{}, err
		}
		next.NextProducerID = id
	}
	return transition{write: true, next: next}, nil
}

// lastEpochUnknown is Meta.LastProducerEpoch of a state whose record did not
// keep it (written by a build before it did).
const lastEpochUnknown int16 = -2

// isEndRetry tells whether a TV2 EndTxn from pid at epoch is the retry of the
// end that produced m: it carries the epoch that end began at
// (LastProducerEpoch), which InitProducerId's fence clears, so a producer a
// new incarnation fenced is refused at the epoch before the fence's bump, not
// taken as a retry (Kafka 4.4 takes it as one: its fence keeps the epoch
// before). The timeout's abort keeps it (expire), as Kafka's does: the
// timed-out producer's abort is its retry. A state at math.MaxInt16 without
// a next producer id is a fence's (bumpEpoch), not an end's. For a state
// loaded without the epoch the end began at, the epoch before m's is taken.
func isEndRetry(m *Meta, pid int64, epoch int16) bool {
	if m.LastProducerEpoch != lastEpochUnknown && epoch != m.LastProducerEpoch {
		return false
	}
	if pid == m.ProducerID && epoch == m.ProducerEpoch-1 && (m.ProducerEpoch < math.MaxInt16 || m.NextProducerID != 0) {
		return true
	}
	return m.ProducerEpoch == 0 && pid == m.PrevProducerID && epoch == math.MaxInt16-1
}

// complete is the state after the markers of a Prepare state are written. It
// keeps the transaction's start, as Kafka's prepareComplete does (shown by
// DescribeTransactions until the next transaction starts).
func complete(m Meta, nowMs int64) Meta {
	next := m
	next.State = CompleteAbort
	if m.State == PrepareCommit {
		next.State = CompleteCommit
	}
	next.Partitions, next.Preadded, next.LastUpdateMs = nil, nil, nowMs
	if m.ProducerEpoch == math.MaxInt16 && m.NextProducerID != 0 {
		next.PrevProducerID, next.ProducerID, next.ProducerEpoch, next.NextProducerID = m.ProducerID, m.NextProducerID, 0, 0
	}
	return next
}

// expire is the state of an Ongoing transaction that outlived its timeout: the
// epoch is bumped (the producer is fenced) and it is aborted. The epoch before
// is kept, as Kafka's transaction-version-2 abort keeps it: the producer's
// EndTxn v5 abort at that epoch is the retry of this one, answered with the
// new epoch, so it goes on (a KIP-360 InitProducerId at it too). Not at
// math.MaxInt16, an epoch no client may be answered.
func expire(m Meta, nowMs int64) Meta {
	next := m
	next.ProducerEpoch, next.State, next.LastUpdateMs, next.Resumed = bumpEpoch(m.ProducerEpoch), PrepareAbort, nowMs, Empty
	next.LastProducerEpoch = -1
	if next.ProducerEpoch < math.MaxInt16 {
		next.LastProducerEpoch = m.ProducerEpoch
	}
	return next
}

// EachTopic calls fn once per run of one topic in tps (each topic once when tps
// is sorted, as Meta.Partitions is) with that run's partitions.
func EachTopic(tps []TopicPartition, fn func(topic string, partitions []int32)) {
	for i := 0; i < len(tps); {
		j := i
		var ps []int32
		for ; j < len(tps) && tps[j].Topic == tps[i].Topic; j++ {
			ps = append(ps, tps[j].Partition)
		}
		fn(tps[i].Topic, ps)
		i = j
	}
}

func containsAll(have, want []TopicPartition) bool {
	for _, tp := range want {
		if _, ok := slices.BinarySearchFunc(have, tp, compareTP); !ok {
			return false
		}
	}
	return true
}

func union(a, b []TopicPartition) []TopicPartition {
	set := make(map[TopicPartition]struct{}, len(a)+len(b))
	for _, tp := range a {
		set[tp] = struct{}{}
	}
	for _, tp := range b {
		set[tp] = struct{}{}
	}
	return slices.SortedFunc(maps.Keys(set), compareTP)
}

func compareTP(a, b TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}
