package share

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
)

// GroupConfig is what a share partition needs of its group's configuration.
type GroupConfig struct {
	Limits
	// AutoOffsetReset is share.auto.offset.reset: where a share partition without
	// state starts, "latest" (the high watermark), "earliest" (the log start) or
	// "by_duration:<ISO 8601 duration>" (the first record that recent).
	AutoOffsetReset string
	// ReadCommitted is share.isolation.level=read_committed: records are
	// acquired only below the last stable offset, and those of aborted
	// transactions are archived, never delivered.
	ReadCommitted bool
	// DeadLetter is the group's dead-letter topic (deadletter.go).
	DeadLetter DeadLetterConfig
}

// Config configures a Manager.
type Config struct {
	// Defaults are the broker's share-group defaults (group.share.*), used for groups
	// without configs of their own.
	Defaults GroupConfig
	// GroupConfig returns a group's configuration; nil: Defaults for every group.
	GroupConfig func(group string) GroupConfig
	// Now is the clock (time.Now by default).
	Now func() time.Time
	// DeadLetters writes dead-letter records; nil: groups have no dead-letter
	// topics (failed records are archived at once).
	DeadLetters DeadLetterWriter
}

// DefaultGroupConfig is Kafka's: 30s locks, 5 deliveries, 2000 records in flight per
// share partition, new groups start at the latest offset.
func DefaultGroupConfig() GroupConfig {
	return GroupConfig{
		Limits:          Limits{LockDuration: 30 * time.Second, DeliveryLimit: 5, MaxInFlight: 2000},
		AutoOffsetReset: "latest",
	}
}

// Partitions finds the data partitions this node leads.
type Partitions interface {
	// Image is the latest metadata image the node applied.
	Image() *metadata.Image
	// Partition returns the local replica of a partition.
	Partition(topic string, index int32) (*replica.Partition, error)
	// SyncMetadata returns once Image, and the group configs
	// Config.GroupConfig reads, reflect every metadata change committed before
	// the call (those set through another node a moment ago), or with ctx's
	// error. A share partition without state is initialised only after it.
	SyncMetadata(ctx context.Context) error
}

// Manager is the share-partition leader of one node: for every partition this node
// leads, the in-flight records of each share group reading it (acquisition locks,
// delivery counts, acknowledgements), persisted in a Store; and the share sessions of
// the members fetching from it. Create it with NewManager; it serves ShareFetch and
// ShareAcknowledge.
type Manager struct {
	cfg   Config
	store Store
	parts Partitions
	log   *slog.Logger
	dlq   DeadLetterWriter
	// ctx ends when the manager closes (background dead-letter writes stop).
	ctx    context.Context
	cancel context.CancelFunc

	mu struct {
		sync.Mutex
		closed   bool
		shares   map[Key]*sharePartition
		sessions map[sessionKey]*session
	}
	background sync.WaitGroup
	stats      struct {
		sync.Mutex
		groups map[string]DeadLetterStats
	}
	counts fetchCounts
}

// fetchCounts tallies the share fetch path: counts that do not depend on the
// machine's load, for tests and benchmarks of many members on one partition.
type fetchCounts struct {
	fetches   atomic.Int64 // ShareFetch requests that looked for records
	reads     atomic.Int64 // reads of the log
	readBytes atomic.Int64 // bytes those reads returned
	acquired  atomic.Int64 // offsets acquired
	wakeups   atomic.Int64 // long-polling fetches woken before their deadline
	idle      atomic.Int64 // wake-ups after which the fetch acquired nothing
	expired   atomic.Int64 // fetches that waited their whole MaxWait for nothing
	held      atomic.Int64 // fetches answered empty after heldWait (their member holds records of a full window)
}

// NewManager returns a manager persisting to store; a nil logger discards.
func NewManager(cfg Config, store Store, parts Partitions, logger *slog.Logger) *Manager {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Defaults.LockDuration <= 0 {
		cfg.Defaults = DefaultGroupConfig()
	}
	m := &Manager{cfg: cfg, store: store, parts: parts, log: logger, dlq: cfg.DeadLetters}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.stats.groups = make(map[string]DeadLetterStats)
	m.mu.shares = make(map[Key]*sharePartition)
	m.mu.sessions = make(map[sessionKey]*session)
	return m
}

// Close stops every lock-expiry timer, cancels the manager's background work
// (dead-letter writes and the saves after them, expiry saves) and every state
// write in flight, and waits for the background goroutines, at most closeTimeout:
// each of them stops at the cancellation, so the bound only matters if a store or
// dead-letter writer ignores its context (logged).
func (m *Manager) Close() {
	shares := m.markClosed()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, sp := range shares {
			sp.stopTimer()
		}
		m.background.Wait()
	}()
	t := time.NewTimer(closeTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		m.log.Error("share-partition leader closed with background work still running", "waited", closeTimeout)
	}
}

// markClosed makes the manager refuse new work, cancels its context and returns
// every share partition it holds.
func (m *Manager) markClosed() []*sharePartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.closed = true
	m.cancel()
	shares := make([]*sharePartition, 0, len(m.mu.shares))
	for _, sp := range m.mu.shares {
		shares = append(shares, sp)
	}
	return shares
}

// closeTimeout bounds Close's wait for the background goroutines it cancelled.
const closeTimeout = 10 * time.Second

func (m *Manager) groupConfig(group string) GroupConfig {
	c := m.cfg.Defaults
	if m.cfg.GroupConfig != nil {
		c = m.cfg.GroupConfig(group)
	}
	c.Limits.DeadLetter = c.DeadLetter.Topic != "" && m.dlq != nil
	return c
}

// sharePartition is the state of one Key on this node. mu guards everything. A
// save releases mu while its write is in flight (saveLocked), so acquisitions and
// acknowledgements of other members go on meanwhile; one write at a time, each of
// a snapshot taken after every change it answers, keeps the saves in the order the
// changes were applied.
type sharePartition struct {
	key   Key
	topic string
	// readMu lets one fetch at a time read the log for this share partition,
	// without mu: the others wait for its read rather than make their own.
	// Taken before mu, never while holding it.
	readMu sync.Mutex

	mu       sync.Mutex
	p        *Partition         // nil until loaded, and after a failed save (reload)
	rp       *replica.Partition // the data partition, as of the last request
	epoch    int32              // the data partition's leader epoch p was loaded under
	state    int32              // the state epoch of the snapshot p was loaded from (0: none)
	timer    *time.Timer
	timerAt  time.Time // when timer fires
	timerTok uint64
	waiters  []waiter      // fetches waiting for records to acquire, oldest first
	woken    int64         // waiting fetches woken so far
	dlqBusy  bool          // a dead-letter write of p's Archiving records is under way
	writing  chan struct{} // non-nil while a write is in flight; closed when it ends
	next     *saveBatch    // changes applied since the write in flight began
	// recordBytes is the mean bytes per offset of the last read (0: none yet);
	// it bounds the next read to what an acquisition can use (readBytes).
	recordBytes float64
	cache       readCache // the last read of the log (acquire.go)
	cacheGen    uint64    // counts reads into cache
	batches     []Batch   // scratch for acquisitions from cache
}

// waiter is a fetch long-polling on a share partition, and how many records it
// would take.
type waiter struct {
	w          *replica.Watcher
	maxRecords int
}

// saveBatch is one group commit: the changes applied to a share partition while
// the previous write was in flight, made durable together by the next write.
type saveBatch struct {
	done    chan struct{} // closed once code is set
	code    int16         // 0: durable; else the changes were dropped
	waiters int           // saves waiting on it
}

// unlocked runs f with sp.mu released, and takes sp.mu again when f returns or
// panics: the caller, which holds sp.mu and releases it with defer, holds it
// again either way (a deferred Unlock of an unlocked mutex would be a fatal
// error, not a recoverable panic).
func (sp *sharePartition) unlocked(f func()) {
	sp.mu.Unlock()
	defer sp.mu.Lock()
	f()
}

func (sp *sharePartition) stopTimer() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.stopTimerLocked()
}

func (sp *sharePartition) stopTimerLocked() {
	if sp.timer != nil {
		sp.timer.Stop()
		sp.timer = nil
	}
	sp.timerTok++
}

// waitLocked makes w wait for records of sp (once), for an acquisition of up to
// maxRecords.
func (sp *sharePartition) waitLocked(w *replica.Watcher, maxRecords int) {
	for _, x := range sp.waiters {
		if x.w == w {
			return
		}
	}
	sp.waiters = append(sp.waiters, waiter{w, maxRecords})
}

// unwait stops w waiting for records of sp.
func (sp *sharePartition) unwait(w *replica.Watcher) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for i, x := range sp.waiters {
		if x.w == w {
			sp.waiters = append(sp.waiters[:i], sp.waiters[i+1:]...)
			return
		}
	}
}

// wakeLocked wakes, oldest first, as many waiting fetches as the records
// acquirable now can serve by their maxRecords, less reserve (what the caller
// acquires next itself); a woken fetch stops waiting (it waits again if it finds
// nothing). Waking every waiter for the few hundred records an acknowledgement
// frees would have them all take sp.mu in turn for one of them to acquire.
func (sp *sharePartition) wakeLocked(lim Limits, reserve int) {
	if sp.p == nil || sp.rp == nil {
		sp.wakeAllLocked()
		return
	}
	n := sp.p.Acquirable(sp.rp.HighWatermark(), lim) - int64(reserve)
	i := 0
	for ; i < len(sp.waiters) && n > 0; i++ {
		sp.wakeOneLocked(sp.waiters[i].w)
		n -= int64(sp.waiters[i].maxRecords)
	}
	sp.waiters = append(sp.waiters[:0], sp.waiters[i:]...)
}

// wakeAllLocked wakes every waiting fetch (the state was dropped: each reloads
// or fails).
func (sp *sharePartition) wakeAllLocked() {
	for _, x := range sp.waiters {
		sp.wakeOneLocked(x.w)
	}
	sp.waiters = sp.waiters[:0]
}

func (sp *sharePartition) wakeOneLocked(w *replica.Watcher) {
	sp.woken++
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// share returns the state of k, loading it when it is not loaded under rp's current
// leader epoch; it returns with sp.mu held, which the caller releases with defer.
// The error is a Kafka code.
func (m *Manager) share(ctx context.Context, k Key, topic string, rp *replica.Partition) (*sharePartition, int16) {
	sp := m.entry(k, topic)
	if sp == nil {
		return nil, kerr.NotLeaderForPartition.Code
	}
	if err := m.lockLoaded(ctx, sp, rp); err != nil {
		m.log.Warn("loading share-partition state", "group", k.Group, "topic", topic, "partition", k.Partition, "err", err)
		return nil, persisterCode(err)
	}
	return sp, 0
}

// lockLoaded takes sp.mu and loads sp's state when it is not loaded under rp's
// current leader epoch. It returns with sp.mu held, or with the load's error
// and sp.mu released, as it is when the store panics (by defer: the broker
// recovers the panic).
func (m *Manager) lockLoaded(ctx context.Context, sp *sharePartition, rp *replica.Partition) error {
	sp.mu.Lock()
	handed := false // sp.mu goes to the caller
	defer func() {
		if !handed {
			sp.mu.Unlock()
		}
	}()
	sp.rp = rp
	for sp.p != nil && sp.epoch != rp.LeaderEpoch() && (sp.writing != nil || sp.next != nil) {
		m.flushLocked(ctx, sp) // the old epoch's changes are written before the reload
	}
	if epoch := rp.LeaderEpoch(); sp.p == nil || sp.epoch != epoch {
		sp.stopTimerLocked()
		sp.cache = readCache{} // read under the old state
		k := sp.key
		snap, err := m.load(ctx, k, rp, epoch)
		if err != nil {
			sp.p = nil
			return err
		}
		sp.state = snap.StateEpoch
		sp.p = Restore(snap)
		sp.p.FailSpent(m.groupConfig(k.Group).Limits)
		sp.epoch = epoch
		m.log.Info("share partition loaded", "group", k.Group, "topic", sp.topic, "partition", k.Partition,
			"start", sp.p.Start(), "end", sp.p.End(), "state_epoch", sp.state)
		// Records a crash caught between their dead-letter write and their
		// archiving are written again.
		m.maybeDeadLetterLocked(sp)
	}
	handed = true
	return nil
}

// entry returns k's share partition, made if need be; nil once the manager is
// closed.
func (m *Manager) entry(k Key, topic string) *sharePartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil
	}
	sp := m.mu.shares[k]
	if sp == nil {
		sp = &sharePartition{key: k, topic: topic}
		m.mu.shares[k] = sp
	}
	return sp
}

// loaded returns k's share partition, nil when there is none.
func (m *Manager) loaded(k Key) *sharePartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.shares[k]
}

// load is loadState bounded by storeTimeout and cut short by Close.
func (m *Manager) load(ctx context.Context, k Key, rp *replica.Partition, epoch int32) (Snapshot, error) {
	lctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	stop := context.AfterFunc(m.ctx, cancel)
	defer stop()
	return m.loadState(lctx, k, rp, epoch)
}

// loadState reads k's state at the share coordinator as the share-partition
// leader of leader epoch epoch (fencing the writes of older leaders). A share
// partition without state is initialized first, at share.auto.offset.reset, read
// no older than the group coordinator's (which assigned the partition): the
// coordinator refuses a second initialization, so two leaders that both found no
// state end up with the one that was written.
func (m *Manager) loadState(ctx context.Context, k Key, rp *replica.Partition, epoch int32) (Snapshot, error) {
	for {
		snap, found, err := m.store.Load(ctx, k, epoch)
		if err != nil || found {
			return snap, err
		}
		if err := m.parts.SyncMetadata(ctx); err != nil {
			return Snapshot{}, err
		}
		start, err := m.resetOffset(ctx, m.groupConfig(k.Group).AutoOffsetReset, rp)
		if err != nil {
			return Snapshot{}, err
		}
		if err := m.store.Initialize(ctx, k, 0, start); err != nil && !errors.Is(err, kerr.FencedStateEpoch) {
			return Snapshot{}, err
		}
	}
}

// resetOffset is where share.auto.offset.reset starts a share partition of rp
// without state: the log start (earliest), the first record at most a duration
// old (by_duration:<duration>; the high watermark when every record is older),
// else the high watermark (latest).
func (m *Manager) resetOffset(ctx context.Context, reset string, rp *replica.Partition) (int64, error) {
	if reset == "earliest" {
		return rp.ReadableLogStart()
	}
	if d, ok, err := metadata.ShareResetByDuration(reset); ok && err == nil {
		ts := m.cfg.Now().Add(-d).UnixMilli()
		off, _, _, found, err := rp.ListOffset(ctx, ts, replica.ReadUncommitted)
		if err != nil || found {
			return off, err
		}
	}
	return rp.HighWatermark(), nil
}

// persisterCode is the answer to a request whose read or write of the state at
// the share coordinator failed with err, as Kafka 4.4's share-partition leader
// maps the persister's error (SharePartition.fetchPersisterError): coordinator
// errors COORDINATOR_NOT_AVAILABLE, a fenced leader or state epoch
// NOT_LEADER_OR_FOLLOWER (a newer leader, or an offset reset, took over the
// state), GROUP_ID_NOT_FOUND and UNKNOWN_TOPIC_OR_PARTITION as they are, and
// anything else (a timeout too) UNKNOWN_SERVER_ERROR.
func persisterCode(err error) int16 {
	switch {
	case errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorNotAvailable), errors.Is(err, kerr.CoordinatorLoadInProgress):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, kerr.FencedLeaderEpoch), errors.Is(err, kerr.FencedStateEpoch):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, kerr.GroupIDNotFound):
		return kerr.GroupIDNotFound.Code
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return kerr.UnknownTopicOrPartition.Code
	}
	return kerr.UnknownServerError.Code
}

// saveLocked makes sp's current state durable and returns once it is, releasing
// sp.mu while it waits (the caller must expect sp to have changed meanwhile).
// Saves that come while a write is in flight share the next write (group commit):
// its snapshot is taken after all their changes. On failure the in-memory state is
// dropped (the next request reloads the durable one), with it every change not yet
// written, and the answer is a retriable error.
func (m *Manager) saveLocked(ctx context.Context, sp *sharePartition) int16 {
	if sp.p == nil {
		return kerr.RequestTimedOut.Code
	}
	b := sp.next
	if b == nil {
		b = &saveBatch{done: make(chan struct{})}
		sp.next = b
	}
	b.waiters++
	for {
		select {
		case <-b.done:
			return b.code
		default:
		}
		if sp.writing == nil {
			// b is still sp.next: a batch stops being next only when a write
			// takes it or a drop fails it, and either closes done first.
			m.writeLocked(ctx, sp, b)
			return b.code
		}
		end := sp.writing
		sp.unlocked(func() {
			select {
			case <-b.done:
			case <-end:
			}
		})
	}
}

// writeLocked writes a snapshot of sp's state for batch b (sp.next), with sp.mu
// released during the write, and settles b. A Save that panics settles b as a
// failed write (by defer): the saves waiting for the write in flight would
// otherwise wait for ever.
func (m *Manager) writeLocked(ctx context.Context, sp *sharePartition, b *saveBatch) {
	sp.next = nil
	end := make(chan struct{})
	sp.writing = end
	p := sp.p
	snap := p.Snapshot()
	snap.LeaderEpoch, snap.StateEpoch = sp.epoch, sp.state
	err := errSavePanicked
	defer func() { m.wroteLocked(sp, b, p, end, err) }()
	sp.unlocked(func() { err = m.save(ctx, sp.key, snap) })
}

// save is one Save of k's state, bounded by storeTimeout and cut short by Close.
func (m *Manager) save(ctx context.Context, k Key, snap Snapshot) error {
	wctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	stop := context.AfterFunc(m.ctx, cancel)
	defer stop()
	return m.store.Save(wctx, k, snap)
}

// errSavePanicked is the outcome of a Save that panicked.
var errSavePanicked = errors.New("share: the state write panicked")

// wroteLocked settles batch b, written from state p, with the write's outcome
// err, and ends the write in flight (end).
func (m *Manager) wroteLocked(sp *sharePartition, b *saveBatch, p *Partition, end chan struct{}, err error) {
	if err != nil {
		m.log.Warn("saving share-partition state", "group", sp.key.Group, "topic", sp.topic, "partition", sp.key.Partition, "err", err)
		b.code = persisterCode(err)
		if sp.p == p {
			m.dropLocked(sp, b.code)
		}
	}
	close(b.done)
	sp.writing = nil
	close(end)
}

// dropLocked discards sp's in-memory state (the next request reloads the durable
// one); changes waiting for a write are lost and their saves fail with code.
func (m *Manager) dropLocked(sp *sharePartition, code int16) {
	sp.stopTimerLocked()
	sp.p = nil
	sp.cache = readCache{}
	if b := sp.next; b != nil {
		sp.next = nil
		b.code = code
		close(b.done)
	}
}

// flushLocked returns once no write of sp is in flight or waiting, writing the
// waiting changes itself if need be; it releases sp.mu meanwhile. Callers that
// replace sp.p call it first, so nothing applied is lost or written late over
// the state they load.
func (m *Manager) flushLocked(ctx context.Context, sp *sharePartition) {
	for {
		switch {
		case sp.writing != nil:
			end := sp.writing
			sp.unlocked(func() { <-end })
		case sp.next != nil && sp.p != nil:
			m.writeLocked(ctx, sp, sp.next)
		default:
			return
		}
	}
}

// storeTimeout bounds one load or save of share-partition state.
const storeTimeout = 15 * time.Second

// armExpiryLocked schedules the next lock expiry of sp.
func (m *Manager) armExpiryLocked(sp *sharePartition, cfg GroupConfig) {
	if sp.p == nil {
		return
	}
	archived, next := sp.p.Expire(m.cfg.Now(), cfg.Limits)
	if len(archived) > 0 {
		m.maybeDeadLetterLocked(sp) // its end saves the state
	}
	if next.IsZero() {
		sp.stopTimerLocked()
		return
	}
	if sp.timer != nil && !sp.timerAt.After(next) {
		return // the armed timer fires first and arms the next one
	}
	sp.stopTimerLocked()
	tok := sp.timerTok
	sp.timerAt = next
	sp.timer = m.afterFunc(next.Sub(m.cfg.Now()), func() {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		if sp.timerTok != tok || sp.p == nil {
			return
		}
		sp.timer = nil
		cfg := m.groupConfig(sp.key.Group)
		archived, _ := sp.p.Expire(m.cfg.Now(), cfg.Limits)
		if len(archived) > 0 {
			// Out of deliveries is final: make it durable.
			if m.saveLocked(m.ctx, sp) == 0 {
				m.maybeDeadLetterLocked(sp)
			}
		}
		sp.wakeLocked(cfg.Limits, 0)
		m.armExpiryLocked(sp, cfg)
	})
}

// goBackground runs f on a goroutine Close waits for; false (f not run) once the
// manager is closed.
func (m *Manager) goBackground(f func()) bool {
	if !m.addBackground() {
		return false
	}
	go func() {
		defer m.background.Done()
		f()
	}()
	return true
}

// afterFunc is time.AfterFunc whose callback does not run once the manager is
// closed; Close waits for callbacks already running.
func (m *Manager) afterFunc(d time.Duration, f func()) *time.Timer {
	return time.AfterFunc(d, func() {
		if !m.addBackground() {
			return
		}
		defer m.background.Done()
		f()
	})
}

// addBackground counts one more background task for Close to wait for (the
// caller calls m.background.Done when it ends); false once the manager is
// closed.
func (m *Manager) addBackground() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return false
	}
	m.background.Add(1)
	return true
}

// acknowledgeLocked applies acknowledgement batches of member to sp and persists the
// result; it returns the partition's acknowledgement error code.
func (m *Manager) acknowledgeLocked(ctx context.Context, sp *sharePartition, member string, cfg GroupConfig, acks []AckBatch) (int16, *string) {
	code, msg, changed := m.applyAcksLocked(sp, member, cfg, acks)
	if changed {
		if c := m.saveLocked(ctx, sp); c != 0 {
			return c, nil
		}
		m.acknowledgedLocked(sp, cfg)
	}
	return code, msg
}

// applyAcksLocked applies the acknowledgement batches of member to sp's state,
// all or none (Partition.Acknowledge), not yet saved; it returns the
// partition's acknowledgement error code and whether anything changed.
func (m *Manager) applyAcksLocked(sp *sharePartition, member string, cfg GroupConfig, acks []AckBatch) (int16, *string, bool) {
	if len(acks) == 0 {
		return 0, nil, false
	}
	_, err := sp.p.Acknowledge(member, m.cfg.Now(), cfg.Limits, acks)
	if err == nil {
		return 0, nil, true
	}
	var ae *AckError
	switch {
	case errors.As(err, &ae) && ae.Past:
		return kerr.InvalidRequest.Code, &ae.Msg, false
	case errors.As(err, &ae):
		return kerr.InvalidRecordState.Code, &ae.Msg, false
	}
	return kerr.InvalidRequest.Code, nil, false // ErrInvalidAck
}

// acknowledgedLocked follows saved acknowledgements: the fetches waiting for
// records they freed are woken, and those that failed for good go to the
// dead-letter topic.
func (m *Manager) acknowledgedLocked(sp *sharePartition, cfg GroupConfig) {
	sp.wakeLocked(cfg.Limits, 0)
	m.maybeDeadLetterLocked(sp)
}

// leaderOf is the partition's current leader and epoch in the image, for
// NOT_LEADER_OR_FOLLOWER answers.
func leaderOf(img *metadata.Image, topic string, index int32) (int32, int32) {
	if p := img.Partition(topic, index); p != nil {
		return p.Leader, p.LeaderEpoch
	}
	return -1, -1
}

// lookup finds the partition named by a topic id this node leads, or the code saying
// why not, with the topic's name when known.
func (m *Manager) lookup(id [16]byte, index int32) (*replica.Partition, string, int16) {
	img := m.parts.Image()
	t := img.TopicByID(metadata.UUID(id))
	if t == nil {
		return nil, "", kerr.UnknownTopicID.Code
	}
	if index < 0 || int(index) >= len(t.Partitions) {
		return nil, t.Name, kerr.UnknownTopicOrPartition.Code
	}
	rp, err := m.parts.Partition(t.Name, index)
	if err != nil || !rp.IsLeader() {
		return nil, t.Name, kerr.NotLeaderForPartition.Code
	}
	return rp, t.Name, 0
}
