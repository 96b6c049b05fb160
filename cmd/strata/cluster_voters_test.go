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
// node 4, `strata cluster add-controller 4` makes it a voter and
// `remove-controller 2 --output json` takes node 2 out, as DescribeQuorum then
// shows; adding 4 again and removing 2 again fail with Kafka's errors and a
// non-zero exit.
func TestClusterAddRemoveController(t *testing.T) {
	c := testcluster.Start(t, 3)
	c.AddBroker()
	addr := strings.Join(c.Bootstrap(), ",")

	r := mustRunAt(t, addr, "cluster", "add-controller", "4")
	if !strings.Contains(r.stdout, "node 4 is a controller voter") {
		t.Fatalf("add-controller 4: %s", r)
	}
	var out voterChangeJSON
	mustJSONAt(t, addr, &out, "cluster", "remove-controller", "2")
	if out != (voterChangeJSON{Node: 2, Voter: false}) {
		t.Fatalf("remove-controller 2: %+v", out)
	}
	cl := c.Client()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	testcluster.Eventually(t, 30*time.Second, "voters 1, 3 and 4", func() error {
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			return err
		}
		var voters []int32
		for _, v := range resp.Topics[0].Partitions[0].CurrentVoters {
			voters = append(voters, v.ReplicaID)
		}
		if !slices.Equal(voters, []int32{1, 3, 4}) {
			return fmt.Errorf("voters %v", voters)
		}
		return nil
	})

	for _, tc := range []struct{ args, want string }{
		{"add-controller 4", "DUPLICATE_VOTER"},
		{"add-controller 9", "node 9 is not a member of the quorum"},
		{"remove-controller 2", "VOTER_NOT_FOUND"},
		{"remove-controller x", "want a node id"},
	} {
		r := runAt(t, addr, "", append([]string{"cluster"}, strings.Fields(tc.args)...)...)
		if r.code == 0 || r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("strata cluster %s: want a failure naming %s, got %s", tc.args, tc.want, r)
		}
	}
}
