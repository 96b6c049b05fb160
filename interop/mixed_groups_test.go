package interop

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMixedGroupProtocols puts a classic member and a KIP-848 member in one group
// with franz-go, both ways round (KIP-848's online upgrade and downgrade; the Java
// clients run the same in TestGroupProtocolMigration):
//
//  1. A classic member (franz-go's cooperative-sticky balancer) holds group a; a
//     KIP-848 member (franz-go's server-side balancer) joins: ConsumerGroupDescribe
//     shows both, one of member type classic, sharing the two partitions.
//  2. The KIP-848 member leaves: the group is classic again and the classic member
//     holds both partitions (DescribeGroups).
//  3. A KIP-848 member holds group b; a classic member joins and gets a partition
//     from the server-side assignor; the classic member leaves and the KIP-848 member
//     holds both partitions again.
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
	// wait polls until ok holds of the group's description, failing with its last
	// complaint.
	wait := func(what string, ok func() error) {
		t.Helper()
		var last error
		for {
			if last = ok(); last == nil {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: %v", what, last)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	classicHolds := func(group string) func() error {
		return func() error {
			gs, err := adm.DescribeGroups(ctx, group)
			if err != nil {
				return err
			}
			g := gs[group]
			if g.State != "Stable" || len(g.Members) != 1 {
				return fmt.Errorf("classic view: state %s, %d members", g.State, len(g.Members))
			}
			if a, ok := g.Members[0].Assigned.AsConsumer(); !ok || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 2 {
				return fmt.Errorf("classic member's assignment %v", g.Members[0].Assigned)
			}
			return nil
		}
	}
	// mixed checks the consumer group holds one classic and one KIP-848 member,
	// one partition each (want: the member types expected, sorted).
	consumerHolds := func(group string, types ...int8) func() error {
		return func() error {
			req := kmsg.NewPtrConsumerGroupDescribeRequest()
			req.Version = 1
			req.Groups = []string{group}
			resp, err := req.RequestWith(ctx, raw)
			if err != nil {
				return err
			}
			g := resp.Groups[0]
			if g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != len(types) {
				return fmt.Errorf("consumer view: %s %q, state %s, %d members", kerr.ErrorForCode(g.ErrorCode), deref(g.ErrorMessage), g.State, len(g.Members))
			}
			var got []int8
			owned := 0
			for _, m := range g.Members {
				got = append(got, m.MemberType)
				for _, tp := range m.Assignment.TopicPartitions {
					owned += len(tp.Partitions)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, types) || owned != 2 {
				return fmt.Errorf("member types %v, %d partitions owned", got, owned)
			}
			return nil
		}
	}

	member("mixed-a") // classic, franz-go's default balancer
	wait("group a classic", classicHolds("mixed-a"))
	b := member("mixed-a", kgo.ServerSideBalancer())
	wait("group a upgraded", consumerHolds("mixed-a", 0, 1))
	b.Close()
	wait("group a downgraded", classicHolds("mixed-a"))

	member("mixed-b", kgo.ServerSideBalancer())
	wait("group b a consumer group", consumerHolds("mixed-b", 1))
	c := member("mixed-b")
	wait("group b with a classic member", consumerHolds("mixed-b", 0, 1))
	c.Close()
	wait("group b back to its KIP-848 member", consumerHolds("mixed-b", 1))
}
