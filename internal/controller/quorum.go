package controller

import (
	"context"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-stream/strata/internal/metadata"
)

// The metadata quorum as DescribeQuorum (KIP-595, KIP-853) reports it. The
// metadata log's offsets are Raft log indexes: an image at offset N has
// applied every entry up to index N, so N is also the next offset in Kafka's
// zero-based numbering.

// observerSessionTimeout is how long the active controller lists a non-voting
// member it has not heard from: Kafka 4.4's leader forgets an observer whose
// last fetch is that old (LeaderState's OBSERVER_SESSION_TIMEOUT_MS, five
// minutes) and knows none that has not fetched from it in its epoch. Strata's
// observers talk to the active controller in their broker registration and
// heartbeats instead of fetches: either counts.
const observerSessionTimeout = 5 * time.Minute

// QuorumMember is one member of the Raft configuration.
type QuorumMember struct {
	ID int32
	// Addr is its Raft (controller listener) address.
	Addr string
	// Voter: a controller voter; otherwise a broker-only observer.
	Voter bool
	// DirectoryID is a voter's recorded data directory (voter_directory.go),
	// an observer's that of its broker registration; zero when unknown.
	DirectoryID metadata.UUID
	// LogEndOffset is how far the member's metadata log is known to reach:
	// the leader's own last index, or the offset a broker reported applying
	// (AppliedOffset) in its last heartbeat to this controller; -1 when unknown (a
	// controller-only voter sends no heartbeats).
	LogEndOffset int64
	// LastFetch is when LogEndOffset was learnt; LastCaughtUp the last time
	// the member was as far as the controller (liveness.heartbeat: Kafka's
	// rule for a fetching replica). Zero when unknown.
	LastFetch, LastCaughtUp time.Time
}

// QuorumState is the active controller's view of the quorum.
type QuorumState struct {
	LeaderID int32
	// LeaderEpoch is the Raft term.
	LeaderEpoch int32
	// HighWatermark is the commit index.
	HighWatermark int64
	// Voters and Observers are in ascending id order. Observers are the
	// non-voting members this controller has heard from (a registration or a
	// heartbeat) in its term within observerSessionTimeout; the others are left out, as Kafka's leader
	// forgets them, though they stay in the Raft configuration and keep
	// receiving the metadata log.
	Voters, Observers []QuorumMember
}

// Quorum describes the quorum. Only the active controller knows the
// members' progress: elsewhere it fails with ErrNotController. A controller new
// in its term first waits for its term's barrier (as a plan does), so the high
// watermark it reports is at least every offset an earlier leader committed: a
// broker may wait for it (WaitCommitted) to see every change acknowledged before.
func (c *Controller) Quorum(ctx context.Context) (QuorumState, error) {
	if !c.IsLeader() {
		return QuorumState{}, c.notController()
	}
	if err := c.run(ctx, func(*metadata.Image) ([]metadata.Record, error) { return nil, nil }); err != nil {
		return QuorumState{}, err
	}
	servers, err := c.servers(ctx)
	if err != nil {
		return QuorumState{}, err
	}
	now := c.cfg.clock()
	live := c.sessions(now)
	st := QuorumState{
		LeaderID:      c.cfg.NodeID,
		LeaderEpoch:   int32(c.raft.CurrentTerm()),
		HighWatermark: int64(c.raft.CommitIndex()),
	}
	img := c.Image()
	for _, s := range servers {
		id, ok := nodeID(s.ID)
		if !ok {
			continue
		}
		m := QuorumMember{ID: id, Addr: string(s.Address), Voter: s.Suffrage == raft.Voter, LogEndOffset: -1}
		if m.Voter {
			m.DirectoryID = img.VoterDirectory(id)
		} else if b := img.Broker(id); b != nil {
			m.DirectoryID = b.DirectoryID
		}
		if m.ID == c.cfg.NodeID {
			m.LogEndOffset = int64(c.raft.LastIndex())
			m.LastFetch, m.LastCaughtUp = now, now
		} else if off, at, caughtUp, ok := live.progress(m.ID); ok {
			m.LogEndOffset, m.LastFetch, m.LastCaughtUp = off, at, caughtUp
		}
		if heard := live.lastHeard(m.ID); !m.Voter && (heard.IsZero() || now.Sub(heard) >= observerSessionTimeout) {
			continue // not heard from lately: forgotten, as Kafka's leader forgets it
		}
		if m.Voter {
			st.Voters = append(st.Voters, m)
		} else {
			st.Observers = append(st.Observers, m)
		}
	}
	byID := func(a, b QuorumMember) int { return int(a.ID) - int(b.ID) }
	slices.SortFunc(st.Voters, byID)
	slices.SortFunc(st.Observers, byID)
	return st, nil
}

// VoterAddrs returns the voters of the latest Raft configuration this node
// knows, in ascending id order, with only ID, Addr and Voter set: what any
// node, leading or not, can tell a client about the controllers.
func (c *Controller) VoterAddrs(ctx context.Context) ([]QuorumMember, error) {
	servers, err := c.servers(ctx)
	if err != nil {
		return nil, err
	}
	var voters []QuorumMember
	for _, s := range servers {
		if id, ok := nodeID(s.ID); ok && s.Suffrage == raft.Voter {
			voters = append(voters, QuorumMember{ID: id, Addr: string(s.Address), Voter: true})
		}
	}
	slices.SortFunc(voters, func(a, b QuorumMember) int { return int(a.ID) - int(b.ID) })
	return voters, nil
}
