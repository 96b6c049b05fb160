package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/testcluster"
)

// TestPartitionCutsTheIntendedLinks: after a Raft membership change (the
// broker-only node promoted to a voter, so the configuration every node
// dials is the one the active controller wrote), isolating a node cuts
// exactly its links, the broker-only node's included. For each victim (the
// promoted node, then a voter that is not the active controller) a topic is
// created during the cut: every other node must learn it, the victim must
// not until the heal, and the only controller connections that waited on
// the cut must be the victim's, the active controller's to it among them.
//
// The harness before --advertised-controller-addr failed it: it never cut the
// broker-only node, which learnt the topic during its cut, and after the
// membership change every node dialled the voters through the then active
// controller's per-link proxies, so a cut was attributed to the wrong links.
func TestPartitionCutsTheIntendedLinks(t *testing.T) {
	c := startProcessCluster(t, 3, "cuts", processOptions{spare: true})
	c.tc.CreateTopic("cuts", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, nil) // every voter a follower
	c.warmedUp()
	if _, err := c.toggleVoter(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	controller := func() int32 {
		t.Helper()
		var id int32
		testcluster.Eventually(t, healthyTimeout, "an active controller", func() error {
			var err error
			if id, _, err = c.tc.ActiveController(ctx); err == nil && id < 1 {
				err = fmt.Errorf("none (%d)", id)
			}
			return err
		})
		return id
	}
	active := controller()
	// Every member heard from the active controller through its own proxy,
	// and heartbeats to it: the configuration holds the advertised addresses.
	testcluster.Eventually(t, healthyTimeout, "controller links from and to the active controller dialled", func() error {
		dialled, _ := c.cn.links()
		for _, n := range c.tc.Nodes() {
			if n.ID == active {
				continue
			}
			for _, l := range [][2]int32{{active, n.ID}, {n.ID, active}} {
				if dialled[l] == 0 {
					return fmt.Errorf("no connection on link %d->%d; dialled: %v", l[0], l[1], dialled)
				}
			}
		}
		return nil
	})
	victims := []int32{c.spare.ID, 1 + active%3} // the promoted node, then a voter not in control
	for _, victim := range victims {
		t.Run(fmt.Sprintf("node-%d", victim), func(t *testing.T) {
			if id := controller(); id != active {
				t.Fatalf("the active controller moved from node %d to %d", active, id)
			}
			_, before := c.cn.links()
			c.cn.net.Isolate(name(victim))
			healed := false
			defer func() {
				if !healed {
					c.cn.net.Heal(true)
				}
			}()
			topic := fmt.Sprintf("cut-%d", victim)
			// Seeded with the active controller's own address: the client
			// asks nothing of the victim.
			adm := newAdmin(t, brokers{addrs: []string{c.cn.advertised(active)}})
			resp, err := adm.CreateTopics(ctx, 1, 3, nil, topic)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				t.Fatalf("creating %s with node %d cut off: %v", topic, victim, err)
			}
			knows := func(n *testcluster.Node) error {
				_, err := n.Partition(ctx, topic, 0)
				return err
			}
			for _, n := range c.tc.Nodes() {
				if n.ID != victim {
					testcluster.Eventually(t, healthyTimeout, fmt.Sprintf("node %d learning %s during the cut", n.ID, topic), func() error { return knows(n) })
				}
			}
			// The victim must not learn it: watched over a window, as absence
			// can only be.
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if knows(c.tc.Node(victim)) == nil {
					t.Fatalf("node %d learnt %s while cut off", victim, topic)
				}
			}
			_, after := c.cn.links()
			for l, k := range after {
				if k > before[l] && l[0] != victim && l[1] != victim {
					t.Errorf("link %d->%d, which does not touch node %d, had %d connections wait on its cut", l[0], l[1], victim, k-before[l])
				}
			}
			if l := [2]int32{active, victim}; after[l] == before[l] {
				t.Errorf("the active controller's link to node %d was never held by the cut; stalled: %v", victim, after)
			}
			c.cn.net.Heal(true)
			healed = true
			testcluster.Eventually(t, healthyTimeout, fmt.Sprintf("node %d learning %s after the heal", victim, topic), func() error { return knows(c.tc.Node(victim)) })
		})
	}
}
