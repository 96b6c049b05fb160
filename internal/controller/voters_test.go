package controller

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/wait"
)

// TestRemoveActiveVoterWhileAVoterIsCutOff is chaos seed 963's finding made
// certain: four voters, the active controller removes itself while another
// voter is cut off. Raft's LeadershipTransfer, which the removal used to
// start with, picks the voter furthest replicated, the first in the
// configuration on a tie: the cut-off one here, so the removal failed with
// "leadership transfer timeout". Now the leader commits the configuration
// without itself (two of the three voters left suffice) and steps down. A
// registered broker stays a non-voting member that still receives the log
// (its Raft did not shut down), and once the cut heals the cut-off voter
// follows the new leader.
func TestRemoveActiveVoterWhileAVoterIsCutOff(t *testing.T) {
	for _, tt := range []struct {
		name   string
		broker bool // the removed leader is a registered broker: demoted, not removed
	}{
		{name: "a registered broker is demoted", broker: true},
		{name: "a controller-only voter leaves the quorum"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster(t, 4)
			l := cl.leader()
			old := cl.nodes[l]
			id := int32(l + 1)
			if tt.broker {
				if _, err := old.RegisterBroker(ctxT(t), RegisterBroker{ID: id, Incarnation: metadata.UUID{1}, Host: "127.0.0.1", Port: 9092}); err != nil {
					t.Fatalf("RegisterBroker: %v", err)
				}
			}
			// Wait until every voter has the leader's whole log, so their
			// replication states tie and LeadershipTransfer would pick the
			// first voter other than the leader.
			last := old.raft.LastIndex()
			wait.For(t, "every voter caught up", func() bool {
				for _, c := range cl.nodes {
					if c.raft.AppliedIndex() < last {
						return false
					}
				}
				return true
			})
			cut := 0
			if l == 0 {
				cut = 1
			}
			cl.cutOff(cut)

			if err := old.RemoveVoter(ctxT(t), id, metadata.UUID{}); err != nil {
				t.Fatalf("RemoveVoter(%d) on the active controller with node %d cut off: %v", id, cut+1, err)
			}
			var next int
			wait.For(t, "a new active controller among the connected voters", func() bool {
				for i, c := range cl.nodes {
					if i != l && i != cut && c.IsLeader() {
						next = i
						return true
					}
				}
				return false
			})
			servers, err := cl.nodes[next].servers(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			var voters, nonvoters []int32
			for _, s := range servers {
				n := int32(slices.Index(cl.addrs, s.Address) + 1)
				if s.Suffrage == raft.Voter {
					voters = append(voters, n)
				} else {
					nonvoters = append(nonvoters, n)
				}
			}
			slices.Sort(voters)
			want := slices.DeleteFunc([]int32{1, 2, 3, 4}, func(n int32) bool { return n == id })
			if !slices.Equal(voters, want) {
				t.Errorf("voters %v, want %v", voters, want)
			}
			if tt.broker != slices.Equal(nonvoters, []int32{id}) || !tt.broker && len(nonvoters) > 0 {
				t.Errorf("non-voting members %v (the removed leader %d a broker: %v)", nonvoters, id, tt.broker)
			}

			// The metadata log moves on, and a demoted broker still gets it.
			if _, err := cl.nodes[next].RegisterBroker(ctxT(t), RegisterBroker{ID: 9, Incarnation: metadata.UUID{9}, Host: "127.0.0.1", Port: 9099}); err != nil {
				t.Fatalf("RegisterBroker on the new active controller: %v", err)
			}
			if tt.broker {
				wait.For(t, "the demoted node applying the new registration", func() bool { return old.Image().Broker(9) != nil })
			}
			cl.connectAll()
			wait.For(t, "the cut-off voter following the new leader", func() bool { return cl.nodes[cut].Image().Broker(9) != nil })
		})
	}
}

// TestRemoveVoterWithoutAMajorityLeft: three voters, one cut off. Removing
// either of the other two would leave two voters, one of them unreachable:
// Raft would switch to that configuration at once, the change could not
// commit, and the leader, hearing from too few of the new voters, would step
// down with nobody able to win an election until the cut healed (seen by
// hand with kafka-metadata-quorum remove-controller while a voter was
// SIGSTOPped). The removal is refused up front with REQUEST_TIMED_OUT, the
// leader keeps leading and the voters are unchanged; once the cut heals the
// same removal goes through.
func TestRemoveVoterWithoutAMajorityLeft(t *testing.T) {
	for _, removeLeader := range []bool{true, false} {
		name := "the active controller"
		if !removeLeader {
			name = "a follower"
		}
		t.Run(name, func(t *testing.T) {
			cl := newCluster(t, 3)
			l := cl.leader()
			cut, other := (l+1)%3, (l+2)%3
			cl.cutOff(cut)
			remove := int32(other + 1)
			if removeLeader {
				remove = int32(l + 1)
			}
			err := cl.nodes[l].RemoveVoter(ctxT(t), remove, metadata.UUID{})
			if !errors.Is(err, ErrVotersUnreachable) || metadata.ErrorCode(err) != kerr.RequestTimedOut.Code {
				t.Fatalf("RemoveVoter(%d) with node %d cut off = %v, want REQUEST_TIMED_OUT (too few voters reachable)", remove, cut+1, err)
			}
			if !cl.nodes[l].IsLeader() {
				t.Fatal("the active controller lost its role over a refused removal")
			}
			servers, err := cl.nodes[l].servers(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range servers {
				if s.Suffrage != raft.Voter {
					t.Fatalf("configuration %v after a refused removal", servers)
				}
			}
			cl.connectAll()
			cl.retry(func(c *Controller) error {
				err := c.RemoveVoter(ctxT(t), remove, metadata.UUID{})
				if errors.Is(err, ErrVotersUnreachable) {
					return fmt.Errorf("%w: %v", ErrNotController, err) // the healed voter not answering yet: again
				}
				return err
			})
		})
	}
}

// TestRemoveLastVoter: the only voter cannot be removed; Kafka's voter set
// finds no set to make without it, and its quorum answers VOTER_NOT_FOUND (it
// was INVALID_REQUEST). The voter stays and keeps leading.
func TestRemoveLastVoter(t *testing.T) {
	cl := newCluster(t, 1)
	err := cl.call(func(c *Controller) error { return c.RemoveVoter(ctxT(t), 1, metadata.UUID{}) })
	if metadata.ErrorCode(err) != kerr.VoterNotFound.Code {
		t.Fatalf("RemoveVoter(1) of the only voter = %v, want VOTER_NOT_FOUND", err)
	}
	if s, ok, voters, err := cl.nodes[0].member(ctxT(t), 1); err != nil || !ok || s.Suffrage != raft.Voter || voters != 1 || !cl.nodes[0].IsLeader() {
		t.Fatalf("after a refused removal node 1 is %+v (member %v, %d voters, leader %v, %v), want the leading voter", s, ok, voters, cl.nodes[0].IsLeader(), err)
	}
}

// TestVoterChangeWhileAnotherIsInFlight: while a voter change is in flight
// the active controller refuses another, addition or removal, with
// REQUEST_TIMED_OUT, as Kafka's leader does ("waiting for leader to handle
// previous voter change request"), instead of queueing it behind the first
// for Raft to make once that commits; the voters are unchanged. Once the
// first is done the same removal goes through.
func TestVoterChangeWhileAnotherIsInFlight(t *testing.T) {
	cl := newCluster(t, 3)
	l := cl.nodes[cl.leader()]
	other := int32(1)
	if l.cfg.NodeID == other {
		other = 2
	}
	l.voterChange.Lock() // the change in flight
	for name, change := range map[string]func() error{
		"AddVoter":    func() error { return l.AddVoter(ctxT(t), 4, metadata.UUID{4}, "") },
		"RemoveVoter": func() error { return l.RemoveVoter(ctxT(t), other, metadata.UUID{}) },
	} {
		err := change()
		if !errors.Is(err, ErrVoterChangePending) || metadata.ErrorCode(err) != kerr.RequestTimedOut.Code {
			t.Errorf("%s during another voter change = %v, want REQUEST_TIMED_OUT (previous voter change)", name, err)
		}
	}
	if _, _, voters, err := l.member(ctxT(t), other); err != nil || voters != 3 {
		t.Fatalf("%d voters (%v) after refused changes, want 3", voters, err)
	}
	l.voterChange.Unlock()
	cl.retry(func(c *Controller) error { return c.RemoveVoter(ctxT(t), other, metadata.UUID{}) })
}

// cutOff disconnects node i's transport from every other node's, both ways,
// leaving it running.
func (cl *cluster) cutOff(i int) {
	cl.trans[i].DisconnectAll()
	for j, tr := range cl.trans {
		if j != i && tr != nil {
			tr.Disconnect(cl.addrs[i])
		}
	}
}

// TestUnregisterController: a voter is refused (its registration is its
// membership), a removed one answers success (remove-controller --unregister
// sends this right after the removal), and a negative id is not registered.
func TestUnregisterController(t *testing.T) {
	cl := newCluster(t, 3)
	l := cl.leader()
	other := int32((l+1)%3 + 1)
	unregister := func(id int32) error {
		return cl.call(func(c *Controller) error { return c.UnregisterController(ctxT(t), id) })
	}
	if err := unregister(other); metadata.ErrorCode(err) != kerr.InvalidRequest.Code {
		t.Fatalf("UnregisterController(%d) of a voter = %v, want INVALID_REQUEST", other, err)
	}
	cl.retry(func(c *Controller) error { return c.RemoveVoter(ctxT(t), other, metadata.UUID{}) })
	if err := unregister(other); err != nil {
		t.Fatalf("UnregisterController(%d) after its removal: %v", other, err)
	}
	if err := unregister(-1); metadata.ErrorCode(err) != kerr.ControllerIDNotRegistered.Code {
		t.Fatalf("UnregisterController(-1) = %v, want CONTROLLER_ID_NOT_REGISTERED", err)
	}
	// The removed node can no longer lead: it answers as any follower does.
	if err := cl.nodes[other-1].UnregisterController(ctxT(t), other); !errors.Is(err, ErrNotController) {
		t.Fatalf("UnregisterController on a node that does not lead = %v, want NOT_CONTROLLER", err)
	}
}

// TestAddVoterWantsALiveCaughtUpObserver: a broker-only node, a non-voting
// member of the quorum, is refused as a voter with REQUEST_TIMED_OUT ("lagging
// behind") and stays a non-voting member while the active controller has no
// heartbeat of it in its term, while its heartbeats report it behind, and
// once its session has run out (stopped); after a heartbeat that reports it
// caught up it is accepted. Until session 20 any non-voting member was taken,
// a stopped one too, growing the majority with a member that cannot vote.
func TestAddVoterWantsALiveCaughtUpObserver(t *testing.T) {
	clock := newFakeClock()
	cl := sessionCluster(t, clock, nil)
	obs, addr := cl.startObserver(4)
	cl.registerObserver(obs, addr)

	heartbeat := func(c *Controller, offset func(*metadata.Image) int64) error {
		img := c.Image()
		_, err := c.BrokerHeartbeat(ctxT(t), HeartbeatRequest{BrokerID: 4, BrokerEpoch: img.Broker(4).Epoch, MetadataOffset: offset(img)})
		return err
	}
	behind := func(*metadata.Image) int64 { return 0 }
	caughtUp := func(img *metadata.Image) int64 { return int64(img.Offset()) }
	for _, step := range []struct {
		name   string
		before func(c *Controller) error
		want   string // in the refusal's message, unless the term changed
	}{
		{name: "registered, no heartbeat yet", before: func(*Controller) error { return nil }, want: "has not reported its progress"},
		{name: "heartbeating behind", before: func(c *Controller) error { return heartbeat(c, behind) }, want: "has not caught up"},
		{name: "stopped after catching up", before: func(c *Controller) error {
			if err := heartbeat(c, caughtUp); err != nil {
				return err
			}
			clock.Advance(testSessionTimeout + time.Millisecond)
			return nil
		}, want: "no live broker session"},
	} {
		var term uint64
		err := cl.call(func(c *Controller) error {
			term = c.raft.CurrentTerm()
			if err := step.before(c); err != nil {
				return err
			}
			return c.AddVoter(ctxT(t), 4, metadata.UUID{}, string(addr))
		})
		if !errors.Is(err, ErrVoterLagging) || metadata.ErrorCode(err) != kerr.RequestTimedOut.Code {
			t.Fatalf("%s: AddVoter(4) = %v, want REQUEST_TIMED_OUT (lagging behind)", step.name, err)
		}
		l := cl.nodes[cl.leader()]
		if l.raft.CurrentTerm() == term && !strings.Contains(err.Error(), step.want) {
			t.Errorf("%s: AddVoter(4) = %v, want a message with %q", step.name, err, step.want)
		}
		if s, ok, _, err := l.member(ctxT(t), 4); err != nil || !ok || s.Suffrage != raft.Nonvoter {
			t.Fatalf("%s: node 4 is %+v (member %v, %v), want a non-voting member", step.name, s, ok, err)
		}
	}

	cl.retry(func(c *Controller) error {
		if err := heartbeat(c, caughtUp); err != nil {
			return err
		}
		return c.AddVoter(ctxT(t), 4, metadata.UUID{}, string(addr))
	})
	s, ok, voters, err := cl.nodes[cl.leader()].member(ctxT(t), 4)
	if err != nil || !ok || s.Suffrage != raft.Voter || voters != 4 {
		t.Fatalf("after a caught-up heartbeat node 4 is %+v (member %v, %d voters, %v), want a voter of 4", s, ok, voters, err)
	}
}

// TestAddVoterRecordsItsDirectory: once AddVoter answers, the new voter's
// data directory is recorded and the quorum shows it, as Kafka's voter set
// holds it; before, the supervisor recorded it a moment later, and a
// DescribeQuorum in between showed the voter with a zero directory id (a
// client building its next AddRaftVoter from that answer sent an invalid one).
func TestAddVoterRecordsItsDirectory(t *testing.T) {
	clock := newFakeClock()
	cl := sessionCluster(t, clock, nil)
	obs, addr := cl.startObserver(4)
	dir := metadata.UUID{4, 2}
	cl.retry(func(c *Controller) error {
		_, err := c.RegisterBroker(ctxT(t), RegisterBroker{ID: 4, Host: "127.0.0.1", Port: 9094, ObserverAddr: string(addr),
			DirectoryID: dir, Features: map[string]int32{metadata.FeatureVoterDirectory: 1}})
		return err
	})
	if err := obs.WaitReady(ctxT(t)); err != nil {
		t.Fatalf("observer WaitReady: %v", err)
	}
	var leader *Controller
	cl.retry(func(c *Controller) error {
		img := c.Image()
		if _, err := c.BrokerHeartbeat(ctxT(t), HeartbeatRequest{BrokerID: 4, BrokerEpoch: img.Broker(4).Epoch, MetadataOffset: int64(img.Offset())}); err != nil {
			return err
		}
		leader = c
		return c.AddVoter(ctxT(t), 4, dir, string(addr))
	})
	if got := leader.Image().VoterDirectory(4); got != dir {
		t.Fatalf("after AddVoter(4) the recorded directory is %v, want %v", got, dir)
	}
	st, err := leader.Quorum(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(st.Voters, func(m QuorumMember) bool { return m.ID == 4 })
	if i < 0 || st.Voters[i].DirectoryID != dir {
		t.Fatalf("quorum voters %+v, want node 4 with directory %v", st.Voters, dir)
	}
}

// TestUpdateVoter: UpdateVoter (KIP-853's UpdateRaftVoter) moves a voter to
// another address, where the active controller then replicates to it (its old
// address cut off). It is refused as Kafka 4.4's leader refuses it
// (UpdateVoterHandler): REQUEST_TIMED_OUT while another voter change is in
// flight, INVALID_REQUEST when the sender's kraft.version range leaves out the
// finalized level, VOTER_NOT_FOUND for a node that is not a voter or a data
// directory other than the one recorded for the voter. Before, a voter
// restarted at another address stayed at its old one in the configuration.
func TestUpdateVoter(t *testing.T) {
	cl := newCluster(t, 3, func(cfg *Config) { cfg.Transport = unpipelined{cfg.Transport.(*raft.InmemTransport)} })
	li := cl.leader()
	l := cl.nodes[li]
	vi := (li + 1) % 3
	v, dir := cl.nodes[vi].cfg.NodeID, metadata.UUID{9}
	if err := l.RegisterController(ctxT(t), v, dir, map[string]int32{metadata.FeatureVoterDirectory: 1}); err != nil {
		t.Fatal(err)
	}
	const moved = raft.ServerAddress("moved")
	for _, tc := range []struct {
		name    string
		id      int32
		dir     metadata.UUID
		kraftOK bool
		pending bool
		want    int16
	}{
		{"another voter change in flight", v, dir, true, true, kerr.RequestTimedOut.Code},
		{"kraft.version out of range", v, dir, false, false, kerr.InvalidRequest.Code},
		{"not a voter", 4, dir, true, false, kerr.VoterNotFound.Code},
		{"another data directory", v, metadata.UUID{8}, true, false, kerr.VoterNotFound.Code},
	} {
		if tc.pending {
			l.voterChange.Lock()
		}
		err := l.UpdateVoter(ctxT(t), tc.id, tc.dir, string(moved), tc.kraftOK)
		if tc.pending {
			l.voterChange.Unlock()
		}
		if metadata.ErrorCode(err) != tc.want {
			t.Errorf("%s: UpdateVoter = %v, want %v", tc.name, err, kerr.ErrorForCode(tc.want))
		}
	}
	if addrs, err := l.VoterAddrs(ctxT(t)); err != nil || addrs[vi].Addr != string(cl.addrs[vi]) {
		t.Fatalf("voters after refused updates: %+v (%v), want node %d still at %s", addrs, err, v, cl.addrs[vi])
	}

	// The voter now answers at moved only, as a voter restarted at another
	// address does: its old address is cut off once it holds the whole log,
	// and a change is committed without it, so that no answer from the old
	// address is in flight when the update lands. hashicorp/raft reads a
	// follower's address without its lock when an answer with entries
	// arrives or a pipelined send fails, and the update writes it under the
	// lock; so the cluster replicates unpipelined (unpipelined), whose failed
	// sends read the address under the lock.
	wait.For(t, "the voter to hold the leader's whole log", func() bool {
		return cl.nodes[vi].raft.LastIndex() == l.raft.LastIndex()
	})
	for j, tr := range cl.trans {
		if j != vi {
			tr.Disconnect(cl.addrs[vi])
			tr.Connect(moved, cl.trans[vi])
		}
	}
	if err := cl.register(8, 1); err != nil {
		t.Fatal(err)
	}
	if err := l.UpdateVoter(ctxT(t), v, dir, string(moved), true); err != nil {
		t.Fatalf("UpdateVoter(%d to %s): %v", v, moved, err)
	}
	if addrs, err := l.VoterAddrs(ctxT(t)); err != nil || addrs[vi].Addr != string(moved) {
		t.Fatalf("voters after the update: %+v (%v), want node %d at %s", addrs, err, v, moved)
	}
	if err := cl.register(7, 1); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the moved voter to apply a change made after the move", func() bool {
		return cl.nodes[vi].Image().Broker(7) != nil
	})
}

// unpipelined is an in-memory transport that refuses AppendEntries
// pipelines, so that a leader replicates with one request at a time.
type unpipelined struct{ *raft.InmemTransport }

func (unpipelined) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}
