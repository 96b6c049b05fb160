package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
)

// ErrUnknownPartition: this broker hosts no such partition. The handler answers
// UNKNOWN_TOPIC_OR_PARTITION when the image has no such partition either, else
// NOT_LEADER_OR_FOLLOWER.
var ErrUnknownPartition = errors.New("partition not hosted here")

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ISRChanger sends a leader's ISR changes to the active controller in one
// AlterPartition request and returns the partitions as the controller
// committed them: results[i] answers changes[i]; an error answers them all.
type ISRChanger interface {
	AlterPartitions(ctx context.Context, changes []ISRChange) (results []ISRResult, err error)
}

// ISRChange is one partition's proposed ISR, based on the partition's state
// at LeaderEpoch and PartitionEpoch. BrokerEpochs holds the broker epoch of
// each member of ISR (this broker's own, the followers' as their last fetch
// carried it, -1 when not known; KIP-903), which the controller checks.
type ISRChange struct {
	TopicID                                metadata.UUID
	Partition, LeaderEpoch, PartitionEpoch int32
	ISR                                    []int32
	BrokerEpochs                           []int64
}

// ISRResult answers one ISRChange: the partition as committed, or the error.
type ISRResult struct {
	Partition *metadata.Partition
	Err       error
}

// Options are the Manager's collaborators and settings. Transport and ISRChanger
// may be nil on a single node (no partition then has followers).
type Options struct {
	Transport  Transport
	ISRChanger ISRChanger
	// BrokerEpoch is this broker's registration epoch, sent with replica fetches.
	BrokerEpoch func() int64
	// ReplicaLagMax is replica.lag.time.max.ms: a follower that has not caught up for
	// this long leaves the ISR (default 30s).
	ReplicaLagMax time.Duration
	// ProducerIDExpiration is producer.id.expiration.ms: the cleaner, and a
	// partition loading a producer-state snapshot, forget a producer whose
	// last batch or marker on a partition is older than this, unless its
	// transaction there is open (default 24h, Kafka's).
	ProducerIDExpiration time.Duration
	// OnLeadership, when set, is told each time this broker becomes or stops being a
	// partition's leader (including when the partition is removed). It is called from
	// Apply and must not block.
	OnLeadership func(p *Partition, leader bool)
	// Remote is the object store of tiered topics (--remote-storage); nil: no
	// topic is tiered. RemoteCache holds remote blocks read (--remote-cache-size).
	Remote      remote.Store
	RemoteCache *storage.BlockCache
	// CheckpointInterval is how often the logs' recovery checkpoint is written
	// (storage.DefaultCheckpointInterval when 0).
	CheckpointInterval time.Duration
	// SyncFilesystem is storage.LogDirOptions.SyncFilesystem for the logs'
	// directory (--log-dir-sync).
	SyncFilesystem bool
	// OnSync and OnRoll, when set, are every log's storage.Config hooks of
	// the same names (the metrics of the log directory). They must not block.
	OnSync func(took time.Duration, err error)
	OnRoll func(took time.Duration)
	// CacheTail is every log's storage.Config.CacheTailBytes
	// (--log-cache-tail-bytes; storage.DefaultCacheTailBytes when 0).
	CacheTail int64
}

// Manager hosts this broker's partitions and keeps them in line with the metadata
// image: it opens the logs of partitions assigned to this broker, makes it leader
// or follower where the image says so (running one fetcher per leader broker it
// follows), keeps the ISR of the partitions it leads, applies config changes, and
// deletes removed topics' logs.
type Manager struct {
	fs     vfs.FS
	dir    string // <data-dir>/logs
	logDir *storage.LogDir
	nodeID int32
	log    *slog.Logger
	now    func() time.Time
	opts   Options

	// isr queues the ISR changes of the partitions this broker leads while one
	// AlterPartition is in flight: the next request carries all of them
	// (Kafka's AlterPartitionManager does the same), so that thousands of
	// followers rejoining at once cost a few requests and controller
	// proposals, not one each.
	isr drainedQueue[isrChange]

	fetchMu   sync.Mutex
	fetchers  map[int32]*fetcher // by leader broker
	following map[*Partition]int32
	throttle  replicationThrottle

	// bg owns the short-lived goroutines: ISR proposals in flight, fetchers
	// being stopped and deleted topics' remote deletions. Close sets bgClosed,
	// cancels bgCtx and waits for them.
	bgMu     sync.Mutex
	bgClosed bool
	bg       sync.WaitGroup
	bgCtx    context.Context
	bgCancel context.CancelFunc

	// deletes is the queue of removed partitions' directories the deleter
	// frees in steps of deleteStep bytes, resting deleteInterval per step
	// (delete.go); deleteSeq names them.
	deletes        drainedQueue[string]
	deleteSeq      atomic.Uint64
	deleteStep     int64
	deleteInterval time.Duration

	mu         sync.RWMutex
	partitions map[TopicPartition]*Partition
	closed     bool // Close ran: Apply opens nothing more

	// applyMu serialises Apply. lastImage is the image Apply last brought the
	// partitions in line with, and unsettled the hosted partitions whose
	// preparation failed then: the next Apply prepares only those and the
	// partitions whose metadata differs from lastImage's.
	applyMu   sync.Mutex
	lastImage *metadata.Image
	// image is the image being applied or last applied, for reads without
	// applyMu (isrEligible).
	image     atomic.Pointer[metadata.Image]
	unsettled map[TopicPartition]bool

	// applied is the offset of the last image applied; appliedCh is closed and
	// replaced each time it moves, waking WaitApplied.
	appliedMu sync.Mutex
	applied   uint64
	appliedCh chan struct{}
}

// NewManager hosts partitions under dir.
func NewManager(fsys vfs.FS, dir string, nodeID int32, logger *slog.Logger, opts Options) (*Manager, error) {
	logDir, err := storage.OpenLogDir(fsys, dir, storage.LogDirOptions{
		CheckpointInterval: opts.CheckpointInterval, SyncFilesystem: opts.SyncFilesystem})
	if err != nil {
		return nil, err
	}
	if opts.ReplicaLagMax <= 0 {
		opts.ReplicaLagMax = 30 * time.Second
	}
	if opts.ProducerIDExpiration <= 0 {
		opts.ProducerIDExpiration = 24 * time.Hour
	}
	if opts.BrokerEpoch == nil {
		opts.BrokerEpoch = func() int64 { return -1 }
	}
	m := &Manager{
		fs: fsys, dir: dir, logDir: logDir, nodeID: nodeID, log: logger, now: time.Now, opts: opts,
		partitions: map[TopicPartition]*Partition{},
		appliedCh:  make(chan struct{}),
		fetchers:   map[int32]*fetcher{},
		following:  map[*Partition]int32{},
		deleteStep: defaultDeleteStep, deleteInterval: defaultDeleteInterval,
	}
	m.deleteSeq.Store(uint64(time.Now().UnixNano()))
	m.bgCtx, m.bgCancel = context.WithCancel(context.Background())
	if err := m.queueLeftoverDeletions(); err != nil {
		logDir.Close()
		return nil, err
	}
	return m, nil
}

// goOwned runs fn on a goroutine Close waits for, with a context Close
// cancels. After Close it runs nothing and reports false.
func (m *Manager) goOwned(fn func(ctx context.Context)) bool {
	m.bgMu.Lock()
	defer m.bgMu.Unlock()
	if m.bgClosed {
		return false
	}
	m.bg.Go(func() { fn(m.bgCtx) })
	return true
}

func (m *Manager) brokerEpoch() int64 { return m.opts.BrokerEpoch() }

// follow makes p fetch from leader (NoLeader: from nobody).
func (m *Manager) follow(p *Partition, leader int32) {
	m.fetchMu.Lock()
	defer m.fetchMu.Unlock()
	if cur, ok := m.following[p]; ok {
		if cur == leader {
			return
		}
		if f := m.fetchers[cur]; f != nil && f.remove(p) {
			delete(m.fetchers, cur)
			// Not waited for here (Apply must not block on a fetch in flight);
			// Close waits for it.
			if !m.goOwned(func(context.Context) { f.stop() }) {
				f.stop()
			}
		}
		delete(m.following, p)
	}
	if leader == metadata.NoLeader || leader == m.nodeID || m.opts.Transport == nil {
		return
	}
	f := m.fetchers[leader]
	if f == nil {
		f = newFetcher(m, leader)
		m.fetchers[leader] = f
	}
	f.add(p)
	m.following[p] = leader
}

// proposeISR queues an ISR change for a partition this broker leads (at most
// one per partition: see Partition.proposeISR) and starts a sender on a
// goroutine the Manager owns unless one runs; Close cancels it.
func (m *Manager) proposeISR(c isrChange) {
	if m.opts.ISRChanger == nil {
		c.p.isrChangeDone(c, nil, true, m.now())
		return
	}
	if m.isr.push(c) && !m.goOwned(m.sendISRChanges) {
		for _, c := range m.isr.abandon() {
			c.p.isrChangeDone(c, nil, true, m.now()) // closing: never sent
		}
	}
}

// isrEligible reports whether broker id, fetching with broker epoch epoch
// (-1: not sent), may join an ISR as far as this broker's image knows:
// registered, not fenced, not in controlled shutdown (KIP-841, Kafka's
// Partition.isReplicaIsrEligible; the controller checks again) and, with an
// epoch, at its current registration (KIP-903: a fetch of an earlier process
// of the broker, such as one delayed across its restart, does not vouch for
// the new one's log). A restarted broker fetches before the controller
// unfences it, and a broker in controlled shutdown until it stops: proposing
// either would only be refused, for every partition it follows, and the
// leader's high-water mark would wait for it meanwhile.
func (m *Manager) isrEligible(id int32, epoch int64) bool {
	img := m.image.Load()
	if img == nil {
		return true
	}
	b := img.Broker(id)
	return img.IsLive(id) && b != nil && !b.InControlledShutdown && (epoch < 0 || b.Epoch == epoch)
}

// sendISRChanges sends the queued ISR changes, all of them in one request,
// until the queue is empty.
func (m *Manager) sendISRChanges(ctx context.Context) {
	for batch := m.isr.take(0, false); batch != nil; batch = m.isr.take(0, false) {
		m.sendISRBatch(ctx, batch)
	}
}

func (m *Manager) sendISRBatch(ctx context.Context, batch []isrChange) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	changes := make([]ISRChange, len(batch))
	for i, c := range batch {
		epochs := slices.Clone(c.brokerEpochs)
		if j := slices.Index(c.isr, m.nodeID); j >= 0 && j < len(epochs) {
			epochs[j] = m.brokerEpoch()
		}
		changes[i] = ISRChange{TopicID: c.p.TopicID, Partition: c.p.Index, LeaderEpoch: c.leaderEpoch, PartitionEpoch: c.partitionEpoch, ISR: c.isr, BrokerEpochs: epochs}
	}
	results, err := m.opts.ISRChanger.AlterPartitions(ctx, changes)
	if err == nil && len(results) != len(batch) {
		err = fmt.Errorf("AlterPartition answered %d of %d changes", len(results), len(batch))
	}
	refused, firstRefused, firstErr := 0, -1, error(nil)
	for i, c := range batch {
		perr := err
		if perr == nil {
			perr = results[i].Err
		}
		if perr == nil && results[i].Partition == nil {
			perr = errors.New("AlterPartition answered no partition")
		}
		if newLeaderElected(perr) {
			// Applied: completing a reassignment moved the leadership away; the
			// metadata brings this broker its new role.
			m.log.Info("ISR changed, and a new leader was elected", "topic", c.p.Topic, "partition", c.p.Index, "change", c.why, "isr", c.isr)
			c.p.isrChangeDone(c, nil, false, m.now())
			continue
		}
		if perr != nil {
			if refused++; firstRefused < 0 {
				firstRefused, firstErr = i, perr
			}
			m.log.Debug("ISR change refused", "topic", c.p.Topic, "partition", c.p.Index, "change", c.why, "isr", c.isr, "err", perr)
			c.p.isrChangeDone(c, nil, refusedUnapplied(perr), m.now())
			continue
		}
		ip := results[i].Partition
		m.log.Info("ISR changed", "topic", c.p.Topic, "partition", c.p.Index, "change", c.why, "isr", ip.ISR, "partition_epoch", ip.PartitionEpoch)
		c.p.isrChangeDone(c, ip, false, m.now())
	}
	if refused > 0 {
		// One line per request, not per partition: a request may carry thousands.
		c := batch[firstRefused]
		m.log.Warn("ISR changes refused", "refused", refused, "of", len(batch), "first_topic", c.p.Topic, "first_partition", c.p.Index,
			"change", c.why, "isr", c.isr, "err", firstErr)
	}
}

// refusedUnapplied reports whether an AlterPartition error says the controller
// did not apply the change and never will (Kafka's INELIGIBLE_REPLICA and
// OPERATION_NOT_ATTEMPTED, from the local controller or over the link). Any
// other error leaves the outcome unknown.
func refusedUnapplied(err error) bool {
	code := metadata.ErrorCode(err)
	return code == kerr.IneligibleReplica.Code || code == kerr.OperationNotAttempted.Code ||
		errors.Is(err, kerr.IneligibleReplica) || errors.Is(err, kerr.OperationNotAttempted)
}

// newLeaderElected reports whether an AlterPartition error is
// NEW_LEADER_ELECTED: the change was applied, and it moved the leadership to
// another broker.
func newLeaderElected(err error) bool {
	return metadata.ErrorCode(err) == kerr.NewLeaderElected.Code || errors.Is(err, kerr.NewLeaderElected)
}

// RunISRMaintenance shrinks the ISR of led partitions whose followers fell behind,
// retries the resignation of leaders whose log failed and moves high-water
// marks no stalled follower holds any more, checking every half lag period
// until ctx is done.
func (m *Manager) RunISRMaintenance(ctx context.Context) {
	t := time.NewTicker(m.opts.ReplicaLagMax / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := m.now()
		for _, p := range m.Partitions() {
			p.resignIfFailed()
			p.maybeShrinkISR(now, m.opts.ReplicaLagMax)
			p.retryExpansion()
			// A follower outside the ISR that stopped catching up no
			// longer holds the high-water mark (tracker.highWatermark),
			// even if nothing else moves it.
			p.maybeAdvanceHighWatermark()
		}
	}
}

// Partition returns a hosted partition.
func (m *Manager) Partition(topic string, index int32) (*Partition, error) {
	if p := m.hosted(TopicPartition{topic, index}); p != nil {
		return p, nil
	}
	return nil, ErrUnknownPartition
}

// hosted returns partition tp, nil when this broker does not host it.
func (m *Manager) hosted(tp TopicPartition) *Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.partitions[tp]
}

// isClosed reports whether Close has begun closing the partitions.
func (m *Manager) isClosed() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.closed
}

// setHosted makes p partition tp, or forgets tp when p is nil.
func (m *Manager) setHosted(tp TopicPartition, p *Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p == nil {
		delete(m.partitions, tp)
		return
	}
	m.partitions[tp] = p
}

// Dir is the directory holding every hosted partition's log (Kafka's log dir).
func (m *Manager) Dir() string { return m.dir }

// Space is the size of the volume holding the log dir and the bytes still
// usable on it; ok is false when the filesystem cannot tell (vfs.SpaceReporter).
func (m *Manager) Space() (total, usable int64, ok bool) {
	r, isReporter := m.fs.(vfs.SpaceReporter)
	if !isReporter {
		return 0, 0, false
	}
	total, usable, err := r.Space(m.dir)
	return total, usable, err == nil
}

// Partitions returns every hosted partition.
func (m *Manager) Partitions() []*Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ps := make([]*Partition, 0, len(m.partitions))
	for _, p := range m.partitions {
		ps = append(ps, p)
	}
	return ps
}

// partitionName is the name of a partition's log directory.
func partitionName(topic string, index int32) string {
	return topic + "-" + strconv.Itoa(int(index))
}

// Apply brings the hosted partitions in line with img. Errors opening one partition
// are logged and returned joined; the others are still applied (and prepared
// again by the next Apply).
//
// Images share every unchanged topic and partition, so only the hosted
// partitions whose metadata or topic configuration differs from the last
// applied image's are prepared: a metadata change to one partition costs a
// broker hosting thousands a walk of the image, not a preparation of each.
func (m *Manager) Apply(img *metadata.Image) error {
	if m.isClosed() {
		return ErrClosed
	}
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.image.Store(img)
	m.applyThrottle(img)
	var hosted []roleChange
	// This broker's own broker configs come before the cluster-wide ones in
	// its topics' configuration (TopicConfigOn): a change to them may change
	// every topic's.
	own := strconv.Itoa(int(m.nodeID))
	ownChanged := m.lastImage != nil && !maps.Equal(m.lastImage.BrokerConfigs(own), img.BrokerConfigs(own))
	for _, t := range img.Topics() {
		var prev *metadata.Topic
		if m.lastImage != nil {
			prev = m.lastImage.TopicByID(t.ID)
		}
		if prev == t && !ownChanged && len(m.unsettled) == 0 {
			continue // the same topic, partitions and configuration as applied
		}
		topicConfig := img.TopicConfigOn(t, m.nodeID)
		sameConfig := prev != nil && prev.Name == t.Name && m.lastImage.TopicConfigOn(prev, m.nodeID) == topicConfig
		var config *metadata.TopicConfig
		for i, ip := range t.Partitions {
			if !contains(ip.Replicas, m.nodeID) {
				continue
			}
			if sameConfig && i < len(prev.Partitions) && prev.Partitions[i] == ip && !m.unsettled[TopicPartition{t.Name, ip.Index}] {
				continue
			}
			if config == nil {
				config = new(topicConfig)
			}
			hosted = append(hosted, roleChange{topic: t, config: config, part: ip})
		}
	}
	errs := m.applyPartitions(hosted)
	m.unsettled = nil
	for _, c := range hosted {
		if c.err != nil {
			if m.unsettled == nil {
				m.unsettled = map[TopicPartition]bool{}
			}
			m.unsettled[TopicPartition{c.topic.Name, c.part.Index}] = true
		}
	}
	m.lastImage = img
	removed := m.forgetUnhosted(img)
	defer m.setApplied(img.Offset())
	for _, p := range removed {
		m.follow(p, metadata.NoLeader)
		if p.IsLeader() {
			m.notifyLeadership(p, false)
		}
		if err := p.close(); err != nil {
			errs = append(errs, err)
		}
		if err := m.removeLog(p.Topic, p.Index); err != nil {
			errs = append(errs, err)
		}
		m.log.Info("partition removed", "topic", p.Topic, "partition", p.Index)
	}
	return errors.Join(errs...)
}

// forgetUnhosted removes from the hosted partitions those img no longer places
// on this broker, queueing the remote data of deleted topics for deletion, and
// returns them.
func (m *Manager) forgetUnhosted(img *metadata.Image) []*Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	var removed []*Partition
	for tp, p := range m.partitions {
		if !hostedIn(img, tp, p.TopicID, m.nodeID) || img.TopicByID(p.TopicID) == nil {
			removed = append(removed, p)
			delete(m.partitions, tp)
			if img.TopicByID(p.TopicID) == nil {
				m.deleteRemote(p)
			}
		}
	}
	return removed
}

// hostedIn reports whether img places partition tp of the topic with id on
// broker node.
func hostedIn(img *metadata.Image, tp TopicPartition, id metadata.UUID, node int32) bool {
	t := img.TopicByID(id)
	if t == nil || t.Name != tp.Topic || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return false
	}
	return contains(t.Partitions[tp.Partition].Replicas, node)
}

func (m *Manager) setApplied(offset uint64) {
	m.appliedMu.Lock()
	defer m.appliedMu.Unlock()
	if offset > m.applied {
		m.applied = offset
		close(m.appliedCh)
		m.appliedCh = make(chan struct{})
	}
}

// WaitApplied waits until an image at or after offset has been applied, so a
// client that just created a topic can use it on this broker at once.
func (m *Manager) WaitApplied(ctx context.Context, offset uint64) error {
	for {
		applied, ch := m.appliedOffset()
		if applied >= offset {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// appliedOffset is the offset of the image applied last and a channel closed
// when a newer one is.
func (m *Manager) appliedOffset() (uint64, chan struct{}) {
	m.appliedMu.Lock()
	defer m.appliedMu.Unlock()
	return m.applied, m.appliedCh
}

// applyParallelism bounds how many partitions are opened and given their role at
// once. Both wait on fsyncs (a new log's directory and files, the leader-epoch
// checkpoint), which overlap well: a broker given thousands of new partitions at
// once would otherwise take one disk round trip after another.
const applyParallelism = 32

// roleChange is one hosted partition of an image being applied.
type roleChange struct {
	topic *metadata.Topic
	// config is a copy of the topic's configuration on this broker
	// (metadata.Image.TopicConfigOn) that every partition of topic in the
	// same Apply shares (a partition holds it until its topic's next change):
	// not a copy per partition, nor a pointer into the Topic, which would keep
	// an old image's Topic and its partition list alive.
	config    *metadata.TopicConfig
	part      *metadata.Partition
	p         *Partition
	wasLeader bool
	wasEpoch  int32 // the leader epoch before
	leader    int32 // the leader to follow, NoLeader when none or this broker
	err       error
}

// applyPartitions opens and sets the role of every hosted partition, up to
// applyParallelism at a time (each touches only its own partition), then, in
// image order and one at a time, points the fetchers and reports leadership
// changes, which share state across partitions.
func (m *Manager) applyPartitions(changes []roleChange) []error {
	sem := make(chan struct{}, applyParallelism)
	var wg sync.WaitGroup
	for i := range changes {
		c := &changes[i]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c.p, c.wasLeader, c.wasEpoch, c.leader, c.err = m.preparePartition(c.topic, c.config, c.part)
		})
	}
	wg.Wait()
	var errs []error
	for _, c := range changes {
		if c.err != nil {
			m.log.Error("applying partition", "topic", c.topic.Name, "partition", c.part.Index, "err", c.err)
			errs = append(errs, c.err)
			continue
		}
		m.follow(c.p, c.leader)
		// A leader at a new epoch is reported again: it may have missed a
		// leadership of another broker in between (its image skipped it), and
		// the coordinators must reload what that one wrote (and the
		// transaction coordinator take the new epoch for its markers).
		isLeader := c.p.IsLeader()
		if isLeader != c.wasLeader || isLeader && c.p.LeaderEpoch() != c.wasEpoch {
			m.notifyLeadership(c.p, isLeader)
		}
	}
	return errs
}

// preparePartition opens ip's log if this broker does not host it yet and
// applies its configuration and role. It returns the partition, whether it led
// before and the leader to follow.
func (m *Manager) preparePartition(t *metadata.Topic, config *metadata.TopicConfig, ip *metadata.Partition) (p *Partition, wasLeader bool, wasEpoch, leader int32, err error) {
	tp := TopicPartition{t.Name, ip.Index}
	p = m.hosted(tp)
	if p != nil && p.TopicID != t.ID {
		// Same name, new topic: the old one was deleted while we were not looking.
		m.setHosted(tp, nil)
		m.follow(p, metadata.NoLeader)
		p.close()
		if err := m.removeLog(t.Name, ip.Index); err != nil {
			return nil, false, 0, 0, err
		}
		p = nil
	}
	scfg := storageConfig(*config, m.now)
	scfg.OnSync, scfg.OnRoll, scfg.CacheTailBytes = m.opts.OnSync, m.opts.OnRoll, m.opts.CacheTail
	if p == nil {
		l, err := m.logDir.Open(partitionName(t.Name, ip.Index), scfg)
		if err != nil {
			return nil, false, 0, 0, err
		}
		p, err = newPartition(t.Name, t.ID, ip.Index, l, scfg.Flush.Mode == storage.GroupCommit, m.nodeID,
			producerExpiry{after: m.opts.ProducerIDExpiration, now: m.now})
		if err != nil {
			l.Close()
			return nil, false, 0, 0, err
		}
		p.isrProposer, p.isrEligible, p.replicaLagMax = m.proposeISR, m.isrEligible, m.opts.ReplicaLagMax
		// Configured before it is published: the cleaner reads the config of
		// every partition it finds.
		p.setConfig(config)
		m.setHosted(tp, p)
		m.log.Debug("partition opened", "topic", t.Name, "partition", ip.Index, "log_end_offset", l.LogEndOffset())
	} else if prev := p.Config(); prev == nil || *prev != *config {
		m.reconfigureLog(p, scfg)
	}
	p.setConfig(config)
	m.applyTier(p, *config)
	wasLeader, wasEpoch = p.IsLeader(), p.LeaderEpoch()
	leader, err = p.applyState(ip, m.now())
	if err != nil {
		return nil, false, 0, 0, fmt.Errorf("applying the role of %s-%d: %w", t.Name, ip.Index, err)
	}
	return p, wasLeader, wasEpoch, leader, nil
}

// reconfigureLog applies a changed topic config to p's open log (see
// storage.Log.Reconfigure for when each setting takes effect). The flush mode
// stays the one the log opened with: the partition's high-water mark follows
// the durable end under group commit only, so a topic that gains or loses
// flush.messages and flush.ms switches mode when the log is next opened.
func (m *Manager) reconfigureLog(p *Partition, scfg storage.Config) {
	mode := storage.Interval
	if p.groupCommit {
		mode = storage.GroupCommit
	}
	if scfg.Flush.Mode != mode {
		scfg.Flush = storage.FlushPolicy{Mode: mode} // Interval: synced at rolls and Close only
	}
	if err := p.log.Reconfigure(scfg); err != nil && !errors.Is(err, storage.ErrClosed) {
		m.log.Warn("topic config not applied to the open log", "topic", p.Topic, "partition", p.Index, "err", err)
	}
}

func (m *Manager) notifyLeadership(p *Partition, leader bool) {
	if m.opts.OnLeadership != nil {
		m.opts.OnLeadership(p, leader)
	}
}

// storageConfig maps a topic's configuration onto its log's. Strata's default
// flush policy is group commit; setting flush.messages or flush.ms opts a topic into
// Kafka's interval flushing. A segment size below the log's floor, which a
// metadata log written before the floors of metadata.ValidateConfigChange may
// hold, is raised to it: a node refused to start over such a topic. On a
// compacted topic a segment rolls by max.compaction.lag.ms when that is
// shorter than segment.ms (Kafka's LogConfig.maxSegmentMs): the cleaner never
// reads the active segment; the log bounds segment.jitter.ms by that age.
// Retention is not the log's: the cleaner passes the topic's (clean), whose 0
// the log would read as its default.
func storageConfig(tc metadata.TopicConfig, now func() time.Time) storage.Config {
	segmentMs := tc.SegmentMs
	if tc.CleanupPolicy&metadata.CleanupCompact != 0 {
		segmentMs = min(segmentMs, tc.MaxCompactionLagMs)
	}
	c := storage.Config{
		SegmentBytes:       max(int64(tc.SegmentSize()), storage.MinSegmentBytes),
		SegmentAge:         millis(segmentMs),
		SegmentJitter:      millis(tc.SegmentJitterMs),
		FileDeleteDelay:    millis(tc.FileDeleteDelayMs),
		IndexIntervalBytes: indexInterval(tc.IndexIntervalBytes),
		IndexMaxBytes:      int(tc.SegmentIndexBytes),
		LogAppendTime:      tc.MessageTimestampType == metadata.LogAppendTime,
		Preallocate:        tc.Preallocate,
		Now:                now,
	}
	if tc.FlushMessages != math.MaxInt64 || tc.FlushMs != math.MaxInt64 {
		c.Flush = storage.FlushPolicy{Mode: storage.Interval}
		if tc.FlushMessages != math.MaxInt64 {
			c.Flush.IntervalMessages = tc.FlushMessages
		}
		if tc.FlushMs != math.MaxInt64 {
			c.Flush.Interval = millis(tc.FlushMs)
		}
	}
	return c
}

// indexInterval is index.interval.bytes for a log, whose 0 is its default:
// Kafka's 0 is an index entry for every batch (storage.IndexEveryBatch).
func indexInterval(v int32) int {
	if v == 0 {
		return storage.IndexEveryBatch
	}
	return int(v)
}

// millis converts a Kafka millisecond setting; negative stays negative (infinite).
func millis(ms int64) time.Duration {
	if ms < 0 {
		return -1
	}
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// compactOptions maps a compacted topic's configuration onto a cleaner pass's.
func compactOptions(tc metadata.TopicConfig) storage.CompactOptions {
	return storage.CompactOptions{
		DeleteRetention:        millis(tc.DeleteRetentionMs),
		MinCleanableDirtyRatio: tc.MinCleanableDirtyRatio,
		MinCompactionLag:       millis(tc.MinCompactionLagMs),
		MaxCompactionLag:       millis(tc.MaxCompactionLagMs),
		MaxRecordBytes:         int(tc.MaxDecompressedMessageBytes),
	}
}

// RunCleaner cleans every hosted partition every interval until ctx is done:
// topics whose cleanup.policy includes delete lose whole old segments to
// retention.ms and retention.bytes; topics whose policy includes compact are
// compacted (latest record per key). Both stay below the high-water mark, on
// leaders and followers alike (each replica cleans its own log). Every
// partition forgets its producers idle for longer than
// Options.ProducerIDExpiration.
func (m *Manager) RunCleaner(ctx context.Context, interval time.Duration) {
	everyTick(ctx, interval, func() {
		for _, p := range m.Partitions() {
			m.clean(p)
		}
	})
}

// everyTick calls fn every interval until ctx is done.
func everyTick(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}

func (m *Manager) clean(p *Partition) {
	p.removeExpiredProducers(m.now(), m.opts.ProducerIDExpiration)
	cfg := p.Config()
	hwm := p.HighWatermark()
	if tier := p.Tier(); tier != nil {
		m.cleanTiered(p, tier)
	} else if cfg.CleanupPolicy&metadata.CleanupDelete != 0 {
		n, err := p.log.EnforceRetentionLimits(hwm, millis(cfg.RetentionMs), cfg.RetentionBytes)
		if err != nil && !errors.Is(err, storage.ErrClosed) {
			m.log.Warn("retention", "topic", p.Topic, "partition", p.Index, "err", err)
		} else if n > 0 {
			m.log.Info("retention deleted segments", "topic", p.Topic, "partition", p.Index, "segments", n, "log_start_offset", p.LogStartOffset())
		}
	}
	if cfg.CleanupPolicy&metadata.CleanupCompact != 0 {
		// Kafka's cleaner stops at the first unstable offset: an open
		// transaction's records may still be aborted.
		st, err := p.log.Compact(p.lastStableOffset(hwm), compactOptions(*cfg))
		switch {
		case errors.Is(err, batch.ErrRecordTooLarge):
			// Kafka marks the partition uncleanable until a restart; the
			// next interval tries again, as after any failed pass (the
			// limit may have been raised).
			m.log.Warn("compaction failed: a record above max.decompressed.message.bytes", "topic", p.Topic, "partition", p.Index, "err", err)
		case err != nil && !errors.Is(err, storage.ErrClosed):
			m.log.Warn("compaction", "topic", p.Topic, "partition", p.Index, "err", err)
		case err == nil && st.Cleaned:
			m.log.Info("compacted", "topic", p.Topic, "partition", p.Index,
				"bytes_read", st.BytesRead, "bytes_written", st.BytesWritten, "superseded", st.Superseded, "tombstones_removed", st.TombstonesRemoved, "aborted_removed", st.AbortedRemoved, "markers_removed", st.MarkersRemoved)
		}
	}
}

// Close stops every fetcher, cancels and waits for the ISR proposals in flight,
// and closes every partition (a clean shutdown: the logs write their markers,
// which the LogDir's one syncfs makes true).
func (m *Manager) Close() error {
	m.closeBackground()
	m.bgCancel()
	for _, f := range m.takeFetchers() {
		f.stop()
	}
	m.bg.Wait()
	ps := m.takePartitions()
	// Closing a log waits on the disk (index files, checkpoints): up to
	// applyParallelism at a time, as applyPartitions opens them.
	errs := make([]error, 0, len(ps)+1)
	var (
		errMu sync.Mutex
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, applyParallelism)
	for _, p := range ps {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := p.close(); err != nil {
				errMu.Lock()
				defer errMu.Unlock()
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	// Last: it writes the clean-shutdown markers of the logs just closed.
	errs = append(errs, m.logDir.Close())
	return errors.Join(errs...)
}

// closeBackground makes goOwned run nothing more.
func (m *Manager) closeBackground() {
	m.bgMu.Lock()
	defer m.bgMu.Unlock()
	m.bgClosed = true
}

// takeFetchers returns every fetcher, leaving none.
func (m *Manager) takeFetchers() map[int32]*fetcher {
	m.fetchMu.Lock()
	defer m.fetchMu.Unlock()
	fetchers := m.fetchers
	m.fetchers, m.following = map[int32]*fetcher{}, map[*Partition]int32{}
	return fetchers
}

// takePartitions marks the manager closed and returns every hosted partition,
// leaving none.
func (m *Manager) takePartitions() map[TopicPartition]*Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.partitions
	m.partitions = map[TopicPartition]*Partition{}
	m.closed = true
	return ps
}

func contains(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
