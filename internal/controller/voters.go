package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/metadata"
)

// Runtime changes of the voter set (KIP-853's AddRaftVoter and
// RemoveRaftVoter over Raft's membership changes). A voter is added by
// promoting an observer: a broker-only node that joined the quorum as a
// non-voting member and so receives the metadata log. Kafka adds a voter
// only once it has seen the replica catch up: its leader (4.4's
// LeaderState.isReplicaCaughtUp) wants an observer that has reached the
// leader's log end at least once in the leader's epoch and fetched within
// the last hour ("lagging behind" otherwise), and a replica that does not
// answer the leader's ApiVersions is refused too; both are
// REQUEST_TIMED_OUT. Strata's observers report their progress in broker heartbeats
// (liveness), so the active controller wants, in its term, a live broker
// session (a heartbeat within the session timeout, the process not proven
// dead and not in controlled shutdown: the counterpart of the recent fetch
// and the ApiVersions answer, tighter than an hour, since a voter that
// cannot vote costs the quorum its fault tolerance) and a catch-up within
// the session timeout (by Kafka's catch-up rule, liveness.heartbeat). A
// removed voter that is a registered broker stays a non-voting member, as a
// removed Kafka voter keeps fetching as an observer (UnregisterBroker takes
// it out); any other leaves the configuration. The active controller removes itself as Raft allows
// (and KIP-853 does): it commits the configuration without itself, which
// needs a majority of the remaining voters, and then steps down; they elect
// a new leader. One change at a time, as in Kafka: another is refused
// while one is in flight (ErrVoterChangePending). Until session 11 it handed leadership over first, to the
// voter Raft's LeadershipTransfer picks (the furthest replicated, reachable
// or not), and failed with "leadership transfer timeout" when that voter was
// cut off (chaos seed 963). A removal is refused unless a majority of the
// voters it leaves answer (checkMajorityLeft).

var (
	// ErrDuplicateVoter: the node is a voter already. DUPLICATE_VOTER.
	ErrDuplicateVoter = &metadata.KafkaError{Code: kerr.DuplicateVoter.Code, Msg: "already a voter"}
	// ErrVoterNotFound: the node to remove is not a voter. VOTER_NOT_FOUND.
	ErrVoterNotFound = &metadata.KafkaError{Code: kerr.VoterNotFound.Code, Msg: "not a voter"}
	// ErrVoterChangePending: another voter change is in flight.
	// REQUEST_TIMED_OUT, worded as Kafka's leader answers it: retry once it
	// is done.
	ErrVoterChangePending = &metadata.KafkaError{Code: kerr.RequestTimedOut.Code, Msg: "Request timed out waiting for leader to handle previous voter change request"}
	// ErrLastVoter: the node to remove is the only voter. VOTER_NOT_FOUND,
	// as Kafka's voter set yields no set without it.
	ErrLastVoter = &metadata.KafkaError{Code: kerr.VoterNotFound.Code, Msg: "cannot remove the only voter"}
	// ErrVotersUnreachable: too few of the voters a removal would leave
	// answer now for it to commit. REQUEST_TIMED_OUT: retry once they are
	// back.
	ErrVotersUnreachable = &metadata.KafkaError{Code: kerr.RequestTimedOut.Code, Msg: "too few voters reachable"}
	// ErrVoterNotCaughtUp: the node to add is not a non-voting member of
	// the quorum with the data directory the request names, so it does not
	// hold the metadata log as that voter. REQUEST_TIMED_OUT, as Kafka
	// answers for a replica it has not seen catch up ("lagging behind"),
	// which is also its answer for an unknown node or directory id.
	ErrVoterNotCaughtUp = &metadata.KafkaError{Code: kerr.RequestTimedOut.Code, Msg: "not caught up"}
	// ErrVoterLagging: the node to add is a non-voting member but has no
	// live broker session with this controller or has not caught up with it
	// lately (liveness.voterLag). REQUEST_TIMED_OUT, worded as Kafka's
	// "since it is lagging behind", which `strata cluster add-controller`
	// retries until its timeout.
	ErrVoterLagging = &metadata.KafkaError{Code: kerr.RequestTimedOut.Code, Msg: "lagging behind"}
	// ErrInvalidVoterKey: a node reported another data directory than the
	// one recorded for the voter of its id (voter_directory.go).
	// INVALID_VOTER_KEY.
	ErrInvalidVoterKey = &metadata.KafkaError{Code: kerr.InvalidVoterKey.Code, Msg: "not the voter's data directory"}
)

// servers returns the members of the latest Raft configuration.
func (c *Controller) servers(ctx context.Context) ([]raft.Server, error) {
	f := c.raft.GetConfiguration()
	if err := c.await(ctx, f.Error); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}

// member returns node id's entry in the latest Raft configuration and the
// number of voters there.
func (c *Controller) member(ctx context.Context, id int32) (s raft.Server, ok bool, voters int, err error) {
	all, err := c.servers(ctx)
	for _, m := range all {
		if m.Suffrage == raft.Voter {
			voters++
		}
		if m.ID == serverID(id) {
			s, ok = m, true
		}
	}
	return s, ok, voters, err
}

// AddVoter makes node id, a non-voting member, a voter. addr, if set, must be
// its Raft address (INVALID_REQUEST otherwise); dir, if not zero, the data
// directory it registered with as a broker. A node that is not a member, or
// registered with another directory, is ErrVoterNotCaughtUp; one without a
// live broker session or not caught up lately is ErrVoterLagging (see the
// top of this file). Its directory is recorded once it is a voter
// (voter_directory.go), before the answer when it can be: a client that
// describes the quorum after a success sees the voter with its directory, as
// Kafka's voter set holds it.
func (c *Controller) AddVoter(ctx context.Context, id int32, dir metadata.UUID, addr string) error {
	if !c.IsLeader() {
		return c.notController()
	}
	if !c.voterChange.TryLock() {
		return ErrVoterChangePending
	}
	defer c.voterChange.Unlock()
	s, ok, _, err := c.member(ctx, id)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%w: node %d is not a member of the quorum: start it as a broker-only node (--roles broker) first", ErrVoterNotCaughtUp, id)
	case s.Suffrage == raft.Voter:
		return fmt.Errorf("%w: node %d", ErrDuplicateVoter, id)
	case addr != "" && addr != string(s.Address):
		return fmt.Errorf("%w: node %d is at %s, not %s", metadata.ErrInvalidRequest, id, s.Address, addr)
	}
	img := c.Image()
	b := img.Broker(id)
	if !dir.IsZero() && (b == nil || b.DirectoryID != dir) {
		return fmt.Errorf("%w: node %d is not registered with data directory %v", ErrVoterNotCaughtUp, id, dir)
	}
	if b == nil {
		return fmt.Errorf("%w: node %d is not a registered broker", ErrVoterLagging, id)
	}
	now := c.cfg.clock()
	if why := c.sessions(now).voterLag(id, b.Epoch, int64(img.Offset()), now); why != "" {
		return fmt.Errorf("%w: node %d %s", ErrVoterLagging, id, why)
	}
	f := c.raft.AddVoter(s.ID, s.Address, 0, c.cfg.ApplyTimeout)
	if err := c.await(ctx, f.Error); err != nil {
		return err
	}
	if err := c.recordVoterDirectories(); err != nil {
		// The node is a voter: the supervisor's duty records it later.
		c.log.Warn("could not record a new controller voter's data directory yet", "node", id, "err", err)
		c.wakeSupervisor()
	}
	return nil
}

// RemoveVoter takes node id out of the voter set (see the top of this file).
// dir, if not zero, must be the voter's recorded data directory
// (voter_directory.go): KIP-853 names a voter by both. The last voter cannot
// be removed (ErrLastVoter). When id is this node, it steps down once the change commits:
// the answer is nil, and the next request goes to the new active controller.
func (c *Controller) RemoveVoter(ctx context.Context, id int32, dir metadata.UUID) error {
	if !c.IsLeader() {
		return c.notController()
	}
	if !c.voterChange.TryLock() {
		return ErrVoterChangePending
	}
	defer c.voterChange.Unlock()
	s, ok, voters, err := c.member(ctx, id)
	if err != nil {
		return err
	}
	if !ok || s.Suffrage != raft.Voter {
		return fmt.Errorf("%w: node %d", ErrVoterNotFound, id)
	}
	if rec := c.Image().VoterDirectory(id); !dir.IsZero() && !rec.IsZero() && rec != dir {
		return fmt.Errorf("%w: voter %d has data directory %v, not %v", ErrVoterNotFound, id, rec, dir)
	}
	if voters <= 1 {
		return fmt.Errorf("%w: node %d", ErrLastVoter, id)
	}
	if err := c.checkMajorityLeft(ctx, id); err != nil {
		return err
	}
	// No registration may come between the check below and the change: a
	// registered broker must stay a member (observers.go).
	if err := c.lockObservers(ctx); err != nil {
		return err
	}
	defer c.observers.Unlock()
	var f raft.IndexFuture
	if c.Image().Broker(id) != nil {
		f = c.raft.DemoteVoter(s.ID, 0, c.cfg.ApplyTimeout)
	} else {
		f = c.raft.RemoveServer(s.ID, 0, c.cfg.ApplyTimeout)
	}
	if err := c.awaitMembership(ctx, f); err != nil {
		return err
	}
	c.wakeSupervisor() // forget its directory (voter_directory.go)
	return nil
}

// RaftLeader is the leader of the quorum as a node knows it.
type RaftLeader struct {
	// ID is its node id, -1 when none is known.
	ID int32
	// Epoch is this node's Raft term, Kafka's leader epoch.
	Epoch int32
	// Addr is its Raft (controller listener) address; empty when unknown.
	Addr string
}

// RaftLeader returns the leader as this node knows it, for answers that name
// it (UpdateRaftVoter's CurrentLeader).
func (c *Controller) RaftLeader() RaftLeader {
	l := RaftLeader{ID: -1, Epoch: int32(c.raft.CurrentTerm())}
	if id, addr, ok := c.LeaderAddr(); ok {
		l.ID, l.Addr = id, addr
	}
	return l
}

// UpdateVoter moves voter id, whose data directory is dir, to addr: KIP-853's
// UpdateRaftVoter, which a voter sends the leader when its controller
// listener is no longer the one the voter set records (a restart with
// another --advertised-controller-addr). As Kafka 4.4's leader
// (UpdateVoterHandler): REQUEST_TIMED_OUT while another voter change is in
// flight (ErrVoterChangePending); INVALID_REQUEST when kraftVersionOK is
// false (the sender's supported kraft.version range leaves out the finalized
// level); VOTER_NOT_FOUND (ErrVoterNotFound) for a node that is not a voter,
// or whose recorded data directory is not dir (a voter whose directory is not
// recorded yet matches any, as Kafka's voter without a directory id). The
// voter's address changes in Raft's configuration, which the leader then
// replicates to it there; an unchanged address changes nothing. Kafka's leader
// answers once the change is appended, Strata's once it is committed.
func (c *Controller) UpdateVoter(ctx context.Context, id int32, dir metadata.UUID, addr string, kraftVersionOK bool) error {
	if !c.IsLeader() {
		return c.notController()
	}
	if !c.voterChange.TryLock() {
		return ErrVoterChangePending
	}
	defer c.voterChange.Unlock()
	// A leader new in its term first commits its barrier, so the voter set
	// it reads is committed (Kafka's leader wants its high watermark past the
	// voter set's offset).
	if err := c.run(ctx, func(*metadata.Image) ([]metadata.Record, error) { return nil, nil }); err != nil {
		return err
	}
	if !kraftVersionOK {
		return fmt.Errorf("%w: the supported kraft.version range leaves out the finalized level", metadata.ErrInvalidRequest)
	}
	s, ok, _, err := c.member(ctx, id)
	if err != nil {
		return err
	}
	if rec := c.Image().VoterDirectory(id); !ok || s.Suffrage != raft.Voter || !rec.IsZero() && rec != dir {
		return fmt.Errorf("%w: node %d with data directory %v", ErrVoterNotFound, id, dir)
	}
	if string(s.Address) == addr {
		return nil
	}
	f := c.raft.AddVoter(s.ID, raft.ServerAddress(addr), 0, c.cfg.ApplyTimeout)
	if err := c.await(ctx, f.Error); err != nil {
		return err
	}
	c.log.Info("a controller voter's address changed", "node", id, "from", s.Address, "to", addr)
	return nil
}

// UnregisterController answers Kafka's UnregisterController (`kafka-cluster
// unregister-controller`, `kafka-metadata-quorum remove-controller
// --unregister`). Kafka keeps a registration for every
// controller, also after it leaves the voter set, until this removes it.
// Strata keeps none apart from the quorum's membership: a voter's
// registration is its membership (and its recorded directory), which
// RemoveVoter ends. So a voter is refused (INVALID_REQUEST: remove it first),
// and any other id answers success with nothing to change. Kafka answers
// CONTROLLER_ID_NOT_REGISTERED for an id that never registered; Strata cannot
// tell such an id from a removed voter's and does so only for a negative one.
func (c *Controller) UnregisterController(ctx context.Context, id int32) error {
	if !c.IsLeader() {
		return c.notController()
	}
	if id < 0 {
		return &metadata.KafkaError{Code: kerr.ControllerIDNotRegistered.Code, Msg: fmt.Sprintf("no controller has id %d", id)}
	}
	s, ok, _, err := c.member(ctx, id)
	if err != nil {
		return err
	}
	if ok && s.Suffrage == raft.Voter {
		return fmt.Errorf("%w: node %d is a controller voter; remove it from the voters first (RemoveRaftVoter)", metadata.ErrInvalidRequest, id)
	}
	return nil
}

// checkMajorityLeft refuses the removal of voter id (ErrVotersUnreachable)
// unless a majority of the voters left answer a Raft request within
// probeTimeout. Raft switches to a configuration as soon as it is appended:
// a removal that a majority of the voters left cannot acknowledge would not
// commit, and the leader, no longer hearing from a majority of them, would
// step down with no voter able to win an election until enough came back.
// The request is a pre-vote, which a voter answers from its Raft loop
// without changing any state; a transport without pre-votes is not checked.
func (c *Controller) checkMajorityLeft(ctx context.Context, id int32) error {
	tr, ok := c.trans.(raft.WithPreVote)
	if !ok {
		return nil
	}
	servers, err := c.servers(ctx)
	if err != nil {
		return err
	}
	var left []raft.Server
	for _, s := range servers {
		if s.Suffrage == raft.Voter && s.ID != serverID(id) {
			left = append(left, s)
		}
	}
	self := serverID(c.cfg.NodeID)
	// At this leader's term and log end, so a follower grants it without a
	// word in its log (every entry of the term is the leader's).
	term := c.raft.CurrentTerm()
	req := &raft.RequestPreVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(self), Addr: c.trans.EncodePeer(self, c.trans.LocalAddr())},
		Term:      term, LastLogTerm: term, LastLogIndex: c.raft.LastIndex(),
	}
	answered := make(chan bool, len(left)) // the RPCs may outlive this call
	for _, s := range left {
		if s.ID == self {
			answered <- true
			continue
		}
		go func() { answered <- tr.RequestPreVote(s.ID, s.Address, req, &raft.RequestPreVoteResponse{}) == nil }()
	}
	need, got := len(left)/2+1, 0
	timeout := time.NewTimer(probeTimeout)
	defer timeout.Stop()
wait:
	for range left {
		select {
		case ok := <-answered:
			if ok {
				got++
			}
		case <-timeout.C:
			break wait
		case <-ctx.Done():
			return ctx.Err()
		}
		if got >= need {
			return nil
		}
	}
	return fmt.Errorf("%w: removing node %d leaves %d voters and only %d of them answered (%d needed); retry once more are reachable",
		ErrVotersUnreachable, id, len(left), got, need)
}

// await waits for a Raft future, or ctx.
func (c *Controller) await(ctx context.Context, wait func() error) error {
	select {
	case err := <-resolve(wait):
		return c.translate(err)
	case <-ctx.Done():
		return ctx.Err()
	}
}
