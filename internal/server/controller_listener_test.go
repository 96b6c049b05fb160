package server

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestControllerListenerAuthorization: a Kafka client that reaches the
// controller listener (--bootstrap-controller) logs in with the Kafka
// listener's SASL mechanisms and is authorized by its ACLs: a super user
// describes the quorum, another user is refused CLUSTER_AUTHORIZATION_FAILED,
// and a client that does not log in gets no answer.
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
