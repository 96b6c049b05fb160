package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/admin"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// TestWipedVoterIsNotTheOldVoter: voter 3 of a three-voter cluster comes back
// under its node id on an empty data dir while voter 2's log lacks a change
// that voters 1 and 3 committed. The wiped node refuses the quorum's Raft
// connections for voter 3 (its data directory is not the one recorded), so
// with node 1 down node 2 cannot be elected with its vote (on the old code
// it was, and the committed topic was gone), and with node 2 down node 1
// cannot commit with its acknowledgement; it says why in its log and what
// to run. Once nodes 1 and 2 are back, RemoveRaftVoter(3) takes the old
// incarnation out: the node follows the metadata log as an observer, and
// AddRaftVoter(3) makes it a voter again, recorded with its new directory,
// the metadata intact.
func TestWipedVoterIsNotTheOldVoter(t *testing.T) {
	c := startCluster(t, 3)
	ctx := context.Background()
	dirs := map[int32]metadata.UUID{}
	for i, n := range c.nodes {
		dirs[int32(i+1)] = n.directoryID
	}
	// The active controller records every voter's directory, and every node
	// applies it.
	wait.For(t, "every node to have every voter's directory", func() bool {
		for _, n := range c.nodes {
			for id, dir := range dirs {
				if n.ctrl.Image().VoterDirectory(id) != dir {
					return false
				}
			}
		}
		return true
	})

	// Node 2 stops; nodes 1 and 3 commit topic "acked" without it.
	c.stop(1)
	_, adm := c.client()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "acked"); err != nil {
		t.Fatal(err)
	}
	c.stop(0)
	c.stop(2)
	if err := os.RemoveAll(c.cfgs[2].DataDir); err != nil {
		t.Fatal(err)
	}

	// Node 2, whose log lacks "acked", and the wiped node 3 start alone.
	logs3 := &wait.Buffer{}
	logger3 := slog.New(slog.NewTextHandler(logs3, nil)).With("node", 3)
	alone, cancel := context.WithTimeout(ctx, 8*time.Second)
	started := make(chan *Node, 2)
	for i, logger := range map[int]*slog.Logger{1: testLogger(), 2: logger3} {
		go func() {
			n, err := Start(alone, c.cfgs[i], logger, vfs.Default)
			if err == nil {
				started <- n
				return
			}
			started <- nil
		}()
	}
	var formed []*Node
	for range 2 {
		if n := <-started; n != nil {
			formed = append(formed, n)
		}
	}
	cancel()
	for _, n := range formed {
		n.Close()
	}
	if len(formed) > 0 {
		t.Fatalf("node 2 and the wiped node 3 formed a quorum without node 1 (%d of them started): the wiped node voted as voter 3", len(formed))
	}
	if !strings.Contains(logs3.String(), "this node is not controller voter 3") ||
		!strings.Contains(logs3.String(), "strata cluster remove-controller 3") {
		t.Fatalf("the wiped node did not say why it refused the quorum and what to run; its log:\n%s", logs3.String())
	}

	// Nodes 1 and 2 are the quorum again; node 3 waits, refused.
	long, cancelLong := context.WithTimeout(ctx, 3*time.Minute)
	wiped := make(chan *Node, 1) // nil if Start failed
	go func() {
		n, err := Start(long, c.cfgs[2], testLogger().With("node", 3), vfs.Default)
		if err != nil {
			t.Logf("wiped node 3: %v", err)
		}
		wiped <- n
	}()
	var node3 *Node
	received := false
	take := func() *Node { node3, received = <-wiped, true; return node3 }
	t.Cleanup(func() {
		cancelLong()
		if !received {
			take()
		}
		if node3 != nil {
			node3.Close()
		}
	})
	errs := make(chan error, 2)
	for _, i := range []int{0, 1} {
		go func() { errs <- c.start(i) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "node 2 to have topic acked from node 1", func() bool { return c.nodes[1].ctrl.Image().Topic("acked") != nil })
	cl, adm := c.client()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "without-3"); err != nil {
		t.Fatal(err)
	}
	select {
	case node3 = <-wiped:
		received = true
		t.Fatal("the wiped node started as voter 3 before its removal")
	default:
	}
	if got := c.nodes[0].ctrl.Image().VoterDirectory(3); got != dirs[3] {
		t.Fatalf("voter 3's directory is %v, want the old %v until its removal", got, dirs[3])
	}
	// Nor does it count towards a commit: node 1 and the wiped node 3 alone
	// commit nothing.
	c.stop(1)
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	_, err := adm.CreateTopic(short, 1, 1, nil, "with-1-and-wiped-3")
	cancelShort()
	if err == nil {
		t.Fatal("node 1 and the wiped node 3 committed a topic without node 2")
	}
	if err := c.start(1); err != nil {
		t.Fatal(err)
	}

	// The old incarnation leaves: the node follows the log as an observer.
	remove := kmsg.NewPtrRemoveRaftVoterRequest()
	remove.VoterID, remove.VoterDirectoryID = 3, metadata.UUID{0xff}
	if err := voterChange(ctx, cl, 1, remove); err == nil {
		t.Fatal("RemoveRaftVoter(3) naming another directory than the recorded one succeeded")
	}
	remove.VoterDirectoryID = dirs[3]
	if err := voterChange(ctx, cl, 1, remove); err != nil {
		t.Fatalf("RemoveRaftVoter(3, old directory): %v", err)
	}
	if take() == nil {
		t.Fatal("the wiped node did not start once the old voter 3 was removed")
	}
	newDir := node3.directoryID
	if newDir == dirs[3] {
		t.Fatal("the wiped data dir kept its directory id")
	}
	waitQuorum(t, cl, []int32{1, 2}, []int32{3}, map[int32]metadata.UUID{1: dirs[1], 2: dirs[2], 3: newDir})

	// add-controller: a voter again, with its new directory.
	add, err := admin.AddVoterRequest(ctx, cl, 3, node3.raftAddr)
	if err != nil {
		t.Fatal(err)
	}
	if err := addVoterWhenCaughtUp(ctx, cl, 1, add); err != nil {
		t.Fatalf("AddRaftVoter(3): %v", err)
	}
	waitQuorum(t, cl, []int32{1, 2, 3}, nil, map[int32]metadata.UUID{1: dirs[1], 2: dirs[2], 3: newDir})
	wait.For(t, "every node to record voter 3 with its new directory", func() bool {
		for _, n := range []*Node{c.nodes[0], c.nodes[1], node3} {
			if n.ctrl.Image().VoterDirectory(3) != newDir {
				return false
			}
		}
		return true
	})
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "with-3"); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "node 3 to hold every topic", func() bool {
		img := node3.ctrl.Image()
		return img.Topic("acked") != nil && img.Topic("without-3") != nil && img.Topic("with-3") != nil
	})
}

// waitQuorum waits until DescribeQuorum, sent to node 1, shows these voters
// and observers with these directory ids.
func waitQuorum(t *testing.T, cl *kgo.Client, voters, observers []int32, dirs map[int32]metadata.UUID) {
	t.Helper()
	var last string
	ok := wait.Until(time.Now().Add(wait.DefaultTimeout), func() bool {
		resp, err := describeQuorum(context.Background(), cl, 1, "__cluster_metadata", 0)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			last = fmt.Sprintf("%v %+v", err, resp)
			return false
		}
		p := resp.Topics[0].Partitions[0]
		last = fmt.Sprintf("%+v", p)
		if p.ErrorCode != 0 || !slices.Equal(ids(p.CurrentVoters), voters) || !slices.Equal(ids(p.Observers), observers) {
			return false
		}
		for _, r := range append(p.CurrentVoters, p.Observers...) {
			if metadata.UUID(r.ReplicaDirectoryID) != dirs[r.ReplicaID] {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("DescribeQuorum never showed voters %v and observers %v with directories %v; last: %s", voters, observers, dirs, last)
	}
}
