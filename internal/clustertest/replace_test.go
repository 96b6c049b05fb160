package clustertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/testcluster"
)

// inSyncEverywhere waits until every partition of topic has a leader and
// every replica in its ISR.
func inSyncEverywhere(t *testing.T, c *testcluster.Cluster, topic string, partitions int32) {
	t.Helper()
	for p := range partitions {
		c.WaitPartition(topic, p, 60*time.Second, fmt.Sprintf("%s-%d fully in sync", topic, p), func(s testcluster.PartitionState) error {
			if s.Leader < 0 || len(s.ISR) != len(s.Replicas) {
				return fmt.Errorf("%v", s)
			}
			return nil
		})
	}
}

// runStrata runs the strata binary with args and returns what it printed and
// its exit code.
func runStrata(t *testing.T, timeout time.Duration, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, testcluster.Binary(t), args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("strata %s: still running after %v:\n%s", strings.Join(args, " "), timeout, out)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("strata %s: %v", strings.Join(args, " "), err)
	}
	return string(out), 0
}

// TestReplaceDeadBrokerSameID is the runbook's "a machine is lost for good"
// path: broker-only node 4 dies with its disk, and a new node starts with
// --node-id 4 and an empty data directory. While node 4 is live another
// process with its id is refused. The new node registers once the old
// registration is fenced, and catches up until it is in sync again for every
// partition it held, under an acks=all producer; nothing acknowledged is lost.
// A partition whose ISR held only node 4 (its other replica, node 5, had died
// first) is not led by the empty replica: it stays leaderless with an empty
// ISR, and node 5's copy is not truncated to nothing. On the old code node 4
// was elected leader there with an empty log.
func TestReplaceDeadBrokerSameID(t *testing.T) {
	c := testcluster.Start(t, 3)
	c.AddBroker()
	c.AddBroker()
	c.AddBroker()
	waitBrokers(t, c, 1, 2, 3, 4, 5, 6)
	four, five := c.Node(4), c.Node(5)

	// A second process with a live broker's id is refused.
	args := four.Args()
	other := t.TempDir()
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--data-dir":
			args[i+1] = other
		case "--kafka-addr", "--http-addr", "--controller-addr":
			args[i+1] = four.Host + ":0"
		}
	}
	out, code := runStrata(t, 60*time.Second, args...)
	if code != 1 || !strings.Contains(out, "node id 4 is held by another live broker") {
		t.Fatalf("a second node 4 while node 4 lives: exit %d:\n%s", code, out)
	}

	minISR := map[string]string{"min.insync.replicas": "2"}
	orders := [][]int32{{4, 5, 6}, {5, 6, 4}, {6, 4, 1}, {1, 2, 4}}
	c.CreateTopic("orders", orders, minISR)
	c.CreateTopic("solo", [][]int32{{4, 5}}, map[string]string{"min.insync.replicas": "1"})
	p := startProducer(t, c, "p", "orders")
	solo := startProducer(t, c, "solo", "solo")
	waitAcks(t, time.Now(), 50, p, solo)

	// Node 5 dies: solo's ISR is node 4 alone, and it goes on acknowledging.
	five.Kill()
	c.WaitPartition("solo", 0, 30*time.Second, "solo's ISR to be node 4 alone", func(s testcluster.PartitionState) error {
		if !slices.Equal(s.ISR, []int32{4}) {
			return fmt.Errorf("%v", s)
		}
		return nil
	})
	waitAcks(t, time.Now(), 50, solo)
	solo.finish(t)
	soloAcked := len(solo.acks())

	// Node 4's machine is lost; node 5 comes back with its data.
	four.Kill()
	five.Restart()
	waitAcks(t, time.Now(), 50, p)
	if err := os.RemoveAll(four.DataDir); err != nil {
		t.Fatal(err)
	}
	four.Restart() // same --node-id, empty data dir
	for i, replicas := range orders {
		c.WaitPartition("orders", int32(i), 60*time.Second, "node 4 back in the ISR", func(s testcluster.PartitionState) error {
			if !s.InISR(4) || len(s.ISR) != len(replicas) {
				return fmt.Errorf("%v", s)
			}
			return nil
		})
	}
	waitAcks(t, time.Now(), 50, p)
	p.finish(t)
	checkPartitions(t, int32(len(orders)), produced(p), readAll(t, c, "orders").records)

	s := c.WaitPartition("solo", 0, 10*time.Second, "solo to show node 4 registered", func(s testcluster.PartitionState) error {
		if s.Leader >= 0 || len(s.ISR) != 0 {
			return fmt.Errorf("the empty replica was elected or kept in the ISR: %v", s)
		}
		return nil
	})
	t.Logf("solo after node 4's replacement: %v (%d records were acknowledged with node 4 alone in sync)", s, soloAcked)
	c.Stop(five)
	if end, _ := partitionBytes(t, five, "solo"); end == 0 {
		t.Errorf("node 5's copy of solo-0 is empty: it was truncated")
	}
}

// TestReplaceDeadBrokerNewID is the runbook's other path: broker 4 dies for
// good, a new broker-only node 5 joins, and `strata cluster decommission 4`
// moves every replica broker 4 held onto the brokers holding the fewest (node
// 5 first; the dead node holds nothing to copy: the new replicas catch up from
// the leaders) and unregisters broker 4. On the old code the command refused
// a dead broker (BROKER_ID_NOT_REGISTERED: Metadata lists live brokers only).
// The cluster is then the three voters and node 5, every partition fully in
// sync, nothing acknowledged lost.
func TestReplaceDeadBrokerNewID(t *testing.T) {
	c := testcluster.Start(t, 3)
	c.AddBroker()
	waitBrokers(t, c, 1, 2, 3, 4)
	c.CreateTopic("orders", [][]int32{{4, 1, 2}, {1, 4, 3}, {2, 3, 4}}, map[string]string{"min.insync.replicas": "2"})
	p := startProducer(t, c, "p", "orders")
	waitAcks(t, time.Now(), 50, p)

	c.Node(4).Kill()
	waitAcks(t, time.Now(), 50, p)
	c.AddBroker()
	out, code := runStrata(t, 3*time.Minute, "cluster", "decommission", "4", "--brokers", c.Node(1).KafkaAddr)
	if code != 0 {
		t.Fatalf("strata cluster decommission 4: exit %d:\n%s", code, out)
	}
	t.Logf("strata cluster decommission 4:\n%s", out)
	waitBrokers(t, c, 1, 2, 3, 5)
	inSyncEverywhere(t, c, "orders", 3)
	onFive := 0
	for i := range int32(3) {
		s, err := c.Partition(context.Background(), "orders", i)
		if err != nil || slices.Contains(s.Replicas, 4) || len(s.Replicas) != 3 {
			t.Errorf("orders-%d after the decommission: %v, %v; want three replicas, none on node 4", i, s, err)
		}
		if slices.Contains(s.Replicas, 5) {
			onFive++
		}
	}
	if onFive == 0 {
		t.Errorf("the new node 5 holds no replica of orders")
	}
	waitAcks(t, time.Now(), 50, p)
	p.finish(t)
	checkPartitions(t, 3, produced(p), readAll(t, c, "orders").records)
}

// activeVoter asks broker n which voter leads the controller quorum
// (DescribeQuorum): with controller-only voters, DescribeCluster names a broker.
func activeVoter(n *testcluster.Node) (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := n.Request(ctx, req)
	if err != nil {
		return -1, err
	}
	r := resp.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return -1, err
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("DescribeQuorum answered %d topics", len(r.Topics))
	}
	p := r.Topics[0].Partitions[0]
	return p.LeaderID, kerr.ErrorForCode(p.ErrorCode)
}

// TestThreeControllersSixBrokers: three controller-only voters and six
// broker-only nodes, the smallest of the "three controllers with five to nine
// brokers" shapes that has a broker to spare. A topic of six partitions,
// replication factor 3, spread over every broker, takes acks=all writes while
// a broker and the active controller are killed and restarted; nothing
// acknowledged is lost and every partition is back in sync.
func TestThreeControllersSixBrokers(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithControllerOnly(1, 2, 3))
	for range 6 {
		c.AddBroker()
	}
	waitBrokers(t, c, 4, 5, 6, 7, 8, 9)
	var assignment [][]int32
	for i := range int32(6) {
		assignment = append(assignment, []int32{4 + i, 4 + (i+1)%6, 4 + (i+2)%6})
	}
	c.CreateTopic("spread", assignment, map[string]string{"min.insync.replicas": "2"})
	p := startProducer(t, c, "p", "spread")
	waitAcks(t, time.Now(), 100, p)

	var active int32
	testcluster.Eventually(t, 30*time.Second, "the active controller", func() error {
		var err error
		active, err = activeVoter(c.Node(4))
		return err
	})
	t.Logf("killing broker 5 and the active controller, voter %d", active)
	c.Node(5).Kill()
	c.Node(active).Kill()
	waitAcks(t, time.Now(), 100, p)
	c.Node(active).Restart()
	c.Node(5).Restart()
	inSyncEverywhere(t, c, "spread", 6)
	waitAcks(t, time.Now(), 100, p)
	p.finish(t)
	checkPartitions(t, 6, produced(p), readAll(t, c, "spread").records)
}
