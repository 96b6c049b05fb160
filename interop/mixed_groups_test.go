package interop

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMixedGroupProtocols puts a classic member and a KIP-848 member in one group,
// with franz-go, both ways round. Strata does not migrate groups online between the
// protocols (KIP-848's upgrade and downgrade):
//
//  1. A classic member (franz-go's cooperative-sticky balancer) holds group a; a
//     ConsumerGroupHeartbeat joining a answers GROUP_ID_NOT_FOUND with the message
//     Kafka gives when group.consumer.migration.policy is disabled.
//  2. A KIP-848 member (franz-go's server-side balancer) holds group b; a classic
//     JoinGroup to b answers INCONSISTENT_GROUP_PROTOCOL (Kafka 4.4 would take the
//     classic member into the consumer group: not implemented).
//
// In both cases the member already there keeps its assignment.
func TestMixedGroupProtocols(t *testing.T) {
	tgt := startTarget(t)
	if tgt.name != "strata" {
		t.Skip("checks Strata's answers")
	}
	const topic = "mixed-groups"
	adm := newAdmin(t, tgt.bootstrap)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	member := func(group string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tgt.bootstrap), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		go func() {
			for !cl.PollFetches(ctx).IsClientClosed() && ctx.Err() == nil {
			}
		}()
		return cl
	}
	raw, err := kgo.NewClient(kgo.SeedBrokers(tgt.bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// stable waits until the group shows one member, of the given type, holding
	// both partitions.
	stable := func(group, typ string) {
		t.Helper()
		for {
			gs, err := adm.DescribeGroups(ctx, group)
			if err == nil {
				if g := gs[group]; len(g.Members) == 1 && g.State == "Stable" {
					return
				}
			}
			if typ == "consumer" {
				req := kmsg.NewPtrConsumerGroupDescribeRequest()
				req.Groups = []string{group}
				if resp, err := req.RequestWith(ctx, raw); err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 &&
					len(resp.Groups[0].Members) == 1 && resp.Groups[0].State == "Stable" {
					return
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("group %s never had one %s member holding its partitions", group, typ)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}

	member("mixed-a") // classic, franz-go's default balancer
	stable("mixed-a", "classic")
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "mixed-a", "new-protocol-member", 30000
	hb.SubscribedTopicNames, hb.Topics = []string{topic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	hbResp, err := hb.RequestWith(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	const wantMsg = "Cannot upgrade classic group mixed-a to consumer group because online upgrade is disabled."
	if hbResp.ErrorCode != kerr.GroupIDNotFound.Code || hbResp.ErrorMessage == nil || *hbResp.ErrorMessage != wantMsg {
		t.Errorf("KIP-848 member joining a classic group: %s %q, want GROUP_ID_NOT_FOUND %q",
			kerr.ErrorForCode(hbResp.ErrorCode), deref(hbResp.ErrorMessage), wantMsg)
	}
	stable("mixed-a", "classic")

	member("mixed-b", kgo.ServerSideBalancer())
	stable("mixed-b", "consumer")
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType = "mixed-b", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30000, 30000
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{topic}
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	joinResp, err := join.RequestWith(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if joinResp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("classic member joining a KIP-848 group: %s, want INCONSISTENT_GROUP_PROTOCOL", kerr.ErrorForCode(joinResp.ErrorCode))
	}
	stable("mixed-b", "consumer")
}
