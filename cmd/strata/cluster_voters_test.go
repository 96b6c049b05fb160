package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/testcluster"
)

// TestClusterAddRemoveController: on a three-node cluster with a broker-only
// node 4, `strata cluster add-controller 4 --controller-addr ADDR` makes it a
// voter and `remove-controller 2 --output json` takes node 2 out, as
// DescribeQuorum then shows; adding 4 again and removing 2 again fail with
// Kafka's errors and a non-zero exit, and add-controller without the node's
// controller address (which DescribeQuorum does not list for an observer) is
// a usage error.
func TestClusterAddRemoveController(t *testing.T) {
	c := testcluster.Start(t, 3)
	n4 := c.AddBroker()
	addr := strings.Join(c.Bootstrap(), ",")

	r := mustRunAt(t, addr, "cluster", "add-controller", "4", "--controller-addr", n4.ControllerAddr)
	if !strings.Contains(r.stdout, "node 4 is a controller voter") {
		t.Fatalf("add-controller 4: %s", r)
	}
	var out voterChangeJSON
	mustJSONAt(t, addr, &out, "cluster", "remove-controller", "2")
	if out != (voterChangeJSON{Node: 2, Voter: false}) {
		t.Fatalf("remove-controller 2: %+v", out)
	}
	waitVoters(t, c, []int32{1, 3, 4})

	for _, tc := range []struct{ args, want string }{
		{"add-controller 4 --controller-addr " + n4.ControllerAddr, "DUPLICATE_VOTER"},
		{"add-controller 9 --controller-addr " + n4.ControllerAddr, "node 9 is not a member of the quorum"},
		{"add-controller 4", "needs --controller-addr"},
		{"add-controller 4 --controller-addr nowhere", "want host:port"},
		{"remove-controller 2", "VOTER_NOT_FOUND"},
		{"remove-controller x", "want a node id"},
	} {
		r := runAt(t, addr, "", append([]string{"cluster"}, strings.Fields(tc.args)...)...)
		if r.code == 0 || r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("strata cluster %s: want a failure naming %s, got %s", tc.args, tc.want, r)
		}
	}
}

// TestClusterAddControllerWaitsForCatchUp: `strata cluster add-controller` of
// a stopped broker-only node is refused with REQUEST_TIMED_OUT ("lagging
// behind") once --timeout passes, having said on stderr that it tries again,
// and the node stays an observer; run while the node starts again, the same
// command waits until the node has heartbeated and caught up, and adds it.
func TestClusterAddControllerWaitsForCatchUp(t *testing.T) {
	c := testcluster.Start(t, 3)
	n4 := c.AddBroker()
	addr := strings.Join(c.Bootstrap(), ",")
	n4.Stop()

	r := runAt(t, addr, "", "cluster", "add-controller", "4", "--controller-addr", n4.ControllerAddr, "--timeout", "3s")
	if r.code == 0 || r.err == nil || !strings.Contains(r.err.Error(), "REQUEST_TIMED_OUT") || !strings.Contains(r.err.Error(), "lagging behind") {
		t.Fatalf("add-controller of a stopped node: want REQUEST_TIMED_OUT (lagging behind), got %s", r)
	}
	if !strings.Contains(r.stderr, "trying again") {
		t.Errorf("add-controller of a stopped node did not say it tries again: %s", r)
	}
	t.Logf("add-controller of a stopped node: %v\n%s", r.err, r.stderr)
	waitVoters(t, c, []int32{1, 2, 3})

	n4.Start()
	r = mustRunAt(t, addr, "cluster", "add-controller", "4", "--controller-addr", n4.ControllerAddr)
	if !strings.Contains(r.stdout, "node 4 is a controller voter") {
		t.Fatalf("add-controller 4 while it starts: %s", r)
	}
	t.Logf("add-controller 4 while it starts:\n%s", r.stderr)
	waitVoters(t, c, []int32{1, 2, 3, 4})
	n4.WaitReady()
}

// waitVoters waits until DescribeQuorum shows exactly the voters want.
func waitVoters(t *testing.T, c *testcluster.Cluster, want []int32) {
	t.Helper()
	cl := c.Client()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	testcluster.Eventually(t, 30*time.Second, fmt.Sprintf("voters %v", want), func() error {
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			return err
		}
		var voters []int32
		for _, v := range resp.Topics[0].Partitions[0].CurrentVoters {
			voters = append(voters, v.ReplicaID)
		}
		if !slices.Equal(voters, want) {
			return fmt.Errorf("voters %v", voters)
		}
		return nil
	})
}
