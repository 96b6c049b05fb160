package controller

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/controller/raftstore"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/vfs"
)

// Errors of the controller itself; plan errors are metadata's.
var (
	// ErrNotController: this node is not the active controller, or lost that role
	// while the request was in flight (then the request may or may not have taken
	// effect). NOT_CONTROLLER; retry on the leader (LeaderID).
	ErrNotController = &metadata.KafkaError{Code: kerr.NotController.Code, Msg: "not the active controller"}
	// ErrClosed: the controller has been closed.
	ErrClosed = errors.New("controller: closed")
)

// Peer is one controller voter: its node id and Raft address.
type Peer struct {
	ID   int32
	Addr string
}

// Config configures a controller. Zero durations and counts take the defaults
// noted; tests shorten the timeouts.
type Config struct {
	NodeID  int32
	DataDir string
	// FS holds DataDir: the Raft log, stable state and snapshots (package
	// raftstore). nil: the operating system's (vfs.Default).
	FS vfs.FS
	// BindAddr is the Raft TCP listener; unused when Transport is set.
	BindAddr string
	// Voters is the static voter set, including this node. Empty: this node
	// alone, at the transport's address.
	Voters []Peer
	// Observer starts this node as a non-voting member for a broker-only node:
	// it never bootstraps a quorum and receives the metadata log once the active
	// controller adds it (AddObserver). Voters is then unused.
	Observer bool
	// Transport replaces the TCP transport (tests use raft.NewInmemTransport).
	// The caller owns it and closes it after Close.
	Transport raft.Transport
	// NameVoter, when set, gives the address at which to reach voter id
	// only if its data directory is dir (see voter_directory.go); the
	// transport's stream layer must open such connections with the name and
	// the receiving node refuse them unless it is that voter. The transport
	// must support pre-vote.
	NameVoter func(addr raft.ServerAddress, id int32, dir metadata.UUID) raft.ServerAddress

	// DefaultPartitions is used by CreateTopics for NumPartitions -1 (1).
	DefaultPartitions int32
	// RemoteStorage says that this node was started with remote storage
	// (--remote-storage), Kafka's remote.log.storage.system.enable: without
	// it, a topic may not have remote.storage.enable=true. As in Kafka, the
	// active controller's own setting decides, so a controller-only node of a
	// cluster with tiered topics is started with it too.
	RemoteStorage bool

	HeartbeatTimeout   time.Duration // follower without leader contact starts an election (1s)
	ElectionTimeout    time.Duration // candidate without a result retries (1s)
	LeaderLeaseTimeout time.Duration // leader without quorum contact steps down (500ms)
	CommitTimeout      time.Duration // idle leader heartbeat interval bound (50ms)
	// ApplyTimeout bounds the wait for a proposal to enter the Raft log (5s).
	ApplyTimeout time.Duration
	// SessionTimeout is how long the active controller waits for a broker's
	// heartbeat before it fences the broker (9s).
	SessionTimeout time.Duration
	// Tokens turns delegation tokens on (plan_tokens.go).
	Tokens TokenConfig
	// LeaderImbalanceCheckInterval is how often the active controller moves
	// leadership back to preferred replicas (auto.leader.rebalance); 0 never.
	LeaderImbalanceCheckInterval time.Duration

	SnapshotInterval  time.Duration // how often to consider a snapshot (2m)
	SnapshotThreshold uint64        // log entries since the last snapshot that trigger one (8192)
	TrailingLogs      uint64        // entries kept after a snapshot for slow followers (10240)
	// SnapshotMaxBytes is Kafka's metadata.log.max.record.bytes.between.snapshots:
	// bytes of records applied since the last snapshot that trigger one (20 MiB;
	// negative: off). SnapshotMaxInterval is metadata.log.max.snapshot.interval.ms:
	// the longest time since the last snapshot with records applied after it (1h;
	// negative: off). See snapshots.go.
	SnapshotMaxBytes    int64
	SnapshotMaxInterval time.Duration

	Logger *slog.Logger // default slog.Default()
	// RaftLogLevel is the least severe raft log level passed on (Warn).
	RaftLogLevel slog.Leveler
	// Rand is the source of topic ids (crypto/rand).
	Rand io.Reader
	// clock replaces time.Now for broker sessions (tests).
	clock func() time.Time
	// probe replaces the TCP connect that tests a suspect broker's controller
	// address (tests; see probe.go).
	probe func(ctx context.Context, addr string) error
}

func (c *Config) setDefaults() {
	setDuration := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	setDuration(&c.HeartbeatTimeout, time.Second)
	setDuration(&c.ElectionTimeout, time.Second)
	setDuration(&c.LeaderLeaseTimeout, 500*time.Millisecond)
	setDuration(&c.CommitTimeout, 50*time.Millisecond)
	setDuration(&c.ApplyTimeout, 5*time.Second)
	setDuration(&c.SnapshotInterval, 2*time.Minute)
	setDuration(&c.SnapshotMaxInterval, time.Hour)
	if c.SnapshotMaxBytes == 0 {
		c.SnapshotMaxBytes = 20 << 20
	}
	setDuration(&c.SessionTimeout, 9*time.Second)
	if c.clock == nil {
		c.clock = time.Now
	}
	if c.probe == nil {
		c.probe = dialProbe
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.DefaultPartitions == 0 {
		c.DefaultPartitions = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RaftLogLevel == nil {
		c.RaftLogLevel = slog.LevelWarn
	}
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
}

// Validate checks a configuration after defaults are applied.
func (c *Config) Validate() error {
	switch {
	case c.NodeID < 0:
		return fmt.Errorf("controller: node id %d is negative", c.NodeID)
	case c.DataDir == "":
		return errors.New("controller: no data dir")
	case c.Transport == nil && c.BindAddr == "":
		return errors.New("controller: no bind address")
	case c.DefaultPartitions < 1 || c.DefaultPartitions > metadata.MaxPartitions:
		return fmt.Errorf("controller: default partitions %d", c.DefaultPartitions)
	case c.LeaderLeaseTimeout > c.HeartbeatTimeout:
		return errors.New("controller: the leader lease timeout exceeds the heartbeat timeout")
	case c.SessionTimeout < 0 || c.LeaderImbalanceCheckInterval < 0:
		return errors.New("controller: negative session timeout or leader imbalance check interval")
	}
	if len(c.Voters) == 0 || c.Observer {
		return nil
	}
	seen := map[int32]bool{}
	for _, p := range c.Voters {
		if seen[p.ID] || p.Addr == "" {
			return fmt.Errorf("controller: voter %d repeated or without address", p.ID)
		}
		seen[p.ID] = true
	}
	if !seen[c.NodeID] {
		return fmt.Errorf("controller: node %d is not among the voters", c.NodeID)
	}
	return nil
}

// Controller runs this node's member of the controller quorum.
type Controller struct {
	cfg   Config
	log   *slog.Logger
	raft  *raft.Raft
	fsm   *fsm
	store *raftstore.WAL
	trans raft.Transport
	// ownTrans is the TCP transport Start made, closed by Close.
	ownTrans io.Closer

	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	// sem (one slot) serialises planning and proposing on the leader; holding
	// it guards the fields below.
	sem chan struct{}
	// barrierTerm is the term in which this node, as leader, last confirmed
	// that its image reflects every entry committed before.
	barrierTerm uint64
	// pending carries the outcome of a proposal whose caller gave up waiting;
	// the next proposer waits for it first, so it plans on an image that
	// includes it.
	pending <-chan error

	// voterChange is held by the voter change (AddVoter, RemoveVoter) in
	// flight; another is refused meanwhile (voters.go).
	voterChange sync.Mutex
	// observers is held by a broker registration, an unregistration and a
	// voter's removal from its membership check to the end of its membership
	// change, so that a registered broker-only node stays a member of the
	// quorum and an unregistered one does not (observers.go).
	observers sync.Mutex
	// observerChange, guarded by observers, is the outcome of a membership
	// change whose caller gave up waiting (awaitMembership).
	observerChange <-chan error

	// live holds broker sessions while this node is the active controller.
	live *liveness
	// shortTimeouts is set while the shortened start-up election timeouts
	// are in force (sole_voter.go).
	shortTimeouts atomic.Bool
	// wake (one slot) asks the supervisor to check broker sessions now.
	wake chan struct{}
	// push (one slot) asks for a barrier that tells the other members what
	// this leader committed (commit_push.go).
	push chan struct{}
	// pushWG is pushCommits, which Close waits for before it stops Raft: a
	// barrier still queued when Raft shuts down is never answered.
	pushWG sync.WaitGroup
	// probes are the brokers whose controller address is being probed.
	probes struct {
		sync.Mutex
		inFlight map[int32]bool
	}
	// lw is the leader watch of a follower voter (leader_watch.go).
	lw struct {
		sync.Mutex
		w       leaderWatch
		probing bool
		// stagger is this node's random part of the silence after which it
		// stands for election, drawn once.
		stagger time.Duration
	}
}

// Start opens (or creates) the controller's state in cfg.DataDir and starts
// Raft. A fresh data dir bootstraps the voter set once; later starts recover
// it from the log and snapshots.
func Start(cfg Config) (*Controller, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:  cfg,
		log:  cfg.Logger.With("component", "controller", "node", cfg.NodeID),
		done: make(chan struct{}),
		sem:  make(chan struct{}, 1),
		wake: make(chan struct{}, 1),
		push: make(chan struct{}, 1),
		live: newLiveness(cfg.SessionTimeout),
	}
	if err := c.start(); err != nil {
		c.closeResources()
		return nil, err
	}
	return c, nil
}

func (c *Controller) start() error {
	cfg := &c.cfg
	if cfg.FS == nil {
		cfg.FS = vfs.Default
	}
	if err := vfs.MkdirAllDurable(cfg.FS, cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	hl := newHclogAdapter(cfg.Logger, cfg.RaftLogLevel.Level())
	var err error
	if c.store, err = raftstore.OpenWAL(cfg.FS, cfg.DataDir); err != nil {
		return err
	}
	if migrated, err := raftstore.MigrateBolt(cfg.FS, cfg.DataDir, c.store); err != nil {
		return err
	} else if migrated {
		c.log.Info("migrated the Raft log from raft.db to raft.wal")
	}
	snaps, err := raftstore.OpenSnapshots(cfg.FS, cfg.DataDir, 2)
	if err != nil {
		return fmt.Errorf("controller: snapshot store: %w", err)
	}
	c.fsm = newFSM(c.log, cfg.SnapshotMaxBytes)
	c.trans = cfg.Transport
	if c.trans == nil {
		nt, err := c.tcpTransport(hl)
		if err != nil {
			return err
		}
		c.trans, c.ownTrans = nt, nt
	}
	if c.trans, err = c.namingTransportFor(c.trans); err != nil {
		return err
	}

	rc := raft.DefaultConfig()
	rc.LocalID = serverID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.Logger = hl
	// A leader that removes itself from the voters (RemoveVoter) steps down
	// and goes on as a follower: it may stay a non-voting member (a broker).
	rc.ShutdownOnRemove = false
	notify := make(chan bool, 1)
	rc.NotifyCh = notify
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("controller: %w", err)
	}

	existing, err := raft.HasExistingState(c.store, c.store, snaps)
	if err != nil {
		return fmt.Errorf("controller: reading raft state: %w", err)
	}
	if !existing && !cfg.Observer {
		voters := c.voters()
		c.log.Info("bootstrapping controller quorum", "voters", voters.Servers)
		if err := raft.BootstrapCluster(rc, c.store, c.store, snaps, c.trans, voters); err != nil {
			return fmt.Errorf("controller: bootstrap: %w", err)
		}
	}

	if c.raft, err = raft.NewRaft(rc, c.fsm, c.store, c.store, snaps, c.trans); err != nil {
		return fmt.Errorf("controller: starting raft: %w", err)
	}
	c.wg.Add(3)
	go c.logLeadership(notify)
	go c.superviseBrokers()
	go c.snapshotOnBounds()
	c.pushWG.Add(1)
	go c.pushCommits()
	if err := c.maybeShortenElection(rc); err != nil {
		// Only start-up is slower: the election waits the configured timeout.
		c.log.Warn("could not shorten the first election", "err", err)
	}
	return nil
}

func (c *Controller) tcpTransport(hl *hclogAdapter) (*raft.NetworkTransport, error) {
	var advertise net.Addr
	for _, p := range c.cfg.Voters {
		if p.ID == c.cfg.NodeID {
			a, err := net.ResolveTCPAddr("tcp", p.Addr)
			if err != nil {
				return nil, fmt.Errorf("controller: voter address %q: %w", p.Addr, err)
			}
			advertise = a
		}
	}
	nt, err := raft.NewTCPTransportWithConfig(c.cfg.BindAddr, advertise,
		&raft.NetworkTransportConfig{MaxPool: 3, Timeout: 10 * time.Second, Logger: hl})
	if err != nil {
		return nil, fmt.Errorf("controller: raft transport on %s: %w", c.cfg.BindAddr, err)
	}
	return nt, nil
}

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

func (c *Controller) voters() raft.Configuration {
	if len(c.cfg.Voters) == 0 {
		return raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: serverID(c.cfg.NodeID), Address: c.trans.LocalAddr(),
		}}}
	}
	var conf raft.Configuration
	for _, p := range c.cfg.Voters {
		conf.Servers = append(conf.Servers, raft.Server{
			Suffrage: raft.Voter, ID: serverID(p.ID), Address: raft.ServerAddress(p.Addr),
		})
	}
	return conf
}

func (c *Controller) logLeadership(notify <-chan bool) {
	defer c.wg.Done()
	for {
		select {
		case leader := <-notify:
			if leader {
				c.log.Info("became the active controller", "term", c.raft.CurrentTerm())
				c.wakeSupervisor() // probe the brokers not heard from yet
			} else {
				c.log.Info("no longer the active controller")
			}
		case <-c.done:
			return
		}
	}
}

// Close stops Raft and releases the data dir. It is safe to call more than once.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		close(c.done)
		c.closeErr = c.closeResources()
	})
	return c.closeErr
}

func (c *Controller) closeResources() error {
	var errs []error
	// Raft answers a barrier in flight while it runs (committed, or leadership
	// lost within the lease), so pushCommits ends before Raft stops.
	c.pushWG.Wait()
	if c.raft != nil {
		errs = append(errs, c.raft.Shutdown().Error())
	}
	c.wg.Wait()
	if c.ownTrans != nil {
		errs = append(errs, c.ownTrans.Close())
	}
	if c.fsm != nil {
		c.fsm.closeWatchers()
	}
	if c.store != nil {
		errs = append(errs, c.store.Close())
	}
	return errors.Join(errs...)
}

// Image returns the latest applied image. It never blocks.
func (c *Controller) Image() *metadata.Image { return c.fsm.image() }

// Watch returns a channel that holds the current image at once and then each
// newer one. It never blocks Raft: a slow reader skips to the newest image, and
// may see the same image twice. cancel (or Close) closes the channel.
func (c *Controller) Watch() (images <-chan *metadata.Image, cancel func()) {
	return c.fsm.watch()
}

// IsLeader reports whether this node is the active controller.
func (c *Controller) IsLeader() bool { return c.raft.State() == raft.Leader }

// LeaderID returns the node id of the active controller as this node knows
// it, or -1.
func (c *Controller) LeaderID() int32 {
	_, id := c.raft.LeaderWithID()
	n, err := strconv.ParseInt(string(id), 10, 32)
	if id == "" || err != nil {
		return -1
	}
	return int32(n)
}

// readyPoll is how often WaitReady rechecks Raft's state.
const readyPoll = 10 * time.Millisecond

// WaitReady waits until a leader is elected and this node's image reflects the
// log: on the leader, every entry committed before its term; on a follower,
// everything the leader has told it is committed.
func (c *Controller) WaitReady(ctx context.Context) error {
	t := time.NewTicker(readyPoll)
	defer t.Stop()
	for {
		if c.IsLeader() {
			err := c.run(ctx, func(*metadata.Image) ([]metadata.Record, error) { return nil, nil })
			if !errors.Is(err, ErrNotController) {
				return err
			}
		} else if c.LeaderID() >= 0 {
			if commit := c.raft.CommitIndex(); commit > 0 && c.raft.AppliedIndex() >= commit {
				return nil
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return ErrClosed
		}
	}
}

// Propose appends recs to the metadata log as one batch and waits until this
// node has applied it. The error is the batch's apply error if it was rejected.
// If ctx ends first the batch may still be applied later.
func (c *Controller) Propose(ctx context.Context, recs []metadata.Record) error {
	return c.run(ctx, func(*metadata.Image) ([]metadata.Record, error) { return recs, nil })
}

// run plans and proposes with the semaphore held, so no two plans interleave:
//  1. Fail with ErrNotController unless this node leads.
//  2. Wait for a proposal an earlier caller abandoned.
//  3. Once per term, wait for a Raft barrier: the image then holds every entry
//     committed by earlier leaders.
//  4. Plan against the image and propose the records; wait until applied.
//
// Each term barrier and each applied proposal is followed by a commit push
// (commit_push.go).
func (c *Controller) run(ctx context.Context, plan func(*metadata.Image) ([]metadata.Record, error)) error {
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrClosed
	}
	defer func() { <-c.sem }()
	switch c.raft.State() {
	case raft.Leader:
	case raft.Shutdown:
		return ErrClosed
	default:
		return c.notController()
	}
	if c.pending != nil {
		// Its outcome belongs to the caller that gave up; only the wait matters.
		_ = c.waitLocked(ctx, c.pending)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if term := c.raft.CurrentTerm(); term != c.barrierTerm {
		b := c.raft.Barrier(c.cfg.ApplyTimeout)
		if err := c.waitLocked(ctx, resolve(b.Error)); err != nil {
			return err
		}
		c.barrierTerm = term
		c.notePush()
	}
	recs, err := plan(c.fsm.image())
	if err != nil || len(recs) == 0 {
		return err
	}
	f := c.raft.Apply(metadata.EncodeBatch(recs), c.cfg.ApplyTimeout)
	return c.waitLocked(ctx, resolve(func() error {
		if err := f.Error(); err != nil {
			return err
		}
		c.notePush()
		// The state machine's verdict: nil, or why it rejected the batch.
		err, _ := f.Response().(error)
		return err
	}))
}

// resolve runs wait on its own goroutine, so that a caller can stop waiting
// without abandoning the result (a raft future may be waited on only once).
func resolve(wait func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- wait() }()
	return ch
}

// waitLocked waits for a result; if ctx ends first the result is kept in
// pending for the next proposer. Raft's errors are translated; the state
// machine's pass through.
func (c *Controller) waitLocked(ctx context.Context, result <-chan error) error {
	c.pending = nil
	return c.waitOrKeep(ctx, result, &c.pending)
}

// waitOrKeep waits for result; if ctx ends first, result is kept in *kept
// for whoever must wait for it next. Raft's errors are translated.
func (c *Controller) waitOrKeep(ctx context.Context, result <-chan error, kept *<-chan error) error {
	select {
	case err := <-result:
		return c.translate(err)
	case <-ctx.Done():
		*kept = result
		return ctx.Err()
	}
}

func (c *Controller) translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: %v", c.notController(), err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	}
	return err
}

func (c *Controller) notController() error {
	if id := c.LeaderID(); id >= 0 && id != c.cfg.NodeID {
		return fmt.Errorf("%w: the leader is node %d", ErrNotController, id)
	}
	return fmt.Errorf("%w: no leader elected", ErrNotController)
}
