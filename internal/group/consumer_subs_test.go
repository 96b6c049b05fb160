package group

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

// TestConsumerSubscriptionsFollowMembers drives a consumer group through random
// joins (KIP-848 and classic, the first classic ones before the group upgrades
// from a classic group), heartbeats changing names and patterns, leaves,
// session expiries and topics created, deleted and grown, and after each step
// checks the group's subscription counts, its subscribed topics' metadata and
// its classic view against a recomputation from the members.
func TestConsumerSubscriptionsFollowMembers(t *testing.T) {
	topicNames := []string{"a", "b", "c", "ab"}
	patterns := []string{"", "a.*", "[ab]", "c|d", "a.*"}
	rapid.Check(t, func(rt *rapid.T) {
		topics := newFakeTopics()
		for _, name := range topicNames[:3] {
			topics.set(name, 2)
		}
		clock := &testClock{now: time.UnixMilli(1_700_000_000_000)}
		cfg := DefaultConfig()
		cfg.Topics, cfg.Now, cfg.GroupInitialRebalanceDelay = topics, clock.Now, 0
		store := newMemStore()
		c := New(cfg, store, nil)
		defer c.Close()
		if err := loadAll(context.Background(), c, store); err != nil {
			rt.Fatal(err)
		}
		epochs := map[string]int32{}
		heartbeat := func(member string, epoch int32, names []string, regex *string) {
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version = 1
			req.Group, req.MemberID, req.MemberEpoch = "g", member, epoch
			req.SubscribedTopicNames, req.SubscribedTopicRegex = names, regex
			if epoch == joinEpoch {
				req.RebalanceTimeoutMillis, req.Topics = 60000, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				if names == nil && regex == nil {
					req.SubscribedTopicNames = []string{}
				}
			}
			resp := c.ConsumerGroupHeartbeat(context.Background(), req)
			switch {
			case resp.ErrorCode != 0 || epoch == leaveEpoch:
				delete(epochs, member)
			default:
				epochs[member] = resp.MemberEpoch
			}
		}
		drawNames := func() []string {
			if rapid.Bool().Draw(rt, "names unchanged") {
				return nil
			}
			return rapid.SliceOfNDistinct(rapid.SampledFrom(topicNames), 0, 3, rapid.ID[string]).Draw(rt, "names")
		}
		drawRegex := func() *string {
			if rapid.Bool().Draw(rt, "regex unchanged") {
				return nil
			}
			return ptr(rapid.SampledFrom(patterns).Draw(rt, "regex"))
		}
		classicJoin := func() {
			meta := kmsg.NewConsumerMemberMetadata()
			meta.Topics = rapid.SliceOfNDistinct(rapid.SampledFrom(topicNames), 1, 3, rapid.ID[string]).Draw(rt, "classic topics")
			join := kmsg.NewPtrJoinGroupRequest()
			join.Version = 3
			join.Group, join.ProtocolType = "g", "consumer"
			join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10000, 10000
			join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
			c.JoinGroup(context.Background(), join)
		}
		if rapid.Bool().Draw(rt, "classic member first") {
			classicJoin() // one: a second would wait for the first to rejoin
		}
		for step := range 30 {
			catalogChanged := false
			switch op := rapid.IntRange(0, 6).Draw(rt, "op"); op {
			case 0, 1: // a member joins or rejoins
				member := fmt.Sprintf("m%d", rapid.IntRange(0, 5).Draw(rt, "member"))
				heartbeat(member, joinEpoch, drawNames(), drawRegex())
			case 2: // a member heartbeats, perhaps with a new subscription
				if len(epochs) > 0 {
					member := rapid.SampledFrom(slices.Sorted(maps.Keys(epochs))).Draw(rt, "member")
					heartbeat(member, epochs[member], drawNames(), drawRegex())
				}
			case 3: // a member leaves
				if len(epochs) > 0 {
					heartbeat(rapid.SampledFrom(slices.Sorted(maps.Keys(epochs))).Draw(rt, "member"), leaveEpoch, nil, nil)
				}
			case 4: // time passes; a topic is deleted, created (again) or grows
				clock.add(time.Duration(rapid.IntRange(0, 1500).Draw(rt, "ms")) * time.Millisecond)
				topics.set(rapid.SampledFrom(topicNames).Draw(rt, "topic"), int32(rapid.IntRange(0, 3).Draw(rt, "partitions")))
				catalogChanged = true
			case 5: // a member's session expires, as its timer removes it
				if len(epochs) > 0 {
					member := rapid.SampledFrom(slices.Sorted(maps.Keys(epochs))).Draw(rt, "member")
					expireConsumerMember(c, "g", member)
					delete(epochs, member)
				}
			case 6: // a classic member joins the consumer group
				if isConsumerGroup(c, "g") {
					classicJoin()
				}
			}
			checkConsumerSubscriptions(rt, step, c, "g", !catalogChanged)
		}
	})
}

// withGroupLocked runs f with group id's lock held, if the group exists.
func withGroupLocked(c *Coordinator, id string, f func(g *group)) {
	p, code := c.partitionOf(id)
	if code != 0 {
		return
	}
	if g := p.lookup(c, id, false); g != nil {
		g.withLock(func() { f(g) })
	}
}

// isConsumerGroup reports whether group id is a consumer group.
func isConsumerGroup(c *Coordinator, id string) bool {
	is := false
	withGroupLocked(c, id, func(g *group) { is = g.cg != nil })
	return is
}

// expireConsumerMember removes a member of consumer group id as its session
// timer does.
func expireConsumerMember(c *Coordinator, id, member string) {
	withGroupLocked(c, id, func(g *group) {
		if g.cg != nil && g.cg.members[member] != nil {
			g.fenceConsumerMemberLocked(g.cg.members[member])
		}
	})
}

// checkConsumerSubscriptions fails rt unless consumer group id's subscription
// counts and the metadata of its subscribed topics are what its members'
// subscriptions make them, and with view set (the group changed last, not the
// catalog) the topics its classic view lists as subscribed too.
func checkConsumerSubscriptions(rt *rapid.T, step int, c *Coordinator, id string, view bool) {
	withGroupLocked(c, id, func(g *group) {
		if g.cg == nil {
			return
		}
		names, patterns := map[string]int{}, map[string]int{}
		topics, meta := map[string]struct{}{}, map[string]topicMeta{}
		for _, m := range g.cg.members {
			for _, t := range m.topicNames {
				names[t]++
				topics[t] = struct{}{}
			}
			if m.regex != "" {
				patterns[m.regex]++
			}
			for _, t := range g.subscribedTopicsLocked(m) {
				topics[t] = struct{}{}
				id, n, _ := g.topicsLocked().Topic(t)
				meta[t] = topicMeta{id: id, partitions: n}
			}
		}
		counted := map[string]int{}
		for pattern, pc := range g.cg.subs.patterns {
			counted[pattern] = pc.members
		}
		switch {
		case !maps.Equal(g.cg.subs.names, names):
			rt.Fatalf("step %d: members per topic name %v, the members subscribe %v", step, g.cg.subs.names, names)
		case !maps.Equal(counted, patterns):
			rt.Fatalf("step %d: members per pattern %v, the members subscribe %v", step, counted, patterns)
		case !maps.Equal(g.subscriptionMetadataLocked(), meta):
			rt.Fatalf("step %d: subscribed topics %v, the members subscribe %v", step, g.subscriptionMetadataLocked(), meta)
		case view && (!g.subsKnown || !maps.Equal(g.subscribed, topics)):
			rt.Fatalf("step %d: classic view subscribed to %v (known %v), the members to %v", step, g.subscribed, g.subsKnown, topics)
		}
	})
}
