package server

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/wait"
)

// TestDescribeQuorum: DescribeQuorum sent to any node, a broker-only one
// included, is answered by the active controller: the leader and its term, the
// three voters and the broker-only observer, each with its controller
// listener, and every member's log end offset once its heartbeat reported it.
// A request for another partition than __cluster_metadata-0 gets
// UNKNOWN_TOPIC_OR_PARTITION.
func TestDescribeQuorum(t *testing.T) {
	c := startCluster(t, 3)
	if _, err := c.addNode(4, brokerOnly); err != nil {
		t.Fatal(err)
	}
	cl, _ := c.client()
	ctx := context.Background()
	describe := func(node int32, topic string, partition int32) (*kmsg.DescribeQuorumResponse, error) {
		req := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewDescribeQuorumRequestTopicPartition()
		rp.Partition = partition
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Broker(int(node)).Request(ctx, req)
		if err != nil {
			return nil, err
		}
		return resp.(*kmsg.DescribeQuorumResponse), nil
	}
	ids := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []int32 {
		var out []int32
		for _, r := range rs {
			out = append(out, r.ReplicaID)
		}
		return out
	}
	for _, node := range []int32{1, 2, 3, 4} {
		var last string
		ok := wait.Until(time.Now().Add(wait.DefaultTimeout), func() bool {
			resp, err := describe(node, "__cluster_metadata", 0)
			if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				last = fmt.Sprintf("%v %+v", err, resp)
				return false
			}
			p := resp.Topics[0].Partitions[0]
			last = fmt.Sprintf("%+v", p)
			if p.ErrorCode != 0 || p.LeaderID != c.nodes[0].ctrl.LeaderID() || p.LeaderEpoch < 1 || p.HighWatermark < 1 {
				return false
			}
			if !slices.Equal(ids(p.CurrentVoters), []int32{1, 2, 3}) || !slices.Equal(ids(p.Observers), []int32{4}) {
				return false
			}
			for _, r := range append(p.CurrentVoters, p.Observers...) {
				if r.LogEndOffset < 1 || r.LastFetchTimestamp < 0 || r.LastCaughtUpTimestamp < 0 {
					return false
				}
			}
			return len(resp.Nodes) == 4 && resp.Nodes[3].NodeID == 4 && len(resp.Nodes[3].Listeners) == 1 &&
				resp.Nodes[3].Listeners[0].Name == "CONTROLLER" && resp.Nodes[3].Listeners[0].Port != 0
		})
		if !ok {
			t.Fatalf("node %d never described the whole quorum; last answer: %s", node, last)
		}
	}
	for _, bad := range []struct {
		topic     string
		partition int32
	}{{"__cluster_metadata", 1}, {"other", 0}} {
		resp, err := describe(1, bad.topic, bad.partition)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("DescribeQuorum(%s-%d): error %v, want UNKNOWN_TOPIC_OR_PARTITION", bad.topic, bad.partition, kerr.ErrorForCode(code))
		}
	}
}
