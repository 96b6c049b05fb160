// Package replica owns the partitions this broker hosts: the leader's view of each
// partition (high-water mark, leader epoch, idempotent-producer state) on top of its
// storage.Log, and the watchers through which delayed operations wait.
//
// The high-water mark (HWM) is the end of what is safe to show consumers and to
// acknowledge with acks=all. With the default group-commit flush policy it is the
// fsynced end of the log, so nothing unsynced is ever visible or acknowledged; with
// an interval flush policy (Kafka's page-cache model) it is the log end offset.
// Replication later adds followers to the same minimum.
//
// # Replication core
//
// The replication rules (high-water mark, ISR expansion and shrinking, a failed
// leader's resignation, divergence and truncation, the follower's high-water
// mark) are pure functions and a tracker of follower progress in rules.go,
// driven step by step by testdata/rules/*.txt. Partition applies their
// decisions and does the I/O; the fetcher (fetcher.go) and the ISR proposals
// (Manager.proposeISR) are the drivers. A follower the leader proposes adding
// to the ISR holds the high-water mark from the proposal until the outcome is
// known (Kafka's maximal ISR): the controller may commit it and make it leader
// in one step.
//
// # Concurrency
//
// A partition's state has three locks, always taken in this order:
//
//  1. appendMu serialises appends and truncations (offsets, producer state and
//     the log end move together) and role changes: a leader's append is
//     stamped with the epoch it was checked against.
//  2. mu guards the role, the leader epoch, the start offset of this broker's
//     leadership, the replica set and ISR, and the follower tracker: one lock,
//     so they always agree. The high-water mark is also only written with mu
//     held.
//  3. txnMu guards the transaction state (txn.go); watchMu the watcher sets.
//     Neither is held while taking another partition lock.
//
// The atomics leader, leaderEpoch, isrSize, maximalISRSize, replicaCount and highWatermark are published
// copies of state mu guards, written only with mu held, so hot paths (produce,
// fetch, the fetcher) read them without locking. closed, config and tier are
// independent atomics. Reads of the log take no partition lock. No lock is held
// while sending to the controller; watchers are fired, never waited on. Every
// lock of a partition and of the Manager is released by defer (in a small
// function where it covers only part of the work), so a request that panics
// under one (the broker recovers the panic) does not leave the partition or
// every later request waiting for it.
//
// # Goroutines
//
// A Partition starts none. The Manager owns the fetchers (one per leader
// broker) and the ISR proposals in flight; Manager.Close cancels and waits for
// all of them before it closes the logs.
package replica

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/storage"
)

// Errors a partition returns; handlers map them to Kafka codes.
var (
	// ErrNotLeader: this broker does not lead the partition. NOT_LEADER_OR_FOLLOWER;
	// the client refreshes metadata and retries.
	ErrNotLeader = errors.New("not the leader for this partition")
	// ErrNotEnoughReplicas: acks=all while the ISR is smaller than
	// min.insync.replicas (capped at the number of replicas, underMinISR);
	// nothing was appended. NOT_ENOUGH_REPLICAS; retriable.
	ErrNotEnoughReplicas = errors.New("not enough in-sync replicas")
	// ErrTimeout: acks=all was not satisfied within the request timeout; the batch was
	// appended and may still become durable. REQUEST_TIMED_OUT.
	ErrTimeout = errors.New("timed out waiting for the high-water mark")
	// ErrRecordTooLarge: a batch exceeds max.message.bytes. MESSAGE_TOO_LARGE.
	ErrRecordTooLarge = errors.New("record batch larger than max.message.bytes")
	// ErrInvalidRecord: a batch a client may not write (control batch, several
	// batches from one idempotent producer in one request). INVALID_RECORD.
	ErrInvalidRecord = errors.New("invalid record")
	// ErrInvalidTimestamp: a client's record has a CreateTime outside the topic's
	// message.timestamp.before.max.ms / after.max.ms window; nothing was
	// appended. INVALID_TIMESTAMP. Errors wrapping it are *TimestampError.
	ErrInvalidTimestamp = errors.New("invalid timestamp")
	// ErrClosed: the partition was removed or the broker is stopping.
	// NOT_LEADER_OR_FOLLOWER; the client retries elsewhere.
	ErrClosed = errors.New("partition closed")
	// ErrOffsetNotAvailable: a new leader's high-water mark has not yet reached the
	// start of its epoch, so "latest" would be below what earlier leaders exposed.
	// OFFSET_NOT_AVAILABLE; the client retries once followers have fetched.
	ErrOffsetNotAvailable = errors.New("high-water mark not yet known under the new leader")
)

// Partition is one partition replica hosted by this broker.
type Partition struct {
	Topic   string
	TopicID metadata.UUID
	Index   int32

	log *storage.Log
	// hwmWaiters pools WaitHighWatermark's waiters. Per partition, not per
	// process: a partition lives in one testing/synctest bubble, and a timer or
	// channel made in one bubble must not be used from another.
	hwmWaiters sync.Pool
	// groupCommit: the HWM follows the durable end (else the log end).
	groupCommit bool
	// markerFlushWithin is markerFlushWithin (txn.go), apart for a test.
	markerFlushWithin time.Duration

	appendMu  sync.Mutex
	producers *producerState
	// snapshotOffset is where the newest producer-state snapshot this
	// partition wrote or loaded lies (-1: none), snapshotRolls the log's roll
	// count when it last checked (snapshot.go). Both under appendMu.
	snapshotOffset int64
	snapshotRolls  int64
	// expiry tells the producers a loaded snapshot leaves out.
	expiry producerExpiry
	// verifications are the producers' outstanding transaction verifications
	// (verify.go), lastGuard the last guard handed out; both under appendMu.
	verifications map[int64]verification
	lastGuard     VerificationGuard

	// txnMu guards txns, changed under appendMu and read by fetches; see txn.go.
	txnMu sync.Mutex
	txns  *txnState

	localID int32 // this broker
	closed  atomic.Bool
	config  atomic.Pointer[metadata.TopicConfig]
	tier    atomic.Pointer[storage.Tier] // nil unless tiered (tiered.go)
	// tierMu serialises applyTier's changes of tier; remoteDeleting, which it
	// guards, is set while the remote part of a dropped tier is deleted.
	tierMu         sync.Mutex
	remoteDeleting bool

	// Published copies of mu's state, written only with mu held.
	highWatermark atomic.Int64
	leaderEpoch   atomic.Int32
	leader        atomic.Bool
	isrSize       atomic.Int32
	// maximalISRSize counts the follower an unresolved expansion adds too
	// (Kafka's maximal ISR).
	maximalISRSize atomic.Int32
	replicaCount   atomic.Int32

	// mu guards the role and the replica set as this broker knows them (see the
	// package doc and replication.go).
	mu struct {
		sync.Mutex
		leader      bool
		leaderID    int32
		leaderEpoch int32
		// epochStart is the log end when this broker became leader.
		epochStart int64
		// set holds the replica set, the ISR and the partition epoch; as leader
		// also every follower's progress.
		set        *tracker
		isrPending bool // an AlterPartition is in flight
		// resignRetry is the pending retry of a failed log's resignation
		// (scheduleResign), resignBackoff the wait before it.
		resignRetry   *time.Timer
		resignBackoff time.Duration
	}

	// isrProposer sends an ISR change to the controller, isrEligible reports
	// whether a broker may join an ISR, and replicaLagMax is
	// replica.lag.time.max.ms (all set by the Manager).
	isrProposer   func(isrChange)
	isrEligible   func(id int32, epoch int64) bool
	replicaLagMax time.Duration

	watchMu sync.Mutex
	// Made by their first watcher (put): an idle partition has none.
	watchers    map[*Watcher]struct{} // woken on HWM and leadership changes
	leoWatchers map[*Watcher]struct{} // woken on appends (followers' fetches)
}

// put sets m[k] = v, making the map first if it is nil. The per-partition maps
// are made so, on first use: an empty map costs about 48 bytes, and a broker
// hosting thousands of idle partitions would hold several per partition.
func put[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = make(map[K]V)
	}
	(*m)[k] = v
}

// Watcher is woken (a non-blocking send on C) whenever a watched partition's
// high-water mark moves or its leadership changes. One Watcher may watch many
// partitions; a delayed fetch re-checks them all when woken.
type Watcher struct{ C chan struct{} }

// NewWatcher returns a watcher with a one-slot wake-up channel.
func NewWatcher() *Watcher { return &Watcher{C: make(chan struct{}, 1)} }

func newPartition(topic string, id metadata.UUID, index int32, log *storage.Log, groupCommit bool, localID int32, expiry producerExpiry) (*Partition, error) {
	p := &Partition{
		Topic: topic, TopicID: id, Index: index,
		log:         log,
		groupCommit: groupCommit,
		localID:     localID,
		expiry:      expiry,
		producers:   newProducerState(),
		txns:        newTxnState(),

		markerFlushWithin: markerFlushWithin,
	}
	p.mu.leaderID = metadata.NoLeader
	p.mu.set = newTracker(localID, -1, nil, nil, false, time.Time{})
	// Rebuild idempotent-producer and transaction state from the log.
	if err := p.rebuildProducerState(); err != nil {
		return nil, err
	}
	// Until this broker learns its role the HWM stays at the log start: a replica's
	// own log end may hold records the leader never committed.
	p.highWatermark.Store(log.LogStartOffset())
	log.SetDurableListener(func(int64) { p.maybeAdvanceHighWatermark() })
	log.SetFailureListener(func(error) {
		p.resignIfFailed()
		p.fire() // waiters for the high-water mark learn of the failure
	})
	return p, nil
}

// rebuildProducerState replaces the idempotent-producer and transaction state with
// what the log's batch headers say (on open and after a truncation), starting
// from the newest usable producer-state snapshot (snapshot.go). When the log
// has segments whose aborted-transaction index must be rebuilt (a kill, or a
// directory written before the index existed), it hands the log every abort
// from the first of them on, so the scan starts at or below that segment
// (an older snapshot, or the log start) unless no abort marker lies between
// it and the newest snapshot: a kill leaves the active segment stale, and its
// roll's snapshot follows its first append. The caller holds appendMu or owns
// the partition exclusively.
func (p *Partition) rebuildProducerState() error {
	stale, rebuild := p.log.StaleAbortIndex()
	producers, txns, from, ok := p.loadSnapshot(p.log.LogEndOffset())
	if rebuild && from > stale {
		found, err := p.abortMarkerIn(stale, from)
		if err != nil {
			return fmt.Errorf("rebuilding producer state of %s-%d: %w", p.Topic, p.Index, err)
		}
		if found {
			producers, txns, from, ok = p.loadSnapshot(stale)
		}
	}
	var aborts []storage.AbortEntry
	err := p.log.ScanBatches(from, func(h batch.Header, body []byte) error {
		if e, aborted := replayBatch(producers, txns, h, body); aborted && rebuild && e.LastOffset >= stale {
			aborts = append(aborts, e)
		}
		return nil
	})
	if err == nil && rebuild {
		err = p.log.RebuildAbortIndex(stale, aborts)
	}
	if err != nil {
		return fmt.Errorf("rebuilding producer state of %s-%d: %w", p.Topic, p.Index, err)
	}
	p.snapshotOffset, p.snapshotRolls = -1, p.log.Rolls()
	if ok {
		p.snapshotOffset = from
	}
	p.producers = producers
	p.setTxns(txns)
	return nil
}

// replayBatch applies the stored batch h (body: the whole batch of a control
// batch, else nil) to producer and transaction state, as its append did, and
// returns the aborted transaction it ends, if any.
func replayBatch(producers *producerState, txns *txnState, h batch.Header, body []byte) (storage.AbortEntry, bool) {
	if h.Idempotent() && !h.Control() {
		// A compacted batch may hold fewer records than its offset range: the
		// sequence range follows the offsets (LastOffsetDelta), as produced.
		producers.record(h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.LastOffsetDelta+1, h.BaseOffset, h.LastOffset(), h.MaxTimestamp)
	}
	ct, coordinatorEpoch := controlType(h, body)
	if ct == batch.ControlAbort || ct == batch.ControlCommit {
		producers.fence(h.ProducerID, h.ProducerEpoch, coordinatorEpoch, h.MaxTimestamp)
	}
	e, aborted := txns.aborts(h, ct)
	txns.observe(h, ct)
	return e, aborted
}

// setTxns makes txns the partition's transaction state.
func (p *Partition) setTxns(txns *txnState) {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	p.txns = txns
}

// errStopScan ends a ScanBatches walk early.
var errStopScan = errors.New("scan stopped")

// abortMarkerIn reports whether an abort marker lies in [from, to).
func (p *Partition) abortMarkerIn(from, to int64) (bool, error) {
	found := false
	err := p.log.ScanBatches(from, func(h batch.Header, body []byte) error {
		if h.BaseOffset >= to {
			return errStopScan
		}
		if ct, _ := controlType(h, body); ct == batch.ControlAbort {
			found = true
			return errStopScan
		}
		return nil
	})
	if errors.Is(err, errStopScan) {
		err = nil
	}
	return found, err
}

// controlType is the marker type of control batch b (whole batch bytes) and its
// coordinator epoch, or -1 for any other batch or a control record that is not a
// marker.
func controlType(h batch.Header, b []byte) (batch.ControlType, int32) {
	if !h.Control() {
		return -1, -1
	}
	t, coordinatorEpoch, err := batch.ParseMarker(b)
	if err != nil {
		return -1, -1
	}
	return t, coordinatorEpoch
}

// observeTxns feeds appended batches (whole, stamped) to the transaction state,
// and each abort to the log's aborted-transaction index first: a last stable
// offset past the transaction is then only ever read (under txnMu) once a fetch
// can find its entry. The log is called without txnMu (its failure listener
// takes mu); the open transactions change only under appendMu, which must be
// held. An error is the log's (storage.Log.AddAbortedTxn fails it). The
// records' CRCs were checked on the way into the log and are not again.
func (p *Partition) observeTxns(records []byte) error {
	for it := batch.NewValidatedStoredIter(records); it.Next(); {
		h := it.Header()
		if !h.Transactional() {
			continue
		}
		ct, coordinatorEpoch := controlType(h, it.Batch())
		if ct == batch.ControlAbort || ct == batch.ControlCommit {
			p.producers.fence(h.ProducerID, h.ProducerEpoch, coordinatorEpoch, h.MaxTimestamp)
			// Its transaction ended: a verification begun before does
			// not let a later batch open another.
			delete(p.verifications, h.ProducerID)
		}
		if e, aborted := p.txns.aborts(h, ct); aborted {
			if err := p.log.AddAbortedTxn(e); err != nil {
				return err
			}
		}
		p.observeTxn(h, ct)
	}
	return nil
}

// observeTxn feeds batch h (marker type ct) to the transaction state.
func (p *Partition) observeTxn(h batch.Header, ct batch.ControlType) {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	p.txns.observe(h, ct)
}

// safeEnd is the offset the HWM may reach with no followers.
func (p *Partition) safeEnd() int64 {
	if p.groupCommit {
		return p.log.DurableOffset()
	}
	return p.log.LogEndOffset()
}

// maybeAdvanceHighWatermark moves the leader's HWM up to the minimum over the ISR
// of what each member holds durably (the leader's safe end, the followers' fetch
// offsets). It never moves the HWM backwards.
func (p *Partition) maybeAdvanceHighWatermark() {
	if !p.leader.Load() { // a follower's fsyncs: no lock taken
		return
	}
	if p.advanceHighWatermark() {
		p.fire()
	}
}

// advanceHighWatermark is maybeAdvanceHighWatermarkLocked taking mu.
func (p *Partition) advanceHighWatermark() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maybeAdvanceHighWatermarkLocked()
}

// maybeAdvanceHighWatermarkLocked is maybeAdvanceHighWatermark with mu held;
// it reports whether the HWM moved (the caller fires the watchers).
func (p *Partition) maybeAdvanceHighWatermarkLocked() bool {
	if !p.mu.leader {
		return false
	}
	l := leaderState{safeEnd: p.safeEnd(), logEnd: p.log.LogEndOffset(), minISR: p.minISR(), now: time.Now(), maxLag: p.replicaLagMax, eligible: p.isrEligible}
	return p.setHighWatermarkLocked(max(p.highWatermark.Load(), p.mu.set.highWatermark(l)))
}

// minISR is the topic's min.insync.replicas (1 before a configuration is set).
func (p *Partition) minISR() int32 {
	if cfg := p.Config(); cfg != nil {
		return cfg.MinInsyncReplicas
	}
	return 1
}

// maxRecordBytes is the topic's max.decompressed.message.bytes (no limit
// before a configuration is set).
func (p *Partition) maxRecordBytes() int {
	if cfg := p.Config(); cfg != nil {
		return int(cfg.MaxDecompressedMessageBytes)
	}
	return math.MaxInt32
}

// underMinISR reports whether the committed ISR is smaller than
// min.insync.replicas allows (underMinISR), by the published copies: acks=all
// is then refused before the append (NOT_ENOUGH_REPLICAS).
func (p *Partition) underMinISR() bool {
	return underMinISR(int(p.isrSize.Load()), int(p.replicaCount.Load()), p.minISR())
}

// underMinMaximalISR is underMinISR over the maximal ISR: an acks=all write
// whose records are committed is then answered
// NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka's checkEnoughReplicasReachOffset
// does.
func (p *Partition) underMinMaximalISR() bool {
	return underMinISR(int(p.maximalISRSize.Load()), int(p.replicaCount.Load()), p.minISR())
}

// setHighWatermarkLocked publishes hwm; mu must be held. It reports a change.
func (p *Partition) setHighWatermarkLocked(hwm int64) bool {
	return p.highWatermark.Swap(hwm) != hwm
}

// Watch registers w to be woken on HWM and leadership changes.
func (p *Partition) Watch(w *Watcher) {
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
	put(&p.watchers, w, struct{}{})
}

// Unwatch removes w.
func (p *Partition) Unwatch(w *Watcher) {
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
	delete(p.watchers, w)
}

func (p *Partition) fire() {
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
	for w := range p.watchers {
		select {
		case w.C <- struct{}{}:
		default:
		}
	}
}

// HighWatermark is the end (exclusive) of what consumers may read.
func (p *Partition) HighWatermark() int64 { return p.highWatermark.Load() }

// LogStartOffset is the first offset still retained.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// LogEndOffset is the offset the next appended record gets.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// LeaderEpoch is the current leader epoch.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// IsLeader reports whether this broker leads the partition.
func (p *Partition) IsLeader() bool { return p.leader.Load() && !p.closed.Load() }

// Config is the topic's effective configuration.
func (p *Partition) Config() *metadata.TopicConfig { return p.config.Load() }

// Log is the partition's log, for size and segment statistics.
func (p *Partition) Log() *storage.Log { return p.log }

// setConfig makes cfg the partition's configuration. cfg may be shared with
// other partitions and is never modified.
func (p *Partition) setConfig(cfg *metadata.TopicConfig) { p.config.Store(cfg) }

// close stops serving the partition; waiters are woken and find it closed.
func (p *Partition) close() error {
	p.closed.Store(true)
	p.stopResignRetry()
	p.fire()
	p.fireAppend()
	p.snapshotOnClose()
	return p.log.Close()
}

// snapshotOnClose writes the producer snapshot of a log worth one, once the
// appends in flight finish (the state then covers the whole log): a large
// log, or one that lost records at its start (retention, DeleteRecords)
// while it knows producers, which the records left may no longer name. Kafka
// keeps such a producer until it expires, across a clean restart too.
func (p *Partition) snapshotOnClose() {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.log.Size() >= closeSnapshotMinBytes || (p.log.LogStartOffset() > 0 && len(p.producers.entries) > 0) {
		p.writeSnapshot()
	}
}

// AppendResult is where a produced batch landed.
type AppendResult struct {
	BaseOffset     int64
	LastOffset     int64
	LogAppendTime  int64 // -1 unless the topic uses LogAppendTime
	LogStartOffset int64
	// LeaderEpoch is the leader epoch the append was made at, which
	// WaitCommitted checks the records still hold.
	LeaderEpoch int32
}

// Append appends the record batches of one produce request as leader. A retried
// batch of an idempotent producer is not appended again: its original offsets are
// returned. For acks=all the caller then waits with WaitCommitted.
func (p *Partition) Append(records []byte, acks int16) (AppendResult, error) {
	return p.AppendWith(records, acks, AppendOpts{})
}

// AppendOpts are the choices of AppendWith.
type AppendOpts struct {
	// Verify checks a transactional batch's verification guard, Guard
	// (the Produce of a transactional producer of transaction version 1).
	Verify bool
	Guard  VerificationGuard
	// EpochBump marks a produce of transaction version 2 (Produce v12+ with
	// a transactional id): a transactional batch of a producer with no
	// batch here must start at sequence 0, as Kafka's checkSequence
	// requires of a verification that supports the epoch bump.
	EpochBump bool
	// Followed, asked just before the batch is written, tells whether
	// another append is on its way right behind it (the producer's next
	// request is read already): the log's fsync may then wait for that one
	// too (storage.AppendHints). nil: no.
	Followed func() bool
	// FlushWithin, when positive, lets the batch wait for the fsync of a
	// later append, at most this long, instead of waking the flusher (for
	// records nobody waits to be committed; storage.AppendHints).
	FlushWithin time.Duration
	// Coordinator marks a coordinator's own records (offsets, groups,
	// transactions, share state): their timestamps are not checked against
	// message.timestamp.before.max.ms and after.max.ms, as Kafka checks only
	// a client's.
	Coordinator bool
	// AtLeaderEpoch refuses the append with ErrNotLeader unless this broker
	// leads at LeaderEpoch: the write of a coordinator that loaded the
	// partition under that leadership. Leading again at a newer epoch (a
	// reassignment's, with this broker still the leader) makes the
	// coordinator load the partition again, and a write it began before
	// must not land after that load read the log, where no state would
	// hold it.
	AtLeaderEpoch bool
	LeaderEpoch   int32
}

// checkLeaderEpochLocked refuses an append of opts made at another leader
// epoch than this broker's (AppendOpts.AtLeaderEpoch); appendMu must be held
// (becomeLeader changes the epoch under it).
func (p *Partition) checkLeaderEpochLocked(opts AppendOpts) error {
	if cur := p.leaderEpoch.Load(); opts.AtLeaderEpoch && cur != opts.LeaderEpoch {
		return fmt.Errorf("%w: a write of leader epoch %d, this broker leads at %d", ErrNotLeader, opts.LeaderEpoch, cur)
	}
	return nil
}

// AppendWith is Append with opts.
func (p *Partition) AppendWith(records []byte, acks int16, opts AppendOpts) (AppendResult, error) {
	if !p.IsLeader() {
		return AppendResult{}, ErrNotLeader
	}
	cfg := p.Config()
	if acks == -1 && p.underMinISR() {
		return AppendResult{}, ErrNotEnoughReplicas
	}
	// A compressed batch's records are decompressed once into buf for every
	// check, and buf goes back to the pool before the append waits its turn.
	buf := batch.GetRecordsBuffer()
	records, first, err := validateProduced(records, cfg, opts, buf)
	buf.Release()
	if err != nil {
		return AppendResult{}, err
	}
	return p.afterMarker(first, func() (AppendResult, error) {
		return p.appendLocked(records, first, opts)
	})
}

// validateProduced checks a client's (or a coordinator's, opts) batches as
// Kafka's LogValidator does before they are appended, reading the records of
// a compressed batch in buf. It returns the batches to append (records, or
// the batch rebuilt with the codec the topic's compression.type names) and
// the first one's header.
func validateProduced(records []byte, cfg *metadata.TopicConfig, opts AppendOpts, buf *batch.RecordsBuffer) ([]byte, batch.Header, error) {
	var first batch.Header
	n := 0
	window := timestampWindowOf(cfg, time.Now().UnixMilli())
	target, recompress := storedCompression(cfg)
	var rebuilt []byte
	it := batch.NewIter(records)
	for ; it.Next(); n++ {
		h := it.Header()
		if n == 0 {
			first = h
		}
		if err := checkProducedBatch(h, n, cfg, opts); err != nil {
			return nil, batch.Header{}, err
		}
		// Kafka's LogValidator reads every record, decompressing a
		// compressed batch; the records are walked in place (an
		// uncompressed batch's in the request, a compressed one's in buf).
		// A compressed batch's records are held to
		// max.decompressed.message.bytes, as Kafka's decompressing iterator
		// holds them.
		recs, err := batch.ValidateRecords(h, it.Batch(), buf, int(cfg.MaxDecompressedMessageBytes))
		if err != nil {
			return nil, batch.Header{}, err
		}
		if cfg.CleanupPolicy&metadata.CleanupCompact != 0 {
			if err := requireKeys(h, recs); err != nil {
				return nil, batch.Header{}, err
			}
		}
		if !opts.Coordinator {
			if err := window.check(h, recs); err != nil {
				return nil, batch.Header{}, err
			}
		}
		if err := refuseLogAppendTime(h); err != nil {
			return nil, batch.Header{}, err
		}
		if recompress && h.Codec() != target.Codec {
			if rebuilt, err = batch.Recompress(it.Batch(), h, recs, target); err != nil {
				return nil, batch.Header{}, err
			}
		}
	}
	if err := it.Err(); err != nil {
		return nil, batch.Header{}, err
	}
	if n == 0 {
		return nil, batch.Header{}, fmt.Errorf("%w: no record batch", batch.ErrInvalid)
	}
	if rebuilt == nil {
		return records, first, nil
	}
	// Kafka checks a rebuilt batch's size again.
	if len(rebuilt) > int(cfg.MaxMessageBytes) {
		return nil, batch.Header{}, fmt.Errorf("%w: batch of %d bytes once stored with compression.type %s, max.message.bytes is %d",
			ErrRecordTooLarge, len(rebuilt), cfg.CompressionType, cfg.MaxMessageBytes)
	}
	return rebuilt, first, nil
}

// checkProducedBatch holds produced batch h, the request's nth, to Kafka's
// LogValidator.validateBatch and the topic's max.message.bytes.
func checkProducedBatch(h batch.Header, n int, cfg *metadata.TopicConfig, opts AppendOpts) error {
	switch {
	case h.Size() > int(cfg.MaxMessageBytes):
		return fmt.Errorf("%w: batch of %d bytes, max.message.bytes is %d", ErrRecordTooLarge, h.Size(), cfg.MaxMessageBytes)
	case h.Control():
		return fmt.Errorf("%w: clients may not write control batches", ErrInvalidRecord)
	case h.Transactional() && !h.Idempotent():
		return fmt.Errorf("%w: a transactional batch needs a producer id", ErrInvalidRecord)
	case n > 0:
		// Kafka's LogValidator takes one v2 batch per partition on every
		// path (its message names the compressed one).
		return fmt.Errorf("%w: compressed outer record has more than one batch", ErrInvalidRecord)
	case h.Idempotent() && h.BaseSequence < 0 && !opts.Coordinator:
		// For a client's batch only: a coordinator's transactional batches
		// carry sequence -1 and are appended by AppendAsCoordinator.
		return fmt.Errorf("%w: invalid sequence number %d in a record batch with producer id %d", ErrInvalidRecord, h.BaseSequence, h.ProducerID)
	}
	return nil
}

// storedCompression is the compression the topic's compression.type names
// for its batches, and false for producer (each batch stored as produced).
func storedCompression(cfg *metadata.TopicConfig) (batch.Compression, bool) {
	switch cfg.CompressionType {
	case "uncompressed":
		return batch.Compression{Codec: batch.CodecNone}, true
	case "gzip":
		return batch.Compression{Codec: batch.CodecGzip, Level: int(cfg.CompressionGzipLevel)}, true
	case "snappy":
		return batch.Compression{Codec: batch.CodecSnappy}, true
	case "lz4":
		return batch.Compression{Codec: batch.CodecLZ4, Level: int(cfg.CompressionLz4Level)}, true
	case "zstd":
		return batch.Compression{Codec: batch.CodecZstd, Level: int(cfg.CompressionZstdLevel)}, true
	}
	return batch.Compression{}, false
}

func (p *Partition) appendLocked(records []byte, first batch.Header, opts AppendOpts) (AppendResult, error) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if !p.IsLeader() {
		return AppendResult{}, ErrNotLeader
	}
	if err := p.checkLeaderEpochLocked(opts); err != nil {
		return AppendResult{}, err
	}
	// Kafka's order: a duplicate is answered first; then an older epoch,
	// the verification, the sequence, and a non-transactional batch inside
	// the producer's transaction.
	var seqErr error
	if first.Idempotent() {
		var chk seqCheck
		chk, seqErr = p.producers.check(first.ProducerID, first.ProducerEpoch, first.BaseSequence, first.NumRecords, opts.EpochBump && first.Transactional())
		if chk.duplicate {
			// Kafka's answer to a duplicate: the original offsets, and the
			// original max timestamp as the log append time.
			return AppendResult{
				BaseOffset: chk.original.firstOffset, LastOffset: chk.original.lastOffset,
				LogAppendTime: chk.original.timestamp, LogStartOffset: p.log.LogStartOffset(), LeaderEpoch: p.leaderEpoch.Load(),
			}, nil
		}
	}
	if opts.Verify && !errors.Is(seqErr, ErrInvalidProducerEpoch) {
		if err := p.checkVerificationLocked(first, opts.Guard); err != nil {
			return AppendResult{}, err
		}
	}
	if seqErr != nil {
		return AppendResult{}, seqErr
	}
	if first.Idempotent() && !first.Transactional() && p.inTxn(first.ProducerID) {
		return AppendResult{}, fmt.Errorf("%w: producer %d wrote a non-transactional batch inside its transaction", ErrInvalidTxnState, first.ProducerID)
	}
	if p.markerPendingLocked(first) {
		return AppendResult{}, fmt.Errorf("%w: producer %d at epoch %d", ErrTxnMarkerPending, first.ProducerID, first.ProducerEpoch)
	}
	// Append validated records (CRCs included); the log checks them again
	// without the CRCs.
	hints := storage.AppendHints{Followed: opts.Followed != nil && opts.Followed(), FlushWithin: opts.FlushWithin}
	epoch := p.leaderEpoch.Load()
	info, err := p.log.AppendValidated(records, epoch, hints)
	if err != nil {
		return AppendResult{}, err
	}
	if first.Idempotent() {
		p.producers.record(first.ProducerID, first.ProducerEpoch, first.BaseSequence, first.NumRecords, info.FirstOffset, info.LastOffset, info.MaxTimestamp)
	}
	if first.Transactional() {
		if err := p.observeTxns(records); err != nil {
			return AppendResult{}, err
		}
		delete(p.verifications, first.ProducerID) // the transaction is open: verified
	}
	p.maybeSnapshot()
	p.fireAppend()
	if !p.groupCommit {
		p.maybeAdvanceHighWatermark()
	}
	res := AppendResult{BaseOffset: info.FirstOffset, LastOffset: info.LastOffset, LogAppendTime: -1, LogStartOffset: p.log.LogStartOffset(), LeaderEpoch: epoch}
	if p.Config().MessageTimestampType == metadata.LogAppendTime {
		res.LogAppendTime = info.LogAppendTime
	}
	return res, nil
}

// hwmWaiter is the watcher and timer of one WaitHighWatermark call, reused
// across calls: an acks=all produce waits on every request, and at linger 0
// those are many small requests.
type hwmWaiter struct {
	w     *Watcher
	timer *time.Timer
}

func newHWMWaiter() *hwmWaiter {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &hwmWaiter{w: NewWatcher(), timer: t}
}

// releaseWaiter unregisters hw and returns it to the pool. After Unwatch no
// wake-up can be sent to it (fire holds watchMu), and after Stop its timer
// delivers nothing stale, so draining the watcher's slot leaves it clean.
func (p *Partition) releaseWaiter(hw *hwmWaiter) {
	p.Unwatch(hw.w)
	hw.timer.Stop()
	select {
	case <-hw.w.C:
	default:
	}
	p.hwmWaiters.Put(hw)
}

// WaitHighWatermark waits until the HWM reaches offset (acks=all). A log that
// fails meanwhile (a full disk, a failed fsync: storage.ErrLogFailed) ends the
// wait at once with its error: this leader commits nothing more, and the
// caller answers a retriable error within its timeout instead of at the end.
func (p *Partition) WaitHighWatermark(ctx context.Context, offset int64, timeout time.Duration) error {
	if p.HighWatermark() >= offset && !p.underMinMaximalISR() {
		return nil
	}
	hw, _ := p.hwmWaiters.Get().(*hwmWaiter)
	if hw == nil {
		hw = newHWMWaiter()
	}
	p.Watch(hw.w)
	hw.timer.Reset(timeout)
	defer p.releaseWaiter(hw)
	for p.HighWatermark() < offset {
		if p.closed.Load() || !p.leader.Load() {
			return ErrNotLeader
		}
		if err := p.log.Err(); err != nil {
			return err // fail-stop: this leader commits nothing more (the failure wakes hw)
		}
		select {
		case <-hw.w.C:
		case <-hw.timer.C:
			return ErrTimeout
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if p.underMinMaximalISR() {
		return ErrNotEnoughReplicasAfterAppend
	}
	return nil
}

// WaitCommitted waits until the records of res, appended as leader, are
// committed (acks=all): the high-water mark is past them and the log still
// holds them as written at res.LeaderEpoch. A replica whose leadership moved,
// which truncated them and caught up with the new leader, has a high-water
// mark past their offsets without them: it answers ErrNotLeader, as Kafka's
// leader answers NOT_LEADER_OR_FOLLOWER once it no longer leads.
func (p *Partition) WaitCommitted(ctx context.Context, res AppendResult, timeout time.Duration) error {
	if err := p.WaitHighWatermark(ctx, res.LastOffset+1, timeout); err != nil {
		return err
	}
	if epoch, end := p.log.EndOffsetForEpoch(res.LeaderEpoch); epoch != res.LeaderEpoch || end <= res.LastOffset {
		return fmt.Errorf("%w: offsets %d-%d, appended at leader epoch %d, were truncated", ErrNotLeader, res.BaseOffset, res.LastOffset, res.LeaderEpoch)
	}
	return nil
}

// FetchResult is a read of committed records.
type FetchResult struct {
	Chunk            storage.Chunk // whole batches; Release it when sent
	Remote           []byte        // batches read from the object store instead of Chunk
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Aborted lists, for a read_committed read, the aborted transactions whose
	// batches may be in Chunk or Remote (nil for read_uncommitted).
	Aborted []AbortedTxn
}

// Data is the batches r holds: those read from the object store, or the
// local log's (valid until r.Chunk is released).
func (r FetchResult) Data() ([]byte, error) {
	if len(r.Remote) > 0 {
		return r.Remote, nil
	}
	if r.Chunk.Size == 0 {
		return nil, nil
	}
	return r.Chunk.Bytes()
}

// Read returns whole batches from offset up to the high-water mark
// (read_uncommitted) or the last stable offset (read_committed), at most maxBytes
// unless the first batch alone is larger. An offset between that limit and the
// log end returns no data; below the log start or past the log end it is
// storage.ErrOffsetOutOfRange. A read_committed read also returns the aborted
// transactions the chunk may hold batches of, so the reader can drop them.
func (p *Partition) Read(offset int64, maxBytes int, iso Isolation) (FetchResult, error) {
	if !p.IsLeader() {
		return FetchResult{}, ErrNotLeader
	}
	return p.read(offset, maxBytes, iso)
}

func (p *Partition) read(offset int64, maxBytes int, iso Isolation) (FetchResult, error) {
	hwm := p.HighWatermark()
	lso := p.lastStableOffset(hwm)
	res := FetchResult{HighWatermark: hwm, LastStableOffset: lso, LogStartOffset: p.log.LogStartOffset()}
	limit := hwm
	if iso == ReadCommitted {
		limit = lso
		res.Aborted = []AbortedTxn{}
	}
	if offset == limit || (offset > limit && offset <= p.log.LogEndOffset()) {
		return res, nil
	}
	if tier := p.tier.Load(); tier != nil {
		if offset < p.log.LogStartOffset() {
			if err := loadTier(context.Background(), tier); err != nil {
				return res, err
			}
		}
		res.LogStartOffset = tier.LogStartOffset()
		if offset < p.log.LogStartOffset() && offset >= res.LogStartOffset {
			res, next, err := p.readRemote(tier, offset, maxBytes, res)
			if err == nil && iso == ReadCommitted && len(res.Remote) > 0 {
				// The manifest's aborted transactions (the remote part's index)
				// and those of this replica's own log, once each.
				local, err := p.log.AbortedTxns(offset, next)
				if err != nil {
					return res, err
				}
				res.Aborted = storage.MergeAbortedTxns(append(res.Aborted, local...), tier.AbortedIn(offset, next))
			}
			return res, err
		}
	}
	chunk, err := p.log.Read(offset, maxBytes, limit)
	if err != nil {
		return res, err
	}
	res.Chunk = chunk
	if iso == ReadCommitted && chunk.Size > 0 {
		a, err := p.log.AbortedTxns(offset, chunk.NextOffset)
		if err != nil {
			chunk.Release()
			return FetchResult{}, err
		}
		if a != nil {
			res.Aborted = a
		}
	}
	return res, nil
}

// LastStableOffset is the end (exclusive) of what read_committed consumers may
// read: the first offset of the oldest open transaction, or the high-water mark.
// It is never below the log start offset: a transaction whose first records
// were deleted (DeleteRecords, retention) holds it there, as in Kafka, where a
// lower one would send read_committed consumers looking for "latest" to an
// offset out of range.
func (p *Partition) LastStableOffset() int64 { return p.lastStableOffset(p.HighWatermark()) }

func (p *Partition) lastStableOffset(hwm int64) int64 {
	p.txnMu.Lock()
	lso := p.txns.lastStable(hwm)
	p.txnMu.Unlock()
	return max(lso, min(p.log.LogStartOffset(), hwm))
}

// OpenTransactions is the number of transactions with records on the partition
// and no marker yet.
func (p *Partition) OpenTransactions() int {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	return len(p.txns.open)
}

// InTxnAt reports whether producer pid has an open transaction on the partition
// begun at epoch. A batch of a newer epoch belongs to a later transaction (under
// KIP-890 every end of a transaction bumps the epoch) even while the marker of
// the earlier one is still on its way.
func (p *Partition) InTxnAt(pid int64, epoch int16) bool {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.inTxnAtLocked(pid, epoch)
}

// inTxn reports whether producer pid has an open transaction on the partition.
func (p *Partition) inTxn(pid int64) bool {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	return p.txns.inTxn(pid)
}

// removeExpiredProducers forgets the producers idle for expiration
// (producer.id.expiration.ms) by now, those in an open transaction here
// excepted (producerState.expire), and the transaction verifications started
// that long ago.
func (p *Partition) removeExpiredProducers(now time.Time, expiration time.Duration) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	cutoff := now.Add(-expiration).UnixMilli()
	maps.DeleteFunc(p.verifications, func(_ int64, v verification) bool { return v.started <= cutoff })
	if len(p.producers.entries) == 0 {
		return
	}
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	p.producers.expire(cutoff, p.txns.inTxn)
}

// Special ListOffsets timestamps.
const (
	LatestTimestamp                = -1
	EarliestTimestamp              = -2
	MaxTimestamp                   = -3
	EarliestLocalTimestamp         = -4
	LatestTieredTimestamp          = -5
	EarliestPendingUploadTimestamp = -6
)

// ListOffset answers ListOffsets for one timestamp: the earliest or latest
// (high-water mark, or last stable offset under read_committed) offset, the record with the largest timestamp, or the first
// offset whose timestamp is at or after ts; on a tiered partition also the
// last uploaded offset (-5) and the first not yet uploaded (-6), see
// listOffsetTiered. Epoch is the leader epoch to answer with: for latest the
// current one, for the others the epoch that wrote the offset (-1 for none),
// as Kafka answers. Found is false when no committed record qualifies (Kafka then answers
// offset -1). While a new leader's HWM is below the
// start of its leadership (it inherited a HWM that may lag the one its predecessor
// served), "latest", and any lookup that finds nothing below the HWM, fail with
// ErrOffsetNotAvailable, as in Kafka: the answer could be lower than one a client
// has already seen. ctx bounds a timestamp lookup in the object store (ListOffsets
// v10's TimeoutMillis, KIP-1075); without a deadline, defaultRemoteReadTimeout does.
func (p *Partition) ListOffset(ctx context.Context, ts int64, iso Isolation) (offset, timestamp int64, epoch int32, found bool, err error) {
	if !p.IsLeader() {
		return 0, 0, -1, false, ErrNotLeader
	}
	hwm := p.HighWatermark()
	var notYet error
	if hwm < p.epochStartOffset() {
		notYet = ErrOffsetNotAvailable
	}
	if tier := p.tier.Load(); tier != nil {
		if off, t, e, ok, handled, err := p.listOffsetTiered(ctx, tier, ts); handled {
			return off, t, e, ok, err
		}
	}
	limit := hwm
	if iso == ReadCommitted {
		limit = p.lastStableOffset(hwm)
	}
	switch ts {
	case LatestTimestamp:
		if notYet != nil {
			return 0, 0, -1, false, notYet
		}
		return limit, -1, p.LeaderEpoch(), true, nil
	case EarliestTimestamp, EarliestLocalTimestamp:
		start := p.log.LogStartOffset()
		return start, -1, p.log.EpochAt(start), true, nil
	}
	var off, t int64
	var ok bool
	// Kafka holds the records these lookups read to the topic's
	// max.decompressed.message.bytes (INVALID_RECORD above it).
	switch {
	case ts == MaxTimestamp:
		off, t, err = p.log.MaxTimestamp(p.maxRecordBytes())
		ok = off >= 0
	case ts < 0: // another special timestamp (-5 and -6 without a tier): none
		return -1, -1, -1, false, nil
	default:
		off, t, ok, err = p.log.OffsetForTimestamp(ts, p.maxRecordBytes())
	}
	if err != nil {
		return 0, 0, -1, false, err
	}
	if !ok || off >= limit {
		return -1, -1, -1, false, notYet
	}
	return off, t, p.log.EpochAt(off), true, nil // the epoch that wrote it, as Kafka answers
}

// DeleteRecords moves the log start offset up to offset (-1: the high-water mark)
// and returns the new low watermark. Offsets above the HWM are out of range.
func (p *Partition) DeleteRecords(offset int64) (int64, error) {
	if !p.IsLeader() {
		return -1, ErrNotLeader
	}
	hwm := p.HighWatermark()
	if offset == -1 {
		offset = hwm
	}
	if offset < 0 || offset > hwm {
		return -1, storage.ErrOffsetOutOfRange
	}
	if tier := p.tier.Load(); tier != nil {
		return p.deleteRecordsTiered(tier, offset)
	}
	if err := p.log.DeleteRecords(offset); err != nil {
		return -1, err
	}
	return p.log.LogStartOffset(), nil
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch at or below
// epoch and the offset where it ended (KIP-101/279); of a tiered partition over
// the remote part too (its manifest read first, as ListOffsets earliest does).
func (p *Partition) EndOffsetForEpoch(epoch int32) (int32, int64, error) {
	if !p.IsLeader() {
		return -1, -1, ErrNotLeader
	}
	if tier := p.tier.Load(); tier != nil {
		if err := loadTier(context.Background(), tier); err != nil {
			return -1, -1, err
		}
		e, end := tier.EndOffsetForEpoch(epoch)
		return e, end, nil
	}
	e, end := p.log.EndOffsetForEpoch(epoch)
	return e, end, nil
}

// requireKeys refuses a batch (header h, its validated record section
// records) with a record without a key: a compacted topic keeps the latest
// record per key and has nothing to keep a keyless record by.
func requireKeys(h batch.Header, records []byte) error {
	return batch.WalkRecords(records, h.NumRecords, func(r batch.RawRecord) error {
		if r.Key == nil {
			return fmt.Errorf("%w: a compacted topic needs a key on every record", ErrInvalidRecord)
		}
		return nil
	})
}
