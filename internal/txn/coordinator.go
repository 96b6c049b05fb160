package txn

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/group"
)

// StateTopic is the internal topic transactions are kept in.
const StateTopic = "__transaction_state"

// Errors.
var (
	// ErrCorruptRecord: a replayed __transaction_state record does not decode; the
	// partition is not loaded.
	ErrCorruptRecord = errors.New("txn: corrupt __transaction_state record")
	// ErrCoordinatorFenced: a partition refused a marker because a coordinator
	// with a newer epoch has written markers for the producer there
	// (TRANSACTION_COORDINATOR_FENCED); this coordinator was deposed, and its
	// completion stops (the new coordinator completes the transaction). Not
	// retried.
	ErrCoordinatorFenced = errors.New("txn: transaction coordinator fenced")
)

// Store appends records to a partition of __transaction_state; the broker's
// offsets.Store for the topic. Append returns once they are committed
// (acks=all: replicated and, with the group-commit flush policy, fsynced).
// AppendUnacked returns once they are in the leader's log, in order with every
// other append, without waiting for them to be committed; they need start no
// fsync of their own (a later append's covers them). leaderEpoch is the
// coordinator epoch the partition was loaded at: the store refuses the
// records (group.ErrNotCoordinator) unless the broker still leads at it, so a
// write begun before a reload never lands after the reload read the log.
type Store interface {
	Append(ctx context.Context, partition, leaderEpoch int32, records []group.Record) (first int64, err error)
	AppendUnacked(ctx context.Context, partition, leaderEpoch int32, records []group.Record) error
}

// Markers is one round of transaction markers to write.
type Markers struct {
	ProducerID    int64
	ProducerEpoch int16
	// CoordinatorEpoch is the leader epoch of the coordinator's
	// __transaction_state partition: a partition refuses markers from an
	// older one than the last it wrote for the producer.
	CoordinatorEpoch int32
	Commit           bool
	// TransactionVersion is 2 when the coordinator bumped the epoch for the
	// markers (KIP-1228: partitions then refuse one not above the producer's
	// epoch while a transaction is open there), else 1; see Meta.markerVersion.
	TransactionVersion int8
	Partitions         []TopicPartition
}

// MarkerWriter writes markers on every partition of a transaction, retrying
// until each is written (or its topic is gone) or ctx is done.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, m Markers) error
}

// Config configures a Coordinator.
type Config struct {
	// Partitions of __transaction_state (transaction.state.log.num.partitions).
	Partitions int32
	// MaxTimeout is transaction.max.timeout.ms: InitProducerId with a longer
	// transaction timeout gets INVALID_TRANSACTION_TIMEOUT.
	MaxTimeout time.Duration
	// AbortInterval is how often transactions past their timeout are looked for
	// (transaction.abort.timed.out.transaction.cleanup.interval.ms).
	AbortInterval time.Duration
	// IDExpiration is transactional.id.expiration.ms: an id without a
	// transaction whose state is that old is removed (expireIDs), looked for
	// every IDExpireInterval
	// (transaction.remove.expired.transaction.cleanup.interval.ms).
	IDExpiration     time.Duration
	IDExpireInterval time.Duration
	// RetryBackoff spaces retried state writes.
	RetryBackoff time.Duration
	// CompleteDelay is how long a completed state may wait, after the markers
	// are written, for the id's next state to be written with it in one batch
	// (one fsync for both, where two would run in sequence); after that it is
	// written alone.
	CompleteDelay time.Duration
	// Overlap tells whether the overlap may run (see the package
	// documentation): only when every broker that may load this
	// coordinator's partitions reads the owed markers a state names
	// (metadata.FeatureOwedMarkers), since a build that predates them reads
	// such a state as a plain one and would never write those markers. It is
	// asked at each end of a transaction; nil: always.
	Overlap func() bool
	// Preadd tells whether an EndTxn v5 may pre-add the transaction's
	// partitions to the producer's next one (Meta.Preadded, see the package
	// documentation): only when every broker that may load this
	// coordinator's partitions resumes such a state
	// (metadata.FeaturePreadded), since a build that predates it reads the
	// state as a plain Prepare state and would leave a next transaction
	// begun on them open for good. Asked at each EndTxn; nil: always.
	Preadd func() bool
	Now    func() time.Time
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{Partitions: 50, MaxTimeout: 15 * time.Minute, AbortInterval: 10 * time.Second, RetryBackoff: 100 * time.Millisecond,
		IDExpiration: 7 * 24 * time.Hour, IDExpireInterval: time.Hour, CompleteDelay: 20 * time.Millisecond, Now: time.Now}
}

// Coordinator is the transaction coordinator of the __transaction_state
// partitions this broker leads. See the package documentation.
type Coordinator struct {
	cfg     Config
	store   Store
	markers MarkerWriter
	// newPID hands out a new producer id; it fails when the broker has no
	// block to take one from (the controller did not allocate one).
	newPID func(context.Context) (int64, error)
	log    *slog.Logger

	mu    sync.Mutex
	parts map[int32]*partition

	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// partition is one loaded (or loading) partition of __transaction_state.
type partition struct {
	loaded bool
	epoch  int32           // the coordinator epoch: the partition's leader epoch when loaded
	ctx    context.Context // cancelled on unload: stops its completions
	cancel context.CancelFunc
	txns   map[string]*entry
}

// entry is one transactional id. busy: a state write or a completion is in
// flight; requests for the id meanwhile get CONCURRENT_TRANSACTIONS, so at most
// one change per id is ever in progress, with one exception, the overlap:
// while the completion writes the markers of prep (a Prepare state that
// canOverlap), the next transaction's adds are served (overlapping: one such
// write in flight). idle is closed when neither busy nor overlapping (see
// Completed). unwritten: meta is a completed state not yet in the log; the next
// state write of the id carries it first (see startCompletion). preadded: the
// partitions of the id's last state written, a Prepare state, that the next
// transaction may begin on with its Ongoing state written unacked (Meta.Preadded);
// cleared by that add and by any other state written. resume: meta is a
// loaded Prepare state with pre-added partitions, whose completion resumes it.
type entry struct {
	meta        Meta
	exists      bool // meta has been written, or is a completed state about to be
	busy        bool
	overlapping bool
	prep        *Meta
	unwritten   bool
	preadded    []TopicPartition
	resume      bool
	idle        chan struct{}
}

// hold marks e busy; c.mu must be held.
func (e *entry) hold() {
	e.busy = true
	if e.idle == nil {
		e.idle = make(chan struct{})
	}
}

// unhold ends e's busy spell and, unless an overlapping write is in flight,
// wakes those waiting on it; c.mu must be held.
func (e *entry) unhold() {
	e.busy = false
	e.maybeIdle()
}

// maybeIdle closes e.idle when nothing is in flight; c.mu must be held.
func (e *entry) maybeIdle() {
	if !e.busy && !e.overlapping && e.idle != nil {
		close(e.idle)
		e.idle = nil
	}
}

// withLock runs f with c.mu held, released by defer: a request that panics
// under the lock (the broker recovers the panic) does not leave every later
// request waiting for it.
func (c *Coordinator) withLock(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}

// closedChan is returned by Completed when nothing is in flight.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// New returns a coordinator; call Close when done.
func New(cfg Config, store Store, markers MarkerWriter, newPID func(context.Context) (int64, error), logger *slog.Logger) *Coordinator {
	def := DefaultConfig()
	if cfg.Partitions <= 0 {
		cfg.Partitions = def.Partitions
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = def.MaxTimeout
	}
	if cfg.AbortInterval <= 0 {
		cfg.AbortInterval = def.AbortInterval
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = def.IDExpiration
	}
	if cfg.IDExpireInterval <= 0 {
		cfg.IDExpireInterval = def.IDExpireInterval
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = def.RetryBackoff
	}
	if cfg.CompleteDelay <= 0 {
		cfg.CompleteDelay = def.CompleteDelay
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Coordinator{cfg: cfg, store: store, markers: markers, newPID: newPID, log: logger, parts: map[int32]*partition{}, stop: make(chan struct{})}
	c.wg.Add(1)
	go c.runExpiry()
	return c
}

// PartitionFor is the partition of __transaction_state that owns id.
func (c *Coordinator) PartitionFor(id string) int32 { return group.PartitionFor(id, c.cfg.Partitions) }

// Close stops every completion and the expiry loop. Later calls do nothing.
func (c *Coordinator) Close() {
	c.closeOnce.Do(func() {
		c.withLock(func() {
			for i, p := range c.parts {
				p.cancel()
				delete(c.parts, i)
			}
		})
		close(c.stop)
	})
	c.wg.Wait()
}

// LoadPartitionAt replays partition p and makes this coordinator answer for
// its transactional ids; transactions found prepared are completed (their
// markers written again: a failover finishes what was in flight). epoch is the
// coordinator epoch: p's leader epoch, which the markers of its transactions
// and every state write carry (Store).
func (c *Coordinator) LoadPartitionAt(ctx context.Context, p, epoch int32, records iter.Seq2[group.Record, error]) error {
	pctx, cancel := context.WithCancel(context.Background())
	pt := &partition{epoch: epoch, ctx: pctx, cancel: cancel, txns: map[string]*entry{}}
	c.withLock(func() {
		if old := c.parts[p]; old != nil {
			old.cancel()
		}
		c.parts[p] = pt
	})
	// The replay fills a map of its own: an unload (a newer load of p, or a
	// leadership change) may walk pt.txns meanwhile, under c.mu. It becomes
	// pt's below, under c.mu, if pt is still p's.
	txns := map[string]*entry{}
	for r, err := range records {
		if err != nil {
			c.unload(p, pt)
			return err
		}
		id, m, err := decodeRecord(r)
		if err != nil {
			c.unload(p, pt)
			return err
		}
		if m == nil {
			delete(txns, id)
			continue
		}
		txns[id] = &entry{meta: *m, exists: true}
	}
	if ctx.Err() != nil {
		c.unload(p, pt)
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parts[p] != pt {
		return nil // unloaded meanwhile
	}
	pt.txns, pt.loaded = txns, true
	var owed, completing int
	for id, e := range pt.txns {
		switch {
		case e.meta.Owed != nil:
			e.hold()
			c.resendOwed(p, pt, id, e)
			owed++
		case e.meta.State == PrepareCommit || e.meta.State == PrepareAbort:
			e.hold()
			e.resume = len(e.meta.Preadded) > 0
			c.startCompletion(p, pt, id, e, e.meta)
			completing++
		}
	}
	c.log.Info("loaded transaction state partition", "partition", p, "coordinator_epoch", epoch, "transactional_ids", len(txns),
		"completing", completing, "owed_markers", owed)
	return nil
}

// UnloadPartition stops answering for p's transactional ids.
func (c *Coordinator) UnloadPartition(p int32) {
	var pt *partition
	c.withLock(func() { pt = c.parts[p] })
	if pt != nil {
		c.unload(p, pt)
	}
}

func (c *Coordinator) unload(p int32, pt *partition) {
	pt.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parts[p] == pt {
		delete(c.parts, p)
	}
	// Whoever waits on an id of pt learns, on retrying, that it moved.
	for _, e := range pt.txns {
		e.overlapping = false
		e.unhold()
	}
}

// Completed returns a channel closed once the change in flight for id (a state
// write, or the markers and completed state of its ended transaction) is over:
// a request that got CONCURRENT_TRANSACTIONS can wait on it and try again,
// instead of polling. It is closed already when nothing is in flight (or id is
// not coordinated here), and also closed when the id's partition is unloaded.
func (c *Coordinator) Completed(id string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, pt, ke := c.loadedLocked(id)
	if ke != nil {
		return closedChan
	}
	if e := pt.txns[id]; e != nil && (e.busy || e.overlapping) {
		return e.idle
	}
	return closedChan
}

// loadedLocked returns the loaded partition that owns id, or NOT_COORDINATOR or
// COORDINATOR_LOAD_IN_PROGRESS; c.mu must be held.
func (c *Coordinator) loadedLocked(id string) (int32, *partition, *kerr.Error) {
	p := c.PartitionFor(id)
	pt := c.parts[p]
	switch {
	case pt == nil:
		return 0, nil, kerr.NotCoordinator
	case !pt.loaded:
		return 0, nil, kerr.CoordinatorLoadInProgress
	}
	return p, pt, nil
}

// acquire finds id's entry and marks it busy. The code is NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_ID_MAPPING (unknown id) or
// CONCURRENT_TRANSACTIONS when it cannot. create makes an entry for an unknown id.
// overlap: the request may overlap the completion in flight (an add of the
// next transaction); when it does, the entry is marked overlapping instead of
// busy and prep is the Prepare state whose markers are in flight.
func (c *Coordinator) acquire(id string, create, overlap bool) (p int32, pt *partition, e *entry, prep *Meta, ke *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, pt, ke = c.loadedLocked(id)
	if ke != nil {
		return 0, nil, nil, nil, ke
	}
	e = pt.txns[id]
	if e == nil {
		if !create {
			return 0, nil, nil, nil, kerr.InvalidProducerIDMapping
		}
		e = &entry{}
		pt.txns[id] = e
	}
	switch {
	case overlap && e.busy && e.prep != nil && !e.overlapping:
		e.overlapping = true
		return p, pt, e, e.prep, nil
	case e.busy || e.overlapping:
		return 0, nil, nil, nil, kerr.ConcurrentTransactions
	}
	e.hold()
	return p, pt, e, nil, nil
}

// release ends a request's hold on e, applying next when it was written.
func (c *Coordinator) release(pt *partition, id string, e *entry, next *Meta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.busy {
		e.unhold()
	}
	if next != nil {
		e.meta, e.exists, e.unwritten = *next, true, false
	}
	if !e.exists && pt.txns[id] == e {
		delete(pt.txns, id)
	}
}

// releaseOverlap ends an overlapping request's hold on e, applying next when
// it was written: without its owed markers when they were written meanwhile
// (the completion is over), so the id's later states do not name them.
func (c *Coordinator) releaseOverlap(e *entry, next *Meta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.overlapping = false
	if next != nil {
		n := *next
		if e.prep == nil {
			n.Owed = nil
		}
		e.meta, e.exists, e.unwritten = n, true, false
	}
	e.maybeIdle()
}

// write appends next as id's state, after the completed state e holds when
// that is not in the log yet (one batch: the records are committed together),
// and waits for its commit unless unacked; e must be held. The partitions
// pre-added by the id's last state are no longer: next replaces it.
func (c *Coordinator) write(ctx context.Context, p int32, pt *partition, id string, e *entry, next Meta, unacked bool) error {
	recs := []group.Record{encodeRecord(id, next)}
	c.withLock(func() {
		if e.unwritten {
			recs = []group.Record{encodeRecord(id, e.meta), recs[0]}
		}
		e.preadded = nil
	})
	if unacked {
		return c.store.AppendUnacked(ctx, p, pt.epoch, recs)
	}
	_, err := c.store.Append(ctx, p, pt.epoch, recs)
	return err
}

// preadds tells whether tr, decided from cur for an id whose last state
// pre-added preadded, begins the next transaction on pre-added partitions
// only: its Ongoing state is then written unacked. Its commit need not be
// waited for: the Prepare state before it is committed and names those
// partitions, and a coordinator that loads that state resumes the
// transaction on them (resumed).
func preadds(cur *Meta, tr transition, preadded []TopicPartition) bool {
	return len(preadded) > 0 && tr.write && tr.next.State == Ongoing && cur != nil && cur.State != Ongoing &&
		containsAll(preadded, tr.next.Partitions)
}

// noProducerIDCode answers a request whose decision failed: the only error
// a decision returns is newPID's, no producer id to hand out. Kafka's
// ProducerIdManager answers that COORDINATOR_LOAD_IN_PROGRESS, retriable for
// every client version.
var noProducerIDCode = kerr.CoordinatorLoadInProgress.Code

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// change runs one request against id: it holds the id, decides the transition
// from the current state (nil: none yet), writes the new state, and then releases
// the id or, for a Prepare state, starts the completion that releases it later.
// It returns the new state and the answer's code.
func (c *Coordinator) change(ctx context.Context, id string, create bool, decide func(cur *Meta) (transition, error)) (Meta, int16) {
	return c.changeOverlapping(ctx, id, create, false, decide)
}

// changeOverlapping is change; overlap lets the request overlap the
// completion in flight (acquire): it then decides from the state the
// completion leads to, and its new state names the completion's markers as
// owed. Only an Ongoing state is written that way.
func (c *Coordinator) changeOverlapping(ctx context.Context, id string, create, overlap bool, decide func(cur *Meta) (transition, error)) (Meta, int16) {
	p, pt, e, prep, ke := c.acquire(id, create, overlap)
	if ke != nil {
		return Meta{}, ke.Code
	}
	if prep != nil {
		return c.overlapChange(ctx, p, pt, id, e, prep, decide)
	}
	var cur *Meta
	var preadded []TopicPartition
	c.withLock(func() {
		if e.exists {
			m := e.meta
			cur = &m
		}
		preadded = e.preadded
	})
	tr, err := decide(cur)
	if err != nil {
		c.release(pt, id, e, nil)
		return Meta{}, noProducerIDCode
	}
	if !tr.write {
		c.release(pt, id, e, nil)
		if cur != nil && tr.code == 0 {
			return *cur, 0
		}
		return Meta{}, tr.code
	}
	if err := c.write(ctx, p, pt, id, e, tr.next, preadds(cur, tr, preadded)); err != nil {
		c.release(pt, id, e, nil)
		return Meta{}, group.AppendErrorCode(err) // Kafka's TransactionStateManager maps a failed append as the group coordinator does
	}
	if s := tr.next.State; s != PrepareCommit && s != PrepareAbort {
		c.release(pt, id, e, &tr.next)
		return tr.next, tr.code
	}
	c.withLock(func() {
		e.meta, e.exists, e.unwritten, e.preadded = tr.next, true, false, tr.next.Preadded
		c.startCompletion(p, pt, id, e, tr.next)
	})
	return tr.next, tr.code
}

// overlapChange runs an overlapping request (changeOverlapping) while the
// markers of prep are written: e holds prep itself or, after an earlier
// overlapping request, the next transaction's Ongoing state.
func (c *Coordinator) overlapChange(ctx context.Context, p int32, pt *partition, id string, e *entry, prep *Meta, decide func(cur *Meta) (transition, error)) (Meta, int16) {
	var cur Meta
	var preadded []TopicPartition
	c.withLock(func() { cur, preadded = e.meta, e.preadded })
	if cur.State == PrepareCommit || cur.State == PrepareAbort {
		cur = complete(cur, c.nowMs())
	}
	tr, err := decide(&cur)
	switch {
	case err != nil:
		c.releaseOverlap(e, nil)
		return Meta{}, noProducerIDCode
	case !tr.write:
		c.releaseOverlap(e, nil)
		if tr.code == 0 {
			return cur, 0
		}
		return Meta{}, tr.code
	case tr.next.State != Ongoing, addsOwedOffsets(prep.Partitions, tr.next.Partitions):
		c.releaseOverlap(e, nil)
		return Meta{}, kerr.ConcurrentTransactions.Code
	}
	tr.next.Owed = prep.owed()
	if err := c.write(ctx, p, pt, id, e, tr.next, preadds(&cur, tr, preadded)); err != nil {
		c.releaseOverlap(e, nil)
		return Meta{}, group.AppendErrorCode(err)
	}
	c.releaseOverlap(e, &tr.next)
	return tr.next, tr.code
}

// InitProducerID answers InitProducerId for transactional id id: a new producer
// id, or the id's producer with its epoch bumped (fencing earlier incarnations).
// An open transaction is aborted first: the answer is then
// CONCURRENT_TRANSACTIONS, and the client retries.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, reqPID int64, reqEpoch int16) (int64, int16, int16) {
	if timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.cfg.MaxTimeout {
		return -1, -1, kerr.InvalidTransactionTimeout.Code
	}
	next, code := c.change(ctx, id, true, func(cur *Meta) (transition, error) {
		return initProducer(cur, func() (int64, error) { return c.newPID(ctx) }, timeoutMs, reqPID, reqEpoch, c.nowMs())
	})
	if code == kerr.ConcurrentTransactions.Code && reqPID >= 0 {
		// As Kafka, the producer id is checked before the Prepare state; the
		// epoch only once the transaction is complete (a retry's, isInitRetry).
		code = c.refusedWhilePrepared(id, func(cur *Meta) (transition, error) {
			if reqPID != cur.ProducerID {
				return refuse(kerr.ProducerFenced), nil
			}
			return refuse(kerr.ConcurrentTransactions), nil
		})
	}
	if code != 0 {
		return -1, -1, code
	}
	return next.ProducerID, next.ProducerEpoch, 0
}

// addsOwedOffsets tells whether next, the next transaction's partitions, holds
// a __consumer_offsets partition of the previous transaction (prev), whose
// marker is still owed. The group coordinator applies a producer's pending
// offset commits on a partition when a marker of the producer there is
// committed, whatever their epoch: the next transaction's offsets, written
// behind the marker, would be applied with the previous outcome. Such an add
// waits for the markers (no overlap).
func addsOwedOffsets(prev, next []TopicPartition) bool {
	for _, tp := range next {
		if tp.Topic == group.OffsetsTopic && slices.Contains(prev, tp) {
			return true
		}
	}
	return false
}

// AddPartitions answers AddPartitionsToTxn (one code for all partitions) and
// AddOffsetsToTxn.
//
// While the markers of the id's previous transaction are being written, the
// add of its next transaction is served (the overlap: the markers' commit and
// the next Ongoing state's run at once) when the previous transaction ended
// with transaction version 2 markers (Meta.canOverlap); its Ongoing state
// names those markers as owed.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, add []TopicPartition) int16 {
	decide := func(cur *Meta) (transition, error) {
		return addPartitions(cur, pid, epoch, add, c.nowMs()), nil
	}
	_, code := c.changeOverlapping(ctx, id, false, true, decide)
	if code == kerr.ConcurrentTransactions.Code {
		code = c.refusedWhilePrepared(id, decide)
	}
	return code
}

// refusedWhilePrepared answers a request (AddPartitions, EndTxn, a KIP-360
// InitProducerId) that met CONCURRENT_TRANSACTIONS: while the markers of id's
// Prepare state are written, Kafka's state is that Prepare state with no
// transition pending, so a request it refuses gets its own answer (a fenced or
// unknown producer, an EndTxn of the other outcome); any other stays
// CONCURRENT_TRANSACTIONS (InitProducerId decides on the producer id only:
// Kafka answers its retries from the completed state). Not while an end moves
// the producer to a new producer id (NextProducerID): Kafka would refuse the
// new id's requests as unknown until it completes.
func (c *Coordinator) refusedWhilePrepared(id string, decide func(cur *Meta) (transition, error)) int16 {
	var cur Meta
	var prepared bool
	c.withLock(func() {
		if _, pt, ke := c.loadedLocked(id); ke == nil {
			if e := pt.txns[id]; e != nil && e.exists && e.busy && (e.meta.State == PrepareCommit || e.meta.State == PrepareAbort) && e.meta.NextProducerID == 0 {
				cur, prepared = e.meta, true
			}
		}
	})
	if prepared {
		if tr, err := decide(&cur); err == nil && !tr.write && tr.code != 0 {
			return tr.code
		}
	}
	return kerr.ConcurrentTransactions.Code
}

// VerifyPartitions answers the VerifyOnly form of AddPartitionsToTxn: whether
// every partition is already part of id's ongoing transaction. As Kafka 4
// answers: CONCURRENT_TRANSACTIONS while the transaction is being committed or
// aborted (its markers on their way), TRANSACTION_ABORTABLE for a partition
// that is not in it (the partition leader turns that into INVALID_TXN_STATE
// for clients older than Produce v11).
func (c *Coordinator) VerifyPartitions(id string, pid int64, epoch int16, tps []TopicPartition) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, pt, ke := c.loadedLocked(id)
	if ke != nil {
		return ke.Code
	}
	var cur *Meta
	if e := pt.txns[id]; e != nil && e.exists {
		cur = &e.meta
	}
	if ke := checkProducer(cur, pid, epoch); ke != nil {
		return ke.Code
	}
	switch {
	case cur.State == PrepareCommit || cur.State == PrepareAbort:
		return kerr.ConcurrentTransactions.Code
	case cur.State != Ongoing || !containsAll(cur.Partitions, tps):
		return kerr.TransactionAbortable.Code
	}
	return 0
}

// EndTxn answers EndTxn: the prepared state is written, the answer sent, and the
// markers and the completed state follow in the background. tv2 is EndTxn v5+
// (KIP-890): the epoch is bumped, and the answer carries the producer id and
// epoch of the producer's next transaction (-1, -1 on an error).
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit, tv2 bool) (int64, int16, int16) {
	decide := func(cur *Meta) (transition, error) {
		if !tv2 {
			return endTxn(cur, pid, epoch, commit, c.nowMs()), nil
		}
		tr, err := endTxnV2(cur, pid, epoch, commit, func() (int64, error) { return c.newPID(ctx) }, c.nowMs())
		if err == nil && tr.write && (c.cfg.Preadd == nil || c.cfg.Preadd()) {
			tr.next.Preadded = tr.next.preaddable()
		}
		return tr, err
	}
	next, code := c.change(ctx, id, false, decide)
	if code == kerr.ConcurrentTransactions.Code {
		code = c.refusedWhilePrepared(id, decide)
	}
	if code != 0 {
		return -1, -1, code
	}
	nextPID, nextEpoch := next.Answered()
	return nextPID, nextEpoch, 0
}

// startCompletion writes the markers of prepared state m and then the completed
// state, retrying both until they succeed or the partition is unloaded (its next
// coordinator then completes it). e stays busy until the markers are written.
// c.mu must be held.
//
// The markers are committed (acks=all) before the completed state is written,
// but the completed state is not waited for. It takes effect at once, and is
// written in one batch ahead of the id's next state, so that both are
// committed by one fsync; only when no next state comes within CompleteDelay
// is it appended alone (writeCompleted). Either way it is committed no later
// than the id's next state. Losing it (a crash or a leader change first)
// leaves the prepared state, which the next coordinator completes again; the
// markers it then writes again change nothing.
//
// When m canOverlap and Config.Overlap allows it, the next transaction's
// adds are served meanwhile (acquire, overlapChange): their Ongoing states
// name m's markers as owed, and the completed state is then never written
// (the Ongoing state replaced it); once the markers are committed the id's
// state forgets them.
//
// A loaded Prepare state with pre-added partitions (e.resume) is resumed
// instead of completed once its markers are written (resumed), and does not
// overlap: the next transaction's adds wait for that.
func (c *Coordinator) startCompletion(p int32, pt *partition, id string, e *entry, m Meta) {
	if m.canOverlap() && !e.resume && (c.cfg.Overlap == nil || c.cfg.Overlap()) {
		e.prep = &m
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		err := c.markers.WriteMarkers(pt.ctx, Markers{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: pt.epoch,
			Commit: m.State == PrepareCommit, TransactionVersion: m.markerVersion(), Partitions: m.Partitions})
		if !c.markersWritten(pt, id, err) {
			c.withLock(func() { e.prep = nil }) // a deposed coordinator serves nothing more of the id
			return
		}
		if c.applyMarkersWritten(p, pt, e, m) {
			c.writeCompleted(p, pt, id, e)
		}
	}()
}

// applyMarkersWritten ends e's completion of Prepare state m once its markers
// are written, and tells whether the completed state it leads to is still to
// be written (writeCompleted).
func (c *Coordinator) applyMarkersWritten(p int32, pt *partition, e *entry, m Meta) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parts[p] != pt {
		return false // unloaded
	}
	e.prep = nil
	defer e.unhold()
	if s := e.meta.State; s != PrepareCommit && s != PrepareAbort {
		// The next transaction overlapped: its state, in the log, names
		// these markers as owed; from now on it need not.
		e.meta.Owed = nil
		return false
	}
	if e.resume {
		// Nothing to write: the Prepare state in the log stands for it.
		e.meta, e.resume = resumed(m, c.nowMs()), false
		return false
	}
	e.meta, e.exists, e.unwritten = complete(m, c.nowMs()), true, true
	return true
}

// markersWritten tells whether a marker write ended with the markers written
// (err nil), logging a fenced coordinator's.
func (c *Coordinator) markersWritten(pt *partition, id string, err error) bool {
	if errors.Is(err, ErrCoordinatorFenced) {
		c.log.Warn("a newer transaction coordinator wrote markers for this producer; giving the transaction up", "transactional_id", id, "coordinator_epoch", pt.epoch)
		return false
	}
	return err == nil // else unloaded
}

// resendOwed writes the markers loaded state e.meta names as owed, before the
// id is served (e is held): the previous coordinator may have lost them after
// it wrote the next transaction's state. A partition where a marker was
// written already writes it again (a control batch that ends nothing), or
// refuses it when the next transaction is open there at its epoch (KIP-1228),
// which counts as written. Then a Prepare state is
// completed, any other state released. c.mu must be held.
func (c *Coordinator) resendOwed(p int32, pt *partition, id string, e *entry) {
	owed := e.meta.Owed
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		err := c.markers.WriteMarkers(pt.ctx, owed.markers(pt.epoch))
		if !c.markersWritten(pt, id, err) {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.parts[p] != pt {
			return
		}
		e.meta.Owed = nil
		if s := e.meta.State; s == PrepareCommit || s == PrepareAbort {
			c.startCompletion(p, pt, id, e, e.meta)
			return
		}
		e.unhold()
	}()
}

// maxCompleteBackoff caps the spacing of writeCompleted's retries: a log
// that failed (a full disk) refuses every write until it is reopened, which
// unloads the partition and ends the retries.
const maxCompleteBackoff = 5 * time.Second

// writeCompleted appends e's completed state alone unless, within
// CompleteDelay, the id's next state write has carried it. A failed write is
// retried with a doubling backoff, logged once.
func (c *Coordinator) writeCompleted(p int32, pt *partition, id string, e *entry) {
	backoff := c.cfg.RetryBackoff
	t := time.NewTimer(c.cfg.CompleteDelay)
	defer t.Stop()
	select {
	case <-pt.ctx.Done():
		return
	case <-t.C:
	}
	for {
		rec, idle, ok := c.holdCompleted(pt, id, e)
		switch {
		case !ok:
			return
		case idle != nil:
			select {
			case <-pt.ctx.Done():
				return
			case <-idle:
			}
			continue
		}
		err := c.store.AppendUnacked(pt.ctx, p, pt.epoch, []group.Record{rec})
		c.withLock(func() {
			if err == nil {
				e.unwritten = false
			}
			e.unhold()
		})
		if err == nil || pt.ctx.Err() != nil || errors.Is(err, group.ErrNotCoordinator) {
			return
		}
		if backoff == c.cfg.RetryBackoff {
			c.log.Warn("writing a completed transaction; retrying", "transactional_id", id, "err", err)
		}
		select {
		case <-pt.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxCompleteBackoff)
	}
}

// holdCompleted holds e to write its completed state, the record it returns.
// When a request holds the id instead, it returns the channel closed once that
// is over (the request's write carries the completed state, unless it writes
// nothing: look again then). ok is false when there is nothing to write: the
// partition is unloaded, or the state is written or replaced.
func (c *Coordinator) holdCompleted(pt *partition, id string, e *entry) (rec group.Record, idle <-chan struct{}, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pt.ctx.Err() != nil || !e.unwritten || pt.txns[id] != e {
		return group.Record{}, nil, false
	}
	if e.busy || e.overlapping {
		return group.Record{}, e.idle, true
	}
	e.hold()
	e.preadded = nil // the completed state replaces the Prepare state that pre-added them
	return encodeRecord(id, e.meta), nil, true
}

// runExpiry aborts transactions that outlive their timeout and removes
// transactional ids idle for Config.IDExpiration.
func (c *Coordinator) runExpiry() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.AbortInterval)
	defer t.Stop()
	ids := time.NewTicker(c.cfg.IDExpireInterval)
	defer ids.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.expireTxns()
		case <-ids.C:
			c.expireIDs()
		}
	}
}

// expireIDs removes the transactional ids without a transaction (Empty, or
// their last one complete and written) whose state was last updated
// Config.IDExpiration ago or more, as Kafka's transactional.id.expiration.ms:
// a tombstone per id, one append per partition. The id's next InitProducerId
// then begins it again with a new producer id. A failed append leaves the ids
// for the next round.
func (c *Coordinator) expireIDs() {
	for _, j := range c.holdIdle(c.nowMs() - c.cfg.IDExpiration.Milliseconds()) {
		recs := make([]group.Record, len(j.ids))
		for i, id := range j.ids {
			recs[i] = tombstone(id)
		}
		_, err := c.store.Append(j.pt.ctx, j.p, j.pt.epoch, recs)
		for i, id := range j.ids {
			if err == nil {
				c.withLock(func() { j.es[i].exists = false }) // release forgets it
			}
			c.release(j.pt, id, j.es[i], nil)
		}
		if err == nil {
			c.log.Info("removed idle transactional ids", "partition", j.p, "count", len(j.ids))
		}
	}
}

// idleIDs is the ids of one partition that expireIDs removes, held.
type idleIDs struct {
	p   int32
	pt  *partition
	ids []string
	es  []*entry
}

// holdIdle holds every id without a transaction whose state was last updated
// at or before lastMs, and returns them by partition.
func (c *Coordinator) holdIdle(lastMs int64) []idleIDs {
	c.mu.Lock()
	defer c.mu.Unlock()
	var jobs []idleIDs
	for p, pt := range c.parts {
		if !pt.loaded {
			continue
		}
		j := idleIDs{p: p, pt: pt}
		for id, e := range pt.txns {
			s := e.meta.State
			if e.busy || e.overlapping || !e.exists || e.unwritten || e.meta.LastUpdateMs > lastMs ||
				(s != Empty && s != CompleteCommit && s != CompleteAbort) {
				continue
			}
			e.hold()
			j.ids, j.es = append(j.ids, id), append(j.es, e)
		}
		if len(j.ids) > 0 {
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// expireTxns starts aborting every Ongoing transaction past its timeout: the
// epoch is bumped (the producer is fenced) and the abort written.
func (c *Coordinator) expireTxns() {
	for _, j := range c.holdExpired(c.nowMs()) {
		if err := c.write(j.pt.ctx, j.p, j.pt, j.id, j.e, j.next, false); err != nil {
			c.release(j.pt, j.id, j.e, nil) // tried again at the next tick
			continue
		}
		c.log.Info("aborting a transaction past its timeout", "transactional_id", j.id, "producer_id", j.next.ProducerID)
		c.withLock(func() {
			j.e.meta, j.e.unwritten = j.next, false
			c.startCompletion(j.p, j.pt, j.id, j.e, j.next)
		})
	}
}

// expiry is the abort of one transaction past its timeout: next is its
// PrepareAbort state.
type expiry struct {
	p    int32
	pt   *partition
	id   string
	e    *entry
	next Meta
}

// holdExpired holds every Ongoing transaction past its timeout at now and
// returns their aborts.
func (c *Coordinator) holdExpired(now int64) []expiry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var jobs []expiry
	for p, pt := range c.parts {
		if !pt.loaded {
			continue
		}
		for id, e := range pt.txns {
			if e.busy || e.overlapping || !e.exists || e.meta.State != Ongoing || now-e.meta.StartMs <= int64(e.meta.TimeoutMs) {
				continue
			}
			e.hold()
			jobs = append(jobs, expiry{p, pt, id, e, expire(e.meta, now)})
		}
	}
	return jobs
}
