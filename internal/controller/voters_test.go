package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

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

			if err := old.RemoveVoter(ctxT(t), id); err != nil {
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

// TestRemoveActiveVoterWithoutAMajorityLeft: with two of four voters cut
// off, the voters left cannot commit the active controller's removal of
// itself. The operator gets a retriable error (NOT_CONTROLLER once the
// leader loses its quorum, or REQUEST_TIMED_OUT), in time, not success and
// not a hang; whether the change takes effect later is unknown, as for any
// request that timed out.
func TestRemoveActiveVoterWithoutAMajorityLeft(t *testing.T) {
	cl := newCluster(t, 4)
	l := cl.leader()
	var cut []int
	for i := range cl.nodes {
		if i != l && len(cut) < 2 {
			cut = append(cut, i)
		}
	}
	for _, i := range cut {
		cl.cutOff(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	err := cl.nodes[l].RemoveVoter(ctx, int32(l+1))
	if !errors.Is(err, ErrNotController) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RemoveVoter(%d) with nodes %d and %d cut off = %v, want NOT_CONTROLLER or a timeout", l+1, cut[0]+1, cut[1]+1, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("RemoveVoter answered after %v, past its 5s deadline", d)
	}
	t.Logf("answered %v after %v", err, time.Since(start).Round(time.Millisecond))
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
