package clustertest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/testcluster"
)

// brokersOf asks node n alone which brokers Metadata lists.
func brokersOf(n *testcluster.Node) ([]int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := n.Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids, nil
}

// waitBrokers waits until every running broker of c lists exactly want.
func waitBrokers(t *testing.T, c *testcluster.Cluster, want ...int32) {
	t.Helper()
	for _, n := range c.Nodes() {
		if !n.IsBroker() || !n.Running() {
			continue
		}
		testcluster.Eventually(t, 30*time.Second, fmt.Sprintf("node %d to list brokers %v", n.ID, want), func() error {
			got, err := brokersOf(n)
			if err == nil && !slices.Equal(got, want) {
				err = fmt.Errorf("lists %v", got)
			}
			return err
		})
	}
}

// TestBrokersJoinRunningCluster: a three-node cluster grows to five with
// broker-only nodes while an acks=all producer runs; a topic placed on the new
// brokers takes acks=all writes, also while one of them is killed and
// restarted; nothing acknowledged is lost on either topic,
// and the new brokers' replicas agree byte for byte with the old one's.
func TestBrokersJoinRunningCluster(t *testing.T) {
	c := testcluster.Start(t, 3)
	minISR := map[string]string{"min.insync.replicas": "2"}
	c.CreateTopic("before", [][]int32{{1, 2, 3}}, minISR)
	p1 := startProducer(t, c, "p1", "before")
	waitAcks(t, time.Now(), 50, p1)

	c.AddBroker()
	c.AddBroker()
	waitBrokers(t, c, 1, 2, 3, 4, 5)
	since := time.Now()
	waitAcks(t, since, 50, p1)

	c.CreateTopic("grown", [][]int32{{4, 5, 1}}, minISR)
	p2 := startProducer(t, c, "p2", "grown")
	waitAcks(t, time.Now(), 200, p2)
	// A broker-only node that crashes comes back on its own Raft state.
	c.Node(4).Kill()
	waitAcks(t, time.Now(), 100, p2)
	c.Node(4).Restart()
	c.WaitPartition("grown", 0, 30*time.Second, "node 4 back in the ISR", func(s testcluster.PartitionState) error {
		if !s.InISR(4) {
			return fmt.Errorf("%v", s)
		}
		return nil
	})
	waitAcks(t, time.Now(), 100, p2)
	p1.finish(t)
	p2.finish(t)

	check(t, produced(p1), readAll(t, c, "before").records)
	check(t, produced(p2), readAll(t, c, "grown").records)
	c.Stop(c.Node(4), c.Node(5), c.Node(1))
	checkReplicasAgree(t, "grown", c.Node(4), c.Node(5), c.Node(1))
}

// TestControllerOnlyNode: a controller-only voter takes part in the quorum
// but serves no Kafka clients and never appears as a broker; the brokers
// (two combined nodes and a broker-only one) carry a topic with acks=all.
func TestControllerOnlyNode(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithControllerOnly(1))
	c.AddBroker()
	waitBrokers(t, c, 2, 3, 4)
	if nc, err := net.DialTimeout("tcp", c.Node(1).KafkaAddr, time.Second); err == nil {
		nc.Close()
		t.Fatalf("the controller-only node accepts Kafka connections on %s", c.Node(1).KafkaAddr)
	}
	c.CreateTopic("t", [][]int32{{4, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	p := startProducer(t, c, "p", "t")
	waitAcks(t, time.Now(), 200, p)
	p.finish(t)
	check(t, produced(p), readAll(t, c, "t").records)
}

// TestReassignmentSurvivesCrashes: a partition moves from [1 2 3] onto the
// broker-only nodes 4 and 5 and broker 2 under an acks=all producer
// (min.insync.replicas 2), with kill -9 in the middle: node 4 is down when the
// move starts (so it waits for it), the leader, which the move removes, is
// killed while it waits, and node 4 then restarts, catches up and completes
// the move. Nothing acknowledged is lost, and the new replicas agree byte for
// byte.
func TestReassignmentSurvivesCrashes(t *testing.T) {
	c := testcluster.Start(t, 3)
	c.AddBroker()
	c.AddBroker()
	c.CreateTopic("moving", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	p := startProducer(t, c, "p", "moving")
	waitAcks(t, time.Now(), 200, p)

	c.Node(4).Kill()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("moving", 0, []int32{4, 5, 2})
	rs, err := c.Admin().AlterPartitionAssignments(context.Background(), req)
	if err == nil {
		err = rs["moving"][0].Err
	}
	if err != nil {
		t.Fatalf("starting the move: %v", err)
	}
	c.WaitPartition("moving", 0, 30*time.Second, "broker 5 in the ISR, 4 still missing", func(s testcluster.PartitionState) error {
		if !s.InISR(5) || s.InISR(4) {
			return fmt.Errorf("%v", s)
		}
		return nil
	})
	c.Node(1).Kill()
	waitAcks(t, time.Now(), 100, p)
	c.Node(4).Restart()
	c.WaitPartition("moving", 0, 60*time.Second, "the move to complete", func(s testcluster.PartitionState) error {
		if !slices.Equal(s.Replicas, []int32{4, 5, 2}) || !slices.Equal(slices.Sorted(slices.Values(s.ISR)), []int32{2, 4, 5}) {
			return fmt.Errorf("%v", s)
		}
		return nil
	})
	waitAcks(t, time.Now(), 100, p)
	c.Node(1).Restart()
	p.finish(t)
	check(t, produced(p), readAll(t, c, "moving").records)
	c.Stop(c.Node(4), c.Node(5), c.Node(2))
	checkReplicasAgree(t, "moving", c.Node(4), c.Node(5), c.Node(2))
}
