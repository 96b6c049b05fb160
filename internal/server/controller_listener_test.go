package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/wait"
)

// TestControllerListenerAuthorization: a Kafka client that reaches the
// controller listener (--bootstrap-controller) logs in with the Kafka
// listener's SASL mechanisms and is authorized by its ACLs: a super user
// describes the quorum, another user is refused CLUSTER_AUTHORIZATION_FAILED,
// and a client that does not log in gets no answer. UpdateRaftVoter needs
// CLUSTER_ACTION.
func TestControllerListenerAuthorization(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.SASLMechanisms = "SCRAM-SHA-256"
	cfg.AddScram = []string{"SCRAM-SHA-256=[name=admin,password=a]", "SCRAM-SHA-256=[name=bob,password=b]"}
	cfg.Authorizer, cfg.SuperUsers = "acl", "User:admin"
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	describe := func(opts ...kgo.Opt) (int16, error) { return describeQuorumAt(ctx, n.raftAddr, opts...) }
	login := func(user, pass string) kgo.Opt {
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())
	}
	if code, err := describe(login("admin", "a")); err != nil || code != 0 {
		t.Fatalf("DescribeQuorum by a super user on the controller listener: %v, %v", kerr.ErrorForCode(code), err)
	}
	if code, err := describe(login("bob", "b")); err != nil || code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("DescribeQuorum by bob: %v, %v; want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code), err)
	}
	if code, err := describe(); err == nil {
		t.Fatalf("DescribeQuorum without logging in answered %v", kerr.ErrorForCode(code))
	}
	// UpdateRaftVoter needs CLUSTER_ACTION, as on a Kafka controller: a super
	// user's (of an unknown voter) reaches the quorum.
	for _, tc := range []struct {
		user, pass string
		want       int16
	}{{"admin", "a", kerr.VoterNotFound.Code}, {"bob", "b", kerr.ClusterAuthorizationFailed.Code}} {
		if code, err := updateRaftVoterAt(ctx, n.raftAddr, n.ctrl.RaftLeader().Epoch, login(tc.user, tc.pass)); err != nil || code != tc.want {
			t.Errorf("UpdateRaftVoter by %s: %v, %v; want %v", tc.user, kerr.ErrorForCode(code), err, kerr.ErrorForCode(tc.want))
		}
	}
}

// updateRaftVoterAt sends the controller listener at addr an UpdateRaftVoter
// for node 99, a voter of no quorum, in epoch, and returns the answer's code.
func updateRaftVoterAt(ctx context.Context, addr string, epoch int32, opts ...kgo.Opt) (int16, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	req := kmsg.NewPtrUpdateRaftVoterRequest()
	req.CurrentLeaderEpoch, req.VoterID, req.VoterDirectoryID = epoch, 99, [16]byte{99}
	req.Listeners = []kmsg.UpdateRaftVoterRequestListener{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 1}}
	req.KRaftVersionFeature.MinSupportedVersion, req.KRaftVersionFeature.MaxSupportedVersion = 0, 1
	resp, err := cl.Broker(math.MinInt32).Request(ctx, req)
	if err != nil {
		return 0, err
	}
	return resp.(*kmsg.UpdateRaftVoterResponse).ErrorCode, nil
}

// describeQuorumAt sends DescribeQuorum to the controller listener at addr as
// a Kafka client does with --bootstrap-controller, and returns the error code
// of the answer (the partition's when the answer has one).
func describeQuorumAt(ctx context.Context, addr string, opts ...kgo.Opt) (int16, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	// The seed broker: kgo routes admin requests by Metadata, which a
	// controller listener does not serve.
	resp, err := cl.Broker(math.MinInt32).Request(ctx, req)
	if err != nil {
		return 0, err
	}
	r := resp.(*kmsg.DescribeQuorumResponse)
	if r.ErrorCode != 0 || len(r.Topics) == 0 {
		return r.ErrorCode, nil
	}
	return r.Topics[0].Partitions[0].ErrorCode, nil
}

// TestRemovedControllerForwards: a controller-only voter removed from the
// quorum hears from no leader any more, yet a Kafka tool may still send it a
// request (kafka-metadata-quorum remove-controller --unregister sends its
// UnregisterController to the voter it removed, when that one led). It
// passes the request on through the voters it was started with, as a
// broker-only node does, and the active controller answers; before, it waited
// for a leader it would never learn of and answered NOT_CONTROLLER after the
// forwarding's 10 s.
func TestRemovedControllerForwards(t *testing.T) {
	c := startCluster(t, 3, func(i int, cfg *config.Config) {
		if i == 2 {
			cfg.Roles = "controller"
		}
	})
	ctx := t.Context()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.nodes[0].KafkaAddr())) // node 3 has no Kafka listener
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	remove := removeVoterRequest(ctx, t, cl, 3)
	if err := voterChange(ctx, cl, 1, remove); err != nil {
		t.Fatalf("RemoveRaftVoter(3): %v", err)
	}
	removed := c.nodes[2]
	wait.Eventually(t, wait.DefaultTimeout, "node 3 to know no leader", func() error {
		if removed.ctrl.InQuorum() {
			return errors.New("node 3 is still in the Raft configuration")
		}
		if id, _, ok := removed.ctrl.LeaderAddr(); ok {
			return fmt.Errorf("node 3 still knows node %d as the leader", id)
		}
		return nil
	})

	at, err := kgo.NewClient(kgo.SeedBrokers(removed.cfg.ControllerAddr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer at.Close()
	req := kmsg.NewPtrUnregisterControllerRequest()
	req.ControllerID = 3
	reqCtx, cancel := context.WithTimeout(ctx, 8*time.Second) // below the forwarding's own 10 s
	defer cancel()
	resp, err := at.Broker(math.MinInt32).Request(reqCtx, req)
	if err != nil {
		t.Fatalf("UnregisterController(3) through the removed voter: %v", err)
	}
	if r := resp.(*kmsg.UnregisterControllerResponse); r.ErrorCode != 0 {
		t.Fatalf("UnregisterController(3) through the removed voter: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
