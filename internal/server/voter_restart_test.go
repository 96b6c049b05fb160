package server

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/admin"
	"github.com/strata-stream/strata/internal/wait"
)

// TestPromotedBrokerOnlyRestartsAsActiveController: a broker-only node
// promoted to a controller voter may be elected the active controller while
// it restarts, before it has registered as a broker. Its registration then
// goes through its own controller link. The old start-up served the link
// only once the broker had registered, so the node waited for itself for
// ever (never ready, its HTTP listener never bound) and the other brokers,
// their heartbeats unanswered, were fenced: CI's TestTxnFaults saw this
// when a rolling restart reached the promoted node while it led the quorum.
// Here it is made certain: the promoted node is the only voter left.
func TestPromotedBrokerOnlyRestartsAsActiveController(t *testing.T) {
	c := startCluster(t, 1)
	if _, err := c.addNode(2, brokerOnly); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl, adm := c.client()
	add, err := admin.AddVoterRequest(ctx, cl, 2, c.raftAddrOf(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := addVoterWhenCaughtUp(ctx, cl, 1, add); err != nil {
		t.Fatalf("AddRaftVoter(2): %v", err)
	}
	// Node 1 leads, removes itself and steps down; node 2 takes over.
	remove := removeVoterRequest(ctx, t, cl, 1)
	if err := voterChange(ctx, cl, 1, remove); err != nil {
		t.Fatalf("RemoveRaftVoter(1): %v", err)
	}
	wait.For(t, "node 2 the only voter and the active controller", func() bool {
		resp, err := describeQuorum(ctx, cl, 2, "__cluster_metadata", 0)
		if err != nil || len(resp.Topics) != 1 {
			return false
		}
		p := resp.Topics[0].Partitions[0]
		return p.ErrorCode == 0 && p.LeaderID == 2 && slices.Equal(ids(p.CurrentVoters), []int32{2})
	})

	c.stop(1)
	start := time.Now()
	if err := c.start(1); err != nil {
		t.Fatalf("restarting the promoted node, the only voter: %v", err)
	}
	t.Logf("node 2 started again in %v", time.Since(start).Round(time.Millisecond))
	if id := c.nodes[1].ctrl.LeaderID(); id != 2 {
		t.Fatalf("active controller %d after the restart, want 2", id)
	}
	wait.For(t, "both brokers registered and unfenced", func() bool {
		md, err := adm.BrokerMetadata(ctx)
		return err == nil && len(md.Brokers) == 2
	})
}
