package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/admin"
	"github.com/strata-stream/strata/internal/wait"
)

// TestDescribeQuorum: DescribeQuorum sent to any node, a broker-only one
// included, is answered by the active controller: the leader and its term, the
// three voters and the broker-only observer, every member's log end offset
// once its heartbeat reported it, and the voters' controller listeners (Nodes:
// voters only, as Kafka 4.4 answers; before, the observer was listed too).
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
		return describeQuorum(ctx, cl, node, topic, partition)
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
			// Nodes are the voters' endpoints only, as Kafka 4.4 lists them.
			last = fmt.Sprintf("%+v nodes %+v", p, resp.Nodes)
			var nodes []int32
			for _, n := range resp.Nodes {
				if len(n.Listeners) != 1 || n.Listeners[0].Name != "CONTROLLER" || n.Listeners[0].Port == 0 {
					return false
				}
				nodes = append(nodes, n.NodeID)
			}
			return slices.Equal(nodes, []int32{1, 2, 3})
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

// TestDescribeQuorumObserverReachesLeaderEnd: a broker-only observer that has
// applied everything shows the leader's log end offset, as a Kafka observer's
// fetch offset does: Raft's own entries (the configuration change that added
// it, a barrier) count. Its applied image alone stops at the last command.
func TestDescribeQuorumObserverReachesLeaderEnd(t *testing.T) {
	c := startCluster(t, 1)
	if _, err := c.addNode(4, brokerOnly); err != nil {
		t.Fatal(err)
	}
	cl, _ := c.client()
	ctx := context.Background()
	var last string
	ok := wait.Until(time.Now().Add(wait.DefaultTimeout), func() bool {
		resp, err := describeQuorum(ctx, cl, 1, "__cluster_metadata", 0)
		if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			last = fmt.Sprintf("%v %+v", err, resp)
			return false
		}
		p := resp.Topics[0].Partitions[0]
		last = fmt.Sprintf("voters %+v observers %+v", p.CurrentVoters, p.Observers)
		if len(p.CurrentVoters) != 1 || len(p.Observers) != 1 || p.Observers[0].ReplicaID != 4 {
			return false
		}
		return p.Observers[0].LogEndOffset == p.CurrentVoters[0].LogEndOffset && p.Observers[0].LastCaughtUpTimestamp > 0
	})
	if !ok {
		t.Fatalf("the observer never reached the leader's log end offset; last answer: %s", last)
	}
}

// raftAddrOf is node id's address in the Raft configuration, its advertised
// controller address; "" for an id no running node of c has.
func (c *testCluster) raftAddrOf(id int32) string {
	for _, n := range c.nodes {
		if n != nil && n.cfg.NodeID == id {
			return n.raftAddr
		}
	}
	return ""
}

func describeQuorum(ctx context.Context, cl *kgo.Client, node int32, topic string, partition int32) (*kmsg.DescribeQuorumResponse, error) {
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

func ids(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []int32 {
	var out []int32
	for _, r := range rs {
		out = append(out, r.ReplicaID)
	}
	return out
}

// TestReplaceVoter replaces a controller voter of a running three-voter
// cluster while an acks=all producer runs: a broker-only node is promoted
// with AddRaftVoter, then the active controller is removed with
// RemoveRaftVoter sent to itself (it steps down once the change commits)
// and stopped. The quorum then has the
// expected voters, metadata changes still commit, and every acknowledged
// record is read back. Adding a voter twice or with another directory id,
// removing a non-voter and adding a node outside the quorum get Kafka's error
// codes.
func TestReplaceVoter(t *testing.T) {
	c := startCluster(t, 3)
	if _, err := c.addNode(4, brokerOnly); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl, adm := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("steady"))
	minISR := "2"
	if _, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": &minISR}, "steady"); err != nil {
		t.Fatal(err)
	}
	voterReq := func(node int32, req kmsg.Request) error { return voterChange(ctx, cl, node, req) }
	// addVoter names the node's directory id as DescribeQuorum shows it and
	// its controller listener, or, for a node the quorum does not know,
	// made-up ones.
	addVoter := func(node, id int32) error {
		req, err := admin.AddVoterRequest(ctx, cl, id, c.raftAddrOf(id))
		if errors.Is(err, kerr.InvalidRequest) {
			req = kmsg.NewPtrAddRaftVoterRequest()
			req.VoterID, req.VoterDirectoryID = id, [16]byte{byte(id)}
			req.Listeners = []kmsg.AddRaftVoterRequestListener{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 1}}
		} else if err != nil {
			return err
		}
		return addVoterWhenCaughtUp(ctx, cl, node, req)
	}
	// removeVoter names the voter's directory id as DescribeQuorum shows it,
	// or, for a node that is not a voter, a made-up one.
	removeVoter := func(node, id int32) error {
		req, err := admin.RemoveVoterRequest(ctx, cl, id)
		if errors.Is(err, kerr.VoterNotFound) {
			req = kmsg.NewPtrRemoveRaftVoterRequest()
			req.VoterID, req.VoterDirectoryID = id, [16]byte{byte(id)}
		} else if err != nil {
			return err
		}
		return voterReq(node, req)
	}

	var acked []string
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			v := fmt.Sprint(i)
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				done <- fmt.Errorf("record %d: %w", i, err)
				return
			}
			acked = append(acked, v)
		}
	}()

	noListener := kmsg.NewPtrAddRaftVoterRequest()
	noListener.VoterID, noListener.VoterDirectoryID = 4, [16]byte{4}
	if err := voterReq(1, noListener); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("AddRaftVoter(4) without listeners: %v, want INVALID_REQUEST (as Kafka answers)", err)
	}
	wrongDir, err := admin.AddVoterRequest(ctx, cl, 4, c.raftAddrOf(4))
	if err != nil {
		t.Fatal(err)
	}
	wrongDir.VoterDirectoryID = [16]byte{0xff}
	if err := voterReq(1, wrongDir); !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("AddRaftVoter(4) with another directory id: %v, want REQUEST_TIMED_OUT (as Kafka answers)", err)
	}
	if err := addVoter(2, 4); err != nil {
		t.Fatalf("AddRaftVoter(4): %v", err)
	}
	if err := addVoter(1, 4); !errors.Is(err, kerr.DuplicateVoter) {
		t.Fatalf("AddRaftVoter(4) again: %v, want DUPLICATE_VOTER", err)
	}
	if err := addVoter(1, 9); !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("AddRaftVoter(9): %v, want REQUEST_TIMED_OUT (Kafka's answer for a replica not caught up)", err)
	}
	if err := removeVoter(1, 9); !errors.Is(err, kerr.VoterNotFound) {
		t.Fatalf("RemoveRaftVoter(9): %v, want VOTER_NOT_FOUND", err)
	}
	old := c.nodes[3].ctrl.LeaderID()
	if old < 1 || old > 3 {
		t.Fatalf("active controller %d", old)
	}
	if err := removeVoter(old, old); err != nil {
		t.Fatalf("RemoveRaftVoter(%d) sent to itself: %v", old, err)
	}
	c.stop(int(old) - 1)
	var want []int32
	for _, id := range []int32{1, 2, 3, 4} {
		if id != old {
			want = append(want, id)
		}
	}
	var last string
	ok := wait.Until(time.Now().Add(wait.DefaultTimeout), func() bool {
		resp, err := describeQuorum(ctx, cl, 4, "__cluster_metadata", 0)
		if err != nil || len(resp.Topics) != 1 {
			last = fmt.Sprint(err)
			return false
		}
		p := resp.Topics[0].Partitions[0]
		last = fmt.Sprintf("%+v", p)
		return p.ErrorCode == 0 && p.LeaderID != old && slices.Equal(ids(p.CurrentVoters), want)
	})
	if !ok {
		t.Fatalf("voters never became %v; last answer: %s", want, last)
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "after"); err != nil {
		t.Fatalf("a metadata change after the replacement: %v", err)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("producer: %v", err)
	}
	if len(acked) == 0 {
		t.Fatal("no record acknowledged")
	}
	got := map[string]bool{}
	for _, r := range consumeAll(t, strings.Join(c.seeds(), ","), "steady", len(acked)) {
		got[string(r.Value)] = true
	}
	for _, v := range acked {
		if !got[v] {
			t.Fatalf("acknowledged record %s lost (%d acknowledged, %d read)", v, len(acked), len(got))
		}
	}
}

// voterChange sends a voter change (AddRaftVoter or RemoveRaftVoter) to node
// and returns its error code as an error, with the error message.
func voterChange(ctx context.Context, cl *kgo.Client, node int32, req kmsg.Request) error {
	resp, err := cl.Broker(int(node)).Request(ctx, req)
	if err != nil {
		return err
	}
	return voterChangeErr(resp)
}

// removeVoterRequest is admin.RemoveVoterRequest once the quorum has recorded
// voter id's directory, which it does a moment after the voter registers.
func removeVoterRequest(ctx context.Context, t *testing.T, cl *kgo.Client, id int32) *kmsg.RemoveRaftVoterRequest {
	t.Helper()
	var req *kmsg.RemoveRaftVoterRequest
	wait.Eventually(t, wait.DefaultTimeout, fmt.Sprintf("voter %d's directory to be recorded", id), func() (err error) {
		req, err = admin.RemoveVoterRequest(ctx, cl, id)
		return err
	})
	return req
}

// addVoterWhenCaughtUp sends AddRaftVoter to node as `strata cluster
// add-controller` does: again while the new voter is refused as not caught up
// (a node just started may not have heartbeated yet), within
// wait.DefaultTimeout. It returns the answer's error code as an error.
func addVoterWhenCaughtUp(ctx context.Context, cl *kgo.Client, node int32, req *kmsg.AddRaftVoterRequest) error {
	ctx, cancel := context.WithTimeout(ctx, wait.DefaultTimeout)
	defer cancel()
	resp, err := admin.AddVoterWhenCaughtUp(ctx, 20*time.Millisecond, func(ctx context.Context) (*kmsg.AddRaftVoterResponse, error) {
		resp, err := cl.Broker(int(node)).Request(ctx, req)
		if err != nil {
			return nil, err
		}
		return resp.(*kmsg.AddRaftVoterResponse), nil
	}, nil)
	if err != nil {
		return err
	}
	return voterChangeErr(resp)
}

func voterChangeErr(resp kmsg.Response) error {
	code, msg := voterChangeCode(resp)
	if err := kerr.ErrorForCode(code); err != nil {
		return fmt.Errorf("%w (%s)", err, msg)
	}
	return nil
}

func voterChangeCode(resp kmsg.Response) (int16, string) {
	var msg *string
	var code int16
	switch r := resp.(type) {
	case *kmsg.AddRaftVoterResponse:
		code, msg = r.ErrorCode, r.ErrorMessage
	case *kmsg.RemoveRaftVoterResponse:
		code, msg = r.ErrorCode, r.ErrorMessage
	}
	if msg == nil {
		return code, ""
	}
	return code, *msg
}

// TestAdvertisedControllerAddr: a node's --advertised-controller-addr, not its
// listener's address, is its address in the Raft configuration (DescribeQuorum
// lists it as the node's controller listener), kept as written: a host name
// is not resolved.
func TestAdvertisedControllerAddr(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.AdvertisedControllerAddr = "controller-1.example:19093"
	n := startNode(t, cfg)
	cl, _ := n.client(t)
	var last string
	ok := wait.Until(time.Now().Add(wait.DefaultTimeout), func() bool {
		resp, err := describeQuorum(context.Background(), cl, cfg.NodeID, "__cluster_metadata", 0)
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("%+v", resp.Nodes)
		if len(resp.Nodes) != 1 || len(resp.Nodes[0].Listeners) != 1 {
			return false
		}
		l := resp.Nodes[0].Listeners[0]
		return l.Host == "controller-1.example" && l.Port == 19093
	})
	if !ok {
		t.Fatalf("DescribeQuorum never listed the advertised controller address; last nodes: %s", last)
	}
}
