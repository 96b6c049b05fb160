package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/hashicorp/raft"

	"github.com/strata-stream/strata/internal/metadata"
)

// A controller voter is the pair (node id, data directory id), as KIP-853's
// ReplicaKey: a node restarted under a voter's id on an empty data dir (a
// replaced disk) has lost the Raft log and the votes that voter gave, and
// must not vote, stand for election or count towards a commit as it.
//
//  1. The active controller records each voter's directory
//     (metadata.VoterDirectoryRecord) from the voter's live broker
//     registration, the first time it sees one that reports
//     metadata.FeatureVoterDirectory (a controller-only voter reports its
//     own, RegisterController), and forgets it once the node is no longer a
//     voter (recordVoterDirectories, a duty of the supervisor).
//  2. Every Raft RPC to a voter with a recorded directory goes to an address
//     that names the voter (Config.NameVoter; the controller listener's
//     stream layer opens the connection with that name, and a node whose own
//     node id or directory differs refuses the connection, package
//     controllerlink). To the sender such a voter is unreachable: its vote
//     and its acknowledgements never arrive.
//  3. A node refused so is not a member of the quorum under its own key. Once
//     the old incarnation is removed (RemoveVoter: a registered broker is
//     demoted to a non-voting member, and its directory forgotten), the
//     leader's RPCs to the node carry no name and reach it: it follows the
//     log as an observer, registers with its new directory, and AddVoter
//     makes it a voter again, recorded with that directory.
//
// Raft itself names members by node id only (its server ids stay the node
// ids of earlier builds, so their data dirs open unchanged): it cannot hold
// the old voter and the new observer of one node id at once, which is why the
// new incarnation follows the log only after the old one is removed.

// namingTransport is Raft's transport with step 2 applied.
type namingTransport struct {
	raft.Transport
	name  func(addr raft.ServerAddress, id int32, dir metadata.UUID) raft.ServerAddress
	image func() *metadata.Image
	boot  bootDirectories
}

// bootDirectories are the voter directories that the local Raft log records,
// read at start (scanVoterDirectories). Raft applies the log beyond its
// snapshot only once a leader has told it the commit index, so after a
// restart the image lacks what the log holds; a voter that campaigns then
// must still name the others.
type bootDirectories struct {
	dirs  map[int32]metadata.UUID // the last record of each node in the log; zero: forgotten
	index uint64                  // the log's last index when read
}

// target is the address to send an RPC for member id to: named if id has a
// recorded directory, in the image or, while the image has not applied the
// log read at start, in that log.
func (t *namingTransport) target(id raft.ServerID, addr raft.ServerAddress) raft.ServerAddress {
	n, ok := nodeID(id)
	if !ok {
		return addr
	}
	img := t.image()
	dir := img.VoterDirectory(n)
	if d, ok := t.boot.dirs[n]; ok && img.Offset() < t.boot.index {
		dir = d
	}
	if !dir.IsZero() {
		return t.name(addr, n, dir)
	}
	return addr
}

// scanVoterDirectories reads the voter directory records in the local Raft
// log, oldest first. Applied over the snapshot the image restores, the last
// record of each node gives its directory at the log's end: every change after
// the snapshot is in the log.
func scanVoterDirectories(logs raft.LogStore) (bootDirectories, error) {
	first, err := logs.FirstIndex()
	if err != nil {
		return bootDirectories{}, err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return bootDirectories{}, err
	}
	boot := bootDirectories{dirs: map[int32]metadata.UUID{}, index: last}
	for i := max(first, 1); i <= last && first > 0; i++ {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			return bootDirectories{}, fmt.Errorf("controller: reading raft log entry %d: %w", i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		recs, err := metadata.DecodeBatch(l.Data)
		if err != nil {
			continue // the state machine refuses it too
		}
		for _, r := range recs {
			if r, ok := r.(*metadata.VoterDirectoryRecord); ok {
				boot.dirs[r.NodeID] = r.DirectoryID
			}
		}
	}
	return boot, nil
}

func (t *namingTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	return t.Transport.AppendEntriesPipeline(id, t.target(id, target))
}

func (t *namingTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.Transport.AppendEntries(id, t.target(id, target), args, resp)
}

func (t *namingTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.Transport.RequestVote(id, t.target(id, target), args, resp)
}

func (t *namingTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.Transport.InstallSnapshot(id, t.target(id, target), args, resp, data)
}

func (t *namingTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.Transport.TimeoutNow(id, t.target(id, target), args, resp)
}

func (t *namingTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.Transport.(raft.WithPreVote).RequestPreVote(id, t.target(id, target), args, resp)
}

// Close closes the wrapped transport if it can be closed, as Raft's shutdown
// would have.
func (t *namingTransport) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// namingTransportFor wraps tr when the configuration names voters.
func (c *Controller) namingTransportFor(tr raft.Transport) (raft.Transport, error) {
	if c.cfg.NameVoter == nil {
		return tr, nil
	}
	if _, ok := tr.(raft.WithPreVote); !ok {
		// Raft asks the transport for pre-vote; the wrapper must not claim
		// one the wrapped transport lacks.
		return nil, errors.New("controller: naming voters needs a transport with pre-vote")
	}
	boot, err := scanVoterDirectories(c.store)
	if err != nil {
		return nil, err
	}
	return &namingTransport{Transport: tr, name: c.cfg.NameVoter, image: c.fsm.image, boot: boot}, nil
}

// nodeID is the node id a Raft server id names.
func nodeID(id raft.ServerID) (int32, bool) {
	n, err := strconv.ParseInt(string(id), 10, 32)
	return int32(n), err == nil
}

// PlanVoterDirectories is step 1 as records: for each of voters (ascending)
// without a recorded directory whose registration is live (unfenced), has a
// directory and reports metadata.FeatureVoterDirectory, that directory; for
// each node with a recorded directory that is not among voters, a record
// that forgets it. Nothing when all is recorded.
func PlanVoterDirectories(img *metadata.Image, voters []int32) []metadata.Record {
	var recs []metadata.Record
	for _, id := range voters {
		if !img.VoterDirectory(id).IsZero() {
			continue
		}
		b := img.Broker(id)
		if b == nil || b.Fenced || b.DirectoryID.IsZero() || b.Features[metadata.FeatureVoterDirectory] < 1 {
			continue
		}
		recs = append(recs, &metadata.VoterDirectoryRecord{NodeID: id, DirectoryID: b.DirectoryID})
	}
	for _, id := range img.VoterDirectoryNodes() {
		if !slices.Contains(voters, id) {
			recs = append(recs, &metadata.VoterDirectoryRecord{NodeID: id})
		}
	}
	return recs
}

// recordVoterDirectories proposes PlanVoterDirectories for the latest voter
// set when it has records to write, so that the check costs no proposal
// otherwise.
func (c *Controller) recordVoterDirectories() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ApplyTimeout)
	defer cancel()
	servers, err := c.servers(ctx)
	if err != nil {
		return err
	}
	var voters []int32
	for _, s := range servers {
		if id, ok := nodeID(s.ID); ok && s.Suffrage == raft.Voter {
			voters = append(voters, id)
		}
	}
	slices.Sort(voters)
	if len(PlanVoterDirectories(c.Image(), voters)) == 0 {
		return nil
	}
	var recs []metadata.Record
	err = c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		recs = PlanVoterDirectories(img, voters)
		return recs, nil
	})
	if err != nil {
		return err
	}
	for _, r := range recs {
		r := r.(*metadata.VoterDirectoryRecord)
		if r.DirectoryID.IsZero() {
			c.log.Info("forgot the data directory of a node that is no longer a controller voter", "node", r.NodeID)
		} else {
			c.log.Info("recorded the data directory of a controller voter: only a node with this directory acts as the voter",
				"node", r.NodeID, "directory_id", r.DirectoryID)
		}
	}
	return nil
}

// RegisterController records the data directory of controller voter id as a
// controller-only voter reports it (ControllerRegistration on the controller
// link): such a voter registers no broker, from which step 1 takes the others'.
// Nothing is recorded for a node that does not report
// metadata.FeatureVoterDirectory or is not a voter; a directory other than the
// one recorded is ErrInvalidVoterKey (the node is not that voter).
func (c *Controller) RegisterController(ctx context.Context, id int32, dir metadata.UUID, features map[string]int32) error {
	if !c.IsLeader() {
		return c.notController()
	}
	if dir.IsZero() || features[metadata.FeatureVoterDirectory] < 1 {
		return nil
	}
	s, ok, _, err := c.member(ctx, id)
	if err != nil || !ok || s.Suffrage != raft.Voter {
		return err
	}
	recorded := false
	err = c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		switch rec := img.VoterDirectory(id); {
		case rec == dir:
			return nil, nil
		case !rec.IsZero():
			return nil, fmt.Errorf("%w: voter %d has data directory %v, not %v", ErrInvalidVoterKey, id, rec, dir)
		}
		recorded = true
		return []metadata.Record{&metadata.VoterDirectoryRecord{NodeID: id, DirectoryID: dir}}, nil
	})
	if err == nil && recorded {
		c.log.Info("recorded the data directory of a controller voter: only a node with this directory acts as the voter",
			"node", id, "directory_id", dir)
	}
	return err
}
