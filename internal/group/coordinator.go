package group

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

const (
	// OffsetsTopic is the internal topic holding group metadata and committed offsets.
	OffsetsTopic = "__consumer_offsets"
	// DefaultOffsetsTopicPartitions is Kafka's offsets.topic.num.partitions default.
	DefaultOffsetsTopicPartitions = 50
)

// Errors returned by the coordinator's Go API and understood from an OffsetStore.
// Kafka requests never fail with a Go error: these become error codes in responses.
var (
	// ErrNotCoordinator: this node does not own the group's partition (any more). An
	// OffsetStore returns it (wrapped) when it lost leadership of the partition;
	// clients then look the coordinator up again (NOT_COORDINATOR).
	ErrNotCoordinator = errors.New("group: not the coordinator for this group")
	// ErrLoadInProgress: the group's partition is still being loaded; retry later.
	ErrLoadInProgress = errors.New("group: offsets partition is loading")
	// ErrRecordTooLarge: an OffsetStore rejected records as too large. Not retriable:
	// requests answer UNKNOWN_SERVER_ERROR, as Kafka 4.4's.
	ErrRecordTooLarge = errors.New("group: records too large for the offsets topic")
	// ErrInvalidProducerEpoch: a TxnOffsetStore refused a transactional
	// commit whose producer epoch is older than the producer's on the partition
	// (a fenced zombie). Not retriable: INVALID_PRODUCER_EPOCH.
	ErrInvalidProducerEpoch = errors.New("group: producer epoch older than the producer's")
	// ErrGroupNotFound: no such group on a partition this node owns.
	ErrGroupNotFound = errors.New("group: group not found")
	// ErrAlreadyLoaded: LoadPartition for a partition that is loaded or loading.
	ErrAlreadyLoaded = errors.New("group: offsets partition already loaded")
	// ErrCorruptRecord: a replayed record of a known schema does not decode; the
	// partition is not loaded.
	ErrCorruptRecord = errors.New("group: corrupt __consumer_offsets record")
	// ErrClosed: the coordinator was closed.
	ErrClosed = errors.New("group: coordinator closed")
)

// Record is one record of __consumer_offsets. A nil Value is a tombstone.
// Offset is the record's offset in the log, which a replay sets. A replay
// yields the records in log order, as Kafka's coordinator replays them: Txn
// marks an offset commit of producer ProducerID's transaction, pending until
// that transaction's marker, which a replay yields as a Record with Txn and
// Marker set and no key, Commit saying whether the transaction committed (see
// txn_offsets.go).
type Record struct {
	Key, Value []byte
	Offset     int64
	Txn        bool
	ProducerID int64
	Marker     bool
	Commit     bool
}

// OffsetStore appends records (key/value pairs, value nil = tombstone) to partition p
// of __consumer_offsets as one batch and returns once they are committed (acks=all
// semantics), with the log offset of the first record (the others follow it); the
// broker implements it on its replica layer.
//
// Append is called concurrently for different groups, never concurrently for one
// group, so the records of each key reach the log in the order the coordinator
// decided them. ctx is cancelled when the partition is unloaded or the commit timeout
// passes. leaderEpoch is the leader epoch the partition was loaded at
// (LoadPartitionAt): a store refuses the records (ErrNotCoordinator) unless this
// broker still leads at it, so a write begun before a reload never lands after the
// reload read the log. Errors: wrap ErrNotCoordinator when the partition is not led
// here or its log failed, ErrRecordTooLarge when the batch is too big; anything
// else counts as a retriable unavailability.
type OffsetStore interface {
	Append(ctx context.Context, partition, leaderEpoch int32, records []Record) (first int64, err error)
}

// Config configures a Coordinator. Zero durations and sizes take the defaults of
// DefaultConfig, except GroupInitialRebalanceDelay, where zero means no delay.
type Config struct {
	// GroupInitialRebalanceDelay is group.initial.rebalance.delay.ms: how long the
	// first rebalance of an Empty group waits for more members (3s by default).
	GroupInitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts members may
	// ask for (group.min/max.session.timeout.ms: 6s and 30m).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// OffsetsRetention is offsets.retention.minutes (7 days): how long the offsets of
	// a group without members are kept.
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms (10m).
	OffsetsRetentionCheckInterval time.Duration
	// OffsetCommitTimeout bounds one append to the offsets topic
	// (offsets.commit.timeout.ms, 5s).
	OffsetCommitTimeout time.Duration
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes (4096).
	OffsetMetadataMaxBytes int
	// OffsetsTopicPartitions is the partition count of __consumer_offsets (50); it
	// must match what FindCoordinator uses with PartitionFor.
	OffsetsTopicPartitions int32
	// Now is the clock stamping commits and state changes and driving offset expiry
	// (time.Now by default). Timers use time.AfterFunc, which testing/synctest fakes.
	Now func() time.Time
	// ConsumerSessionTimeout is group.consumer.session.timeout.ms (45s): a KIP-848
	// member that does not heartbeat for this long is removed.
	ConsumerSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms (5s), the
	// interval KIP-848 members are told to heartbeat at.
	ConsumerHeartbeatInterval time.Duration
	// ConsumerAssignmentInterval is group.consumer.assignment.interval.ms (1s,
	// KIP-1263): a consumer group's target assignment is computed at most once in
	// this long, so a member joining sooner after the last one first gets the
	// older target (consumer.go). Negative: at every new group epoch at once.
	ConsumerAssignmentInterval time.Duration
	// ShareAssignmentInterval is group.share.assignment.interval.ms (1s): a share
	// group's target assignment is computed at most once in this long (share.go).
	ShareAssignmentInterval time.Duration
	// StreamsSessionTimeout is group.streams.session.timeout.ms (45s): a streams
	// member that does not heartbeat for this long is removed.
	StreamsSessionTimeout time.Duration
	// StreamsHeartbeatInterval is group.streams.heartbeat.interval.ms (5s), the
	// interval streams members are told to heartbeat at.
	StreamsHeartbeatInterval time.Duration
	// GroupConfig returns a consumer group's own session timeout and heartbeat
	// interval (the group configs consumer.session.timeout.ms and
	// consumer.heartbeat.interval.ms), zero where the group sets none; nil: no
	// group sets any.
	GroupConfig func(group string) ConsumerGroupConfig
	// Topics tells KIP-848 assignors which topics exist; nil: none do.
	Topics TopicCatalog
	// ShareState reads and writes share-partition state for the share-group offset
	// APIs (share_offsets.go); nil: they answer COORDINATOR_NOT_AVAILABLE.
	ShareState ShareState
	// MigrationPolicy is group.consumer.migration.policy: which online conversions
	// between classic and consumer groups with members are allowed
	// (migration.go); bidirectional, Kafka 4's default, when empty.
	MigrationPolicy MigrationPolicy
	// ConsumerMaxSize is group.consumer.max.size: the most members a consumer
	// group holds, classic members in it included; ClassicMaxSize is
	// group.classic.max.size, the most a classic group holds (maxsize.go). Both
	// also bound the online conversions (migration.go). Unlimited (Kafka's
	// default, Integer.MAX_VALUE) when 0.
	ConsumerMaxSize, ClassicMaxSize int
}

// ConsumerGroupConfig is what a group's dynamic configs set; zero durations
// leave the coordinator's (Config) in force. SessionTimeout and
// HeartbeatInterval are consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms, for KIP-848 members; the Streams ones
// streams.session.timeout.ms, streams.heartbeat.interval.ms and
// streams.num.standby.replicas (0 by default, as Kafka's
// group.streams.num.standby.replicas); the Share ones share.session.timeout.ms
// and share.heartbeat.interval.ms, for share-group members (KIP-932). StreamsWarmupReplicas,
// StreamsAcceptableRecoveryLag and StreamsRackAwareTags are the group's
// effective streams.num.warmup.replicas, streams.acceptable.recovery.lag and
// streams.rack.aware.assignment.tags: the caller fills in the defaults.
type ConsumerGroupConfig struct {
	SessionTimeout               time.Duration
	HeartbeatInterval            time.Duration
	StreamsSessionTimeout        time.Duration
	StreamsHeartbeatInterval     time.Duration
	ShareSessionTimeout          time.Duration
	ShareHeartbeatInterval       time.Duration
	StreamsStandbyReplicas       int
	StreamsWarmupReplicas        int
	StreamsAcceptableRecoveryLag int64
	StreamsRackAwareTags         []string
}

// Kafka 4.4's defaults for the streams warm-up configs (group.streams.num.warmup.replicas
// and group.streams.acceptable.recovery.lag), for a coordinator without group configs.
const (
	DefaultStreamsWarmupReplicas        = 2
	DefaultStreamsAcceptableRecoveryLag = 10000
)

// groupConfig is the group's own configs (none when Config.GroupConfig is nil).
func (c *Coordinator) groupConfig(group string) ConsumerGroupConfig {
	if c.cfg.GroupConfig == nil {
		return ConsumerGroupConfig{}
	}
	return c.cfg.GroupConfig(group)
}

// orDefault is a group's own duration config where it sets one, else def.
func orDefault(own, def time.Duration) time.Duration {
	if own > 0 {
		return own
	}
	return def
}

// consumerTimeouts is the session timeout and heartbeat interval of a KIP-848
// group's members: the group's own configs, else the coordinator's.
func (c *Coordinator) consumerTimeouts(group string) (session, heartbeat time.Duration) {
	gc := c.groupConfig(group)
	return orDefault(gc.SessionTimeout, c.cfg.ConsumerSessionTimeout),
		orDefault(gc.HeartbeatInterval, c.cfg.ConsumerHeartbeatInterval)
}

// shareTimeouts is the session timeout and heartbeat interval of a share
// group's members: the group's own share.session.timeout.ms and
// share.heartbeat.interval.ms, else the coordinator's consumer ones (Kafka's
// group.share.session.timeout.ms and group.share.heartbeat.interval.ms have
// their defaults, 45s and 5s).
func (c *Coordinator) shareTimeouts(group string) (session, heartbeat time.Duration) {
	gc := c.groupConfig(group)
	return orDefault(gc.ShareSessionTimeout, c.cfg.ConsumerSessionTimeout),
		orDefault(gc.ShareHeartbeatInterval, c.cfg.ConsumerHeartbeatInterval)
}

// streamsTimeouts is the session timeout and heartbeat interval of a streams
// group's members: the group's own configs, else the coordinator's.
func (c *Coordinator) streamsTimeouts(group string) (session, heartbeat time.Duration) {
	gc := c.groupConfig(group)
	return orDefault(gc.StreamsSessionTimeout, c.cfg.StreamsSessionTimeout),
		orDefault(gc.StreamsHeartbeatInterval, c.cfg.StreamsHeartbeatInterval)
}

// streamsStandbys is a streams group's streams.num.standby.replicas (0 unless
// the group sets it).
func (c *Coordinator) streamsStandbys(group string) int {
	return c.groupConfig(group).StreamsStandbyReplicas
}

// streamsWarmups is a streams group's streams.num.warmup.replicas.
func (c *Coordinator) streamsWarmups(group string) int {
	if c.cfg.GroupConfig == nil {
		return DefaultStreamsWarmupReplicas
	}
	return c.cfg.GroupConfig(group).StreamsWarmupReplicas
}

// streamsRecoveryLag is a streams group's streams.acceptable.recovery.lag.
func (c *Coordinator) streamsRecoveryLag(group string) int64 {
	if c.cfg.GroupConfig == nil {
		return DefaultStreamsAcceptableRecoveryLag
	}
	return c.cfg.GroupConfig(group).StreamsAcceptableRecoveryLag
}

// streamsRackTags is a streams group's streams.rack.aware.assignment.tags.
func (c *Coordinator) streamsRackTags(group string) []string {
	return c.groupConfig(group).StreamsRackAwareTags
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		GroupInitialRebalanceDelay:    3 * time.Second,
		MinSessionTimeout:             6 * time.Second,
		MaxSessionTimeout:             30 * time.Minute,
		OffsetsRetention:              7 * 24 * time.Hour,
		OffsetsRetentionCheckInterval: 10 * time.Minute,
		OffsetCommitTimeout:           5 * time.Second,
		OffsetMetadataMaxBytes:        4096,
		OffsetsTopicPartitions:        DefaultOffsetsTopicPartitions,
		Now:                           time.Now,
		ConsumerSessionTimeout:        45 * time.Second,
		ConsumerHeartbeatInterval:     5 * time.Second,
		ConsumerAssignmentInterval:    time.Second,
		ShareAssignmentInterval:       time.Second,
		StreamsSessionTimeout:         45 * time.Second,
		StreamsHeartbeatInterval:      5 * time.Second,
		MigrationPolicy:               MigrationBidirectional,
		ConsumerMaxSize:               math.MaxInt32,
		ClassicMaxSize:                math.MaxInt32,
	}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	def := func(v *time.Duration, dv time.Duration) {
		if *v <= 0 {
			*v = dv
		}
	}
	def(&c.MinSessionTimeout, d.MinSessionTimeout)
	def(&c.MaxSessionTimeout, d.MaxSessionTimeout)
	def(&c.OffsetsRetention, d.OffsetsRetention)
	def(&c.OffsetsRetentionCheckInterval, d.OffsetsRetentionCheckInterval)
	def(&c.OffsetCommitTimeout, d.OffsetCommitTimeout)
	def(&c.ConsumerSessionTimeout, d.ConsumerSessionTimeout)
	def(&c.ConsumerHeartbeatInterval, d.ConsumerHeartbeatInterval)
	def(&c.ShareAssignmentInterval, d.ShareAssignmentInterval)
	def(&c.StreamsSessionTimeout, d.StreamsSessionTimeout)
	def(&c.StreamsHeartbeatInterval, d.StreamsHeartbeatInterval)
	if c.ConsumerAssignmentInterval == 0 {
		c.ConsumerAssignmentInterval = d.ConsumerAssignmentInterval
	}
	if c.Topics == nil {
		c.Topics = noTopics{}
	}
	c.GroupInitialRebalanceDelay = max(c.GroupInitialRebalanceDelay, 0)
	if c.OffsetMetadataMaxBytes <= 0 {
		c.OffsetMetadataMaxBytes = d.OffsetMetadataMaxBytes
	}
	if c.OffsetsTopicPartitions <= 0 {
		c.OffsetsTopicPartitions = d.OffsetsTopicPartitions
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	if c.MigrationPolicy == "" {
		c.MigrationPolicy = d.MigrationPolicy
	}
	if c.ConsumerMaxSize <= 0 {
		c.ConsumerMaxSize = d.ConsumerMaxSize
	}
	if c.ClassicMaxSize <= 0 {
		c.ClassicMaxSize = d.ClassicMaxSize
	}
	return c
}

// Validate reports a configuration no defaults can repair.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.MinSessionTimeout > c.MaxSessionTimeout {
		return fmt.Errorf("group: min session timeout %v above max %v", c.MinSessionTimeout, c.MaxSessionTimeout)
	}
	if c.ConsumerHeartbeatInterval >= c.ConsumerSessionTimeout {
		return fmt.Errorf("group: consumer heartbeat interval %v not below the session timeout %v", c.ConsumerHeartbeatInterval, c.ConsumerSessionTimeout)
	}
	if !c.MigrationPolicy.valid() {
		return fmt.Errorf("group: migration policy %q (want bidirectional, upgrade, downgrade or disabled)", c.MigrationPolicy)
	}
	return nil
}

// Coordinator is the classic group coordinator of one node. Create it with New, hand
// it the partitions of __consumer_offsets this node leads with LoadPartition, and
// Close it on shutdown.
type Coordinator struct {
	cfg   Config
	store OffsetStore
	log   *slog.Logger

	mu struct {
		sync.RWMutex
		closed     bool
		partitions map[int32]*partition
	}
	background sync.WaitGroup // timer callbacks and group writers; Close waits for them
	expiry     *time.Timer    // the retention check; set under mu in New
}

// partition is one loaded (or loading) partition of __consumer_offsets. Its mu is a
// leaf lock: nothing else is acquired while it is held.
type partition struct {
	id      int32
	epoch   int32           // the leader epoch it was loaded at: its appends carry it
	ctx     context.Context // cancelled on unload: stops appends in flight
	cancel  context.CancelFunc
	loading bool // guarded by Coordinator.mu

	mu     sync.Mutex
	groups map[string]*group
	// txnOffsets holds transactional offset commits until their transaction's
	// marker (txn_offsets.go).
	txnOffsets txnOffsets
}

// New returns a coordinator owning no partitions yet. store must be non-nil; a nil
// logger discards.
func New(cfg Config, store OffsetStore, logger *slog.Logger) *Coordinator {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Coordinator{cfg: cfg.withDefaults(), store: store, log: logger}
	c.mu.Lock() // runExpiry may run before New returns with a tiny interval
	c.mu.partitions = make(map[int32]*partition)
	c.expiry = c.afterFunc(c.cfg.OffsetsRetentionCheckInterval, c.runExpiry)
	c.mu.Unlock()
	return c
}

// Close unloads every partition (waiting requests get NOT_COORDINATOR, appends in
// flight are cancelled), stops all timers and waits for running timer callbacks and
// group writers. Later requests get COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	c.mu.closed = true
	parts := make([]*partition, 0, len(c.mu.partitions))
	for _, p := range c.mu.partitions {
		parts = append(parts, p)
	}
	clear(c.mu.partitions)
	c.mu.Unlock()

	c.expiry.Stop()
	for _, p := range parts {
		c.unload(p)
	}
	c.background.Wait()
}

func (c *Coordinator) now() time.Time { return c.cfg.Now() }

// enter registers a background goroutine unless the coordinator is closed; the
// goroutine calls c.background.Done when it ends.
func (c *Coordinator) enter() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.mu.closed {
		return false
	}
	c.background.Add(1)
	return true
}

// afterFunc is time.AfterFunc for coordinator timers: the callback does not run once
// the coordinator is closed, and Close waits for callbacks already running.
func (c *Coordinator) afterFunc(d time.Duration, f func()) *time.Timer {
	return time.AfterFunc(d, func() {
		if !c.enter() {
			return
		}
		defer c.background.Done()
		f()
	})
}

// partitionOf returns the loaded partition owning groupID, or the error code saying
// why there is none.
func (c *Coordinator) partitionOf(groupID string) (*partition, int16) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.mu.closed {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	p := c.mu.partitions[PartitionFor(groupID, c.cfg.OffsetsTopicPartitions)]
	switch {
	case p == nil:
		return nil, kerr.NotCoordinator.Code
	case p.loading:
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	return p, 0
}

// loadedPartitions returns the partitions that finished loading, and whether any is
// still loading.
func (c *Coordinator) loadedPartitions() (parts []*partition, loading bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, p := range c.mu.partitions {
		if p.loading {
			loading = true
			continue
		}
		parts = append(parts, p)
	}
	slices.SortFunc(parts, func(a, b *partition) int { return int(a.id) - int(b.id) })
	return parts, loading
}

// lookup returns the group, creating an Empty one, fresh, when create is set.
func (p *partition) lookup(c *Coordinator, id string, create bool) *group {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.groups[id]
	if g == nil && create {
		g = newGroup(c, p, id)
		g.fresh = true
		p.groups[id] = g
	}
	return g
}

// dropFreshLocked removes a fresh group (see lookup) that holds nothing
// besides what writes that failed or were never queued would have made: as
// Kafka's coordinator runtime reverts the state of a failed write, the group a
// commit or a consumer, share or streams group's first heartbeat created goes
// with the write, in memory as in the log. A classic group goes only while it
// is as a commit makes it (no members, no protocol type). The group is Dead for
// whoever still holds it. Writers call it once their own write failed (a
// commit also when it queued none and no write of the group is in flight).
func (g *group) dropFreshLocked() {
	modern := g.cg != nil || g.sg != nil || g.st != nil
	simple := g.state == stateEmpty && g.protocolType == "" && len(g.members) == 0 && len(g.pending) == 0
	if !g.fresh || g.unloaded || g.state == stateDead || !(modern || simple) ||
		len(g.offsets) > 0 || len(g.pendingCommits) > 0 || len(g.writeQ) > 0 {
		return
	}
	g.stopTimersLocked()
	g.transitionLocked(stateDead)
	g.p.remove(g)
}

// remove drops g from the partition if it is still the group under its id.
func (p *partition) remove(g *group) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.groups[g.id] == g {
		delete(p.groups, g.id)
	}
}

// snapshot returns the partition's groups sorted by id.
func (p *partition) snapshot() []*group {
	p.mu.Lock()
	gs := make([]*group, 0, len(p.groups))
	for _, g := range p.groups {
		gs = append(gs, g)
	}
	p.mu.Unlock()
	slices.SortFunc(gs, func(a, b *group) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return gs
}

// LoadPartitionAt makes this node the coordinator of partition p of __consumer_offsets,
// led here at leader epoch epoch, which the partition's appends carry (OffsetStore).
// records replays the partition from its start in log order (a non-nil error aborts
// the load); the latest value of each key wins and tombstones delete. Until it
// returns, requests for the partition's groups get COORDINATOR_LOAD_IN_PROGRESS.
// Groups with members come back Stable with fresh session timeouts.
func (c *Coordinator) LoadPartitionAt(ctx context.Context, p, epoch int32, records iter.Seq2[Record, error]) error {
	if p < 0 || p >= c.cfg.OffsetsTopicPartitions {
		return fmt.Errorf("group: partition %d outside %s's %d partitions", p, OffsetsTopic, c.cfg.OffsetsTopicPartitions)
	}
	pctx, cancel := context.WithCancel(context.Background())
	part := &partition{id: p, epoch: epoch, ctx: pctx, cancel: cancel, loading: true, groups: make(map[string]*group)}
	c.mu.Lock()
	switch {
	case c.mu.closed:
		c.mu.Unlock()
		cancel()
		return ErrClosed
	case c.mu.partitions[p] != nil:
		c.mu.Unlock()
		cancel()
		return fmt.Errorf("%w: %d", ErrAlreadyLoaded, p)
	}
	c.mu.partitions[p] = part
	c.mu.Unlock()

	state, err := replay(ctx, records)

	c.mu.Lock()
	if c.mu.partitions[p] != part {
		// Unloaded (or closed) while loading.
		c.mu.Unlock()
		cancel()
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: partition %d unloaded while loading", ErrNotCoordinator, p)
	}
	if err != nil {
		delete(c.mu.partitions, p)
		c.mu.Unlock()
		cancel()
		return err
	}
	groups := c.buildGroups(part, state)
	// Requests may create groups in the map as soon as it is published: arm the
	// loaded groups from a copy.
	loaded := make([]*group, 0, len(groups))
	for _, g := range groups {
		loaded = append(loaded, g)
	}
	part.mu.Lock()
	part.groups = groups
	part.txnOffsets = state.txnOffsets
	part.mu.Unlock()
	part.loading = false
	c.mu.Unlock()

	for _, g := range loaded {
		g.withLock(g.armLoadedLocked)
	}
	c.log.Info("loaded group partition", "partition", p, "groups", len(loaded), "skipped_records", state.skipped)
	return nil
}

func replay(ctx context.Context, records iter.Seq2[Record, error]) (*replayed, error) {
	state := newReplayed()
	for rec, err := range records {
		if err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := state.apply(rec); err != nil {
			return nil, err
		}
	}
	return state, ctx.Err()
}

// buildGroups turns replayed state into groups (not yet published, no timers).
func (c *Coordinator) buildGroups(p *partition, r *replayed) map[string]*group {
	groups := make(map[string]*group, len(r.groups)+len(r.offsets))
	for id, v := range r.groups {
		g := newGroup(c, p, id)
		g.loadMetadata(v)
		groups[id] = g
	}
	for id, sr := range r.streams {
		if sr.metadata == nil {
			c.log.Warn("streams group records without group metadata skipped", "group", id, "records", len(sr.raw))
			continue
		}
		g := newGroup(c, p, id)
		if _, ok := groups[id]; ok {
			// The classic record predates the streams group (written before
			// conversions dropped it): the next write deletes it.
			g.written = map[string][]byte{string(groupKey(id)): unknownValue}
		}
		g.loadStreamsLocked(sr)
		groups[id] = g
	}
	for id, sr := range r.shares {
		if sr.metadata == nil || groups[id] != nil {
			c.log.Warn("share group records without group metadata, or beside another group's, skipped", "group", id, "records", len(sr.raw))
			continue
		}
		g := newGroup(c, p, id)
		g.loadShareLocked(sr)
		groups[id] = g
	}
	for id, cr := range r.consumers {
		c.buildConsumerGroup(p, groups, id, cr)
	}
	simple := func(id string) *group {
		g := groups[id]
		if g == nil {
			g = newGroup(c, p, id)
			g.stateTime = time.Time{} // unknown: expiry falls back to commit times
			groups[id] = g
		}
		return g
	}
	for id := range r.committed {
		simple(id)
	}
	for id, offs := range r.offsets {
		simple(id).offsets = offs
	}
	return groups
}

// buildConsumerGroup adds consumer group id, from its records, to groups. A
// classic record beside them predates them (its tombstone was lost): the
// consumer group wins and its next write deletes the record.
func (c *Coordinator) buildConsumerGroup(p *partition, groups map[string]*group, id string, cr *consumerReplay) {
	old := groups[id]
	if cr.metadata == nil || (old != nil && (old.st != nil || old.sg != nil)) {
		c.log.Warn("consumer group records without group metadata, or beside a streams or share group's, skipped", "group", id, "records", len(cr.raw))
		return
	}
	g := newGroup(c, p, id)
	if old != nil {
		g.written = map[string][]byte{string(groupKey(id)): unknownValue}
	}
	g.loadConsumerLocked(cr)
	groups[id] = g
}

// armLoadedLocked starts the session timers of a group just loaded.
func (g *group) armLoadedLocked() {
	for _, m := range g.members {
		g.armSessionLocked(m, m.sessionTimeout)
	}
	g.armLoadedConsumerLocked()
	g.armLoadedStreamsLocked()
	g.armLoadedShareLocked()
}

// UnloadPartition gives up partition p (leadership moved): its groups are dropped,
// waiting requests get NOT_COORDINATOR and appends in flight are cancelled.
func (c *Coordinator) UnloadPartition(p int32) {
	c.mu.Lock()
	part := c.mu.partitions[p]
	delete(c.mu.partitions, p)
	c.mu.Unlock()
	if part != nil {
		c.unload(part)
	}
}

func (c *Coordinator) unload(p *partition) {
	p.cancel()
	for _, g := range p.snapshot() {
		g.withLock(g.unloadLocked)
	}
}

// unloadLocked kills the group: timers stop, waiters get NOT_COORDINATOR.
func (g *group) unloadLocked() {
	g.unloaded = true
	g.state = stateDead
	g.stopTimersLocked()
	for _, m := range g.members {
		g.replyJoinLocked(m, joinError(kerr.NotCoordinator.Code, m.id))
		g.replySyncLocked(m, syncResult{code: kerr.NotCoordinator.Code})
	}
}

// stopTimersLocked stops every timer of the group and invalidates running ones.
func (g *group) stopTimersLocked() {
	for _, m := range g.members {
		if m.sessionTimer != nil {
			m.sessionTimer.Stop()
		}
		m.sessionToken++
	}
	for id, pm := range g.pending {
		pm.timer.Stop()
		delete(g.pending, id)
	}
	g.stopRebalanceTimerLocked()
	g.stopSyncTimerLocked()
	g.stopConsumerTimersLocked()
	g.stopShareTimersLocked()
	g.stopStreamsTimersLocked()
}

// queueLocked appends a write to the group's queue; the caller must call
// Coordinator.flush after unlocking.
func (g *group) queueLocked(records []Record, done func(error)) {
	g.queueAtLocked(records, func(_ int64, err error) { done(err) })
}

// queueAtLocked is queueLocked for a write whose done wants the log offset of
// its first record.
func (g *group) queueAtLocked(records []Record, done func(first int64, err error)) {
	g.writeQ = append(g.writeQ, write{records: records, done: done})
}

// flush makes sure the group's queued writes get appended: when no writer runs for
// the group it starts one, which appends the queue in order, one Append at a time
// and outside the group's lock, until the queue is empty (done callbacks may queue
// more), then exits. Callers wait for their own write's done, never for others'.
func (c *Coordinator) flush(g *group) {
	if !g.claimWriter() {
		return
	}
	if !c.enter() {
		// Closed: every append fails at once (partitions are unloaded), so
		// answering the waiters here does not block.
		c.drain(g)
		return
	}
	go func() {
		defer c.background.Done()
		c.drain(g)
	}()
}

// claimWriter reports whether the caller is to start the group's writer: none
// runs and writes are queued. It then counts as running.
func (g *group) claimWriter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	idle := !g.writing && len(g.writeQ) > 0
	g.writing = g.writing || idle
	return idle
}

// drain is the group's writer (see flush). It holds the group's lock to take
// the queue and to run the done callbacks, never across an append.
func (c *Coordinator) drain(g *group) {
	for {
		batch, recs := g.takeWrites()
		if len(batch) == 0 {
			return
		}
		var (
			first int64
			err   error
		)
		if len(recs) > 0 { // else writes that only wait for the ones before them
			first, err = c.append(g.p, batch[0].txn, recs)
		}
		g.withLock(func() {
			g.fresh = g.fresh && (err != nil || len(recs) == 0)
			for _, w := range batch {
				w.done(first, err)
				first += int64(len(w.records))
			}
		})
	}
}

// takeWrites takes the writes at the head of the group's queue that are
// appended together, returning them and their records: a transactional write
// alone, else every plain one before the next transactional write. When the
// queue was empty the writer stops (see flush).
func (g *group) takeWrites() (batch []write, recs []Record) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for n < len(g.writeQ) && g.writeQ[n].txn == nil {
		n++
	}
	if n == 0 && len(g.writeQ) > 0 {
		n = 1
	}
	batch, g.writeQ = g.writeQ[:n:n], g.writeQ[n:]
	if len(batch) == 0 {
		g.writing = false
	}
	for _, w := range batch {
		recs = append(recs, w.records...)
	}
	return batch, recs
}

// append writes recs to partition p, in producer txn's transaction when txn
// is set (the store is then a TxnOffsetStore: TxnOffsetCommit checked).
func (c *Coordinator) append(p *partition, txn *producer, recs []Record) (int64, error) {
	if p.ctx.Err() != nil {
		return 0, ErrNotCoordinator
	}
	ctx, cancel := context.WithTimeout(p.ctx, c.cfg.OffsetCommitTimeout)
	defer cancel()
	var (
		first int64
		err   error
	)
	if txn != nil {
		first, err = c.store.(TxnOffsetStore).AppendTxn(ctx, p.id, p.epoch, txn.id, txn.epoch, recs)
	} else {
		first, err = c.store.Append(ctx, p.id, p.epoch, recs)
	}
	if err != nil && p.ctx.Err() != nil {
		err = fmt.Errorf("%w: partition %d unloaded: %v", ErrNotCoordinator, p.id, err)
	}
	if err != nil {
		c.log.Warn("append to offsets topic failed", "partition", p.id, "records", len(recs), "err", err)
	}
	return first, err
}

// AppendErrorCode maps an append error to the code every group API (and the
// share coordinator's state RPCs) answers, as
// Kafka 4.4's coordinator does (CoordinatorOperationExceptionHelper, and
// appendGroupMetadataErrorToResponseError for the classic join and sync): a lost
// partition NOT_COORDINATOR, a batch too large UNKNOWN_SERVER_ERROR, a fenced
// transactional producer INVALID_PRODUCER_EPOCH, and anything else (too few
// in-sync replicas, a write that timed out) COORDINATOR_NOT_AVAILABLE.
func AppendErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, ErrRecordTooLarge):
		return kerr.UnknownServerError.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// clientKey is the context key of the requesting client's identity.
type clientKey struct{}

// Client identifies the connection a request came from.
type Client struct {
	ID   string // the request header's client id
	Host string // Kafka shows the peer address as "/127.0.0.1"
	// DescribeTopic reports whether the client's principal may DESCRIBE a
	// topic: a consumer group's patterns resolve to those topics only. nil
	// allows every topic.
	DescribeTopic func(topic string) bool
}

// WithClient returns ctx carrying the client of a request. JoinGroup records it for
// DescribeGroups and prefixes new member ids with the client id.
func WithClient(ctx context.Context, cl Client) context.Context {
	return context.WithValue(ctx, clientKey{}, cl)
}

func clientFrom(ctx context.Context) Client {
	cl, _ := ctx.Value(clientKey{}).(Client)
	return cl
}

// newMemberID is Kafka's member id: the client id (or a static member's instance
// id), a dash and a random UUID.
func newMemberID(clientID, instanceID string) string {
	prefix := clientID
	if instanceID != "" {
		prefix = instanceID
	}
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails on supported platforms
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
