package server

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/wait"
)

// round4Fixture was written by `strata server` of main at 434a272
// (2026-12-04) through testdata/mkfixture. It holds everything round3Fixture
// lists (its metadata again up to Raft index 43, the snapshot at 11239) and
// kip848-g, a KIP-848 consumer group whose records __consumer_offsets holds
// since session 19: members cg-a and cg-b subscribed to clicks, each owning
// one of its partitions at group epoch 3.
const round4Fixture = "testdata/datadir-434a272.tgz"

// round4TopicIDs are the topic ids mkfixture printed.
var round4TopicIDs = map[string]string{
	"__consumer_offsets":  "0ad154578fca4de980bc9189b17690ae",
	"__share_group_state": "ec8f043a3e534b12830619e69ab3db88",
	"__transaction_state": "6fbbeb1be7b24a51a1854f44d9af296b",
	"archive":             "c44e12decb3d465cbc384a5799a3d58e",
	"clicks":              "4d452ea8a50e4a61ba49ce6dfd32f96e",
	"orders":              "4a6b0f073da44658a5c2072449700836",
	"payments":            "5e8b70c083114f8594043050507bb0be",
	"profiles":            "6775ec7859274bb0aa272530faa419bc",
	"tasks":               "6bbf08197d184b4a821c466b3bc52c29",
}

// round4ConsumerEpoch is kip848-g's epoch when the node stopped, and
// round4ConsumerOwned the partitions of clicks each member owned then
// (mkfixture printed them).
const round4ConsumerEpoch = 3

var round4ConsumerOwned = map[string][]int32{"cg-a": {0}, "cg-b": {1}}

// TestOpensRound4DataDir opens the data directory main wrote at 434a272 with
// the new code: every item of round 3, and the KIP-848 consumer group.
func TestOpensRound4DataDir(t *testing.T) {
	facts := fixtureFacts{topicIDs: round4TopicIDs, written: time.Date(2026, time.December, 4, 0, 0, 0, 0, time.UTC), modernGroup: "consumer"}
	checkRound3Fixture(t, round4Fixture, facts, map[string]groupCheck{"consumer group": checkRound4ConsumerGroup})
}

// checkRound4ConsumerGroup: kip848-g is described as it was (Stable, its
// epoch, each member's epoch and partitions), and each member heartbeats on at
// its epoch with the partitions it owns, keeping them: no member is fenced
// or sent back to epoch 0 by the upgrade.
func checkRound4ConsumerGroup(t *testing.T, ctx context.Context, admin *kgo.Client, _ *kadm.Client) {
	var g kmsg.ConsumerGroupDescribeResponseGroup
	wait.Eventually(t, 30*time.Second, "kip848-g's description", func() error {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"kip848-g"}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			return err
		}
		g = resp.Groups[0]
		return kerr.ErrorForCode(g.ErrorCode)
	})
	if g.State != "Stable" || g.Epoch != round4ConsumerEpoch || g.AssignmentEpoch != round4ConsumerEpoch {
		t.Fatalf("kip848-g after the upgrade: %s at epoch %d (assignment %d), want Stable at %d", g.State, g.Epoch, g.AssignmentEpoch, round4ConsumerEpoch)
	}
	members := map[string]string{}
	for _, m := range g.Members {
		members[m.MemberID] = fmt.Sprintf("epoch %d owns %v target %v subscribed %v", m.MemberEpoch,
			describedPartitions(m.Assignment.TopicPartitions), describedPartitions(m.TargetAssignment.TopicPartitions), m.SubscribedTopics)
	}
	want := map[string]string{}
	for id, owned := range round4ConsumerOwned {
		want[id] = fmt.Sprintf("epoch %d owns %v target %v subscribed [clicks]", round4ConsumerEpoch, owned, owned)
	}
	if fmt.Sprint(members) != fmt.Sprint(want) {
		t.Fatalf("kip848-g's members after the upgrade:\n%v\nwant\n%v", members, want)
	}

	clicks := describedTopicID(g.Members)
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range round4ConsumerOwned {
			if !yield(id) {
				return
			}
		}
	}) {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "kip848-g", id, round4ConsumerEpoch, -1
		owned := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		owned.TopicID, owned.Partitions = clicks, round4ConsumerOwned[id]
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{owned}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 || resp.MemberEpoch != round4ConsumerEpoch {
			t.Fatalf("%s's heartbeat after the upgrade: %v at epoch %d, want its epoch %d", id, kerr.ErrorForCode(resp.ErrorCode), resp.MemberEpoch, round4ConsumerEpoch)
		}
		if resp.Assignment != nil {
			var got []int32
			for _, tp := range resp.Assignment.Topics {
				got = append(got, tp.Partitions...)
			}
			if !slices.Equal(got, round4ConsumerOwned[id]) {
				t.Fatalf("%s's heartbeat after the upgrade assigned %v, want %v", id, got, round4ConsumerOwned[id])
			}
		}
	}
}

// describedPartitions lists the partitions of a described assignment, sorted.
func describedPartitions(topics []kmsg.AssignmentTopicPartition) []int32 {
	var ps []int32
	for _, tp := range topics {
		ps = append(ps, tp.Partitions...)
	}
	slices.Sort(ps)
	return ps
}

// describedTopicID is the topic id of the first partition a described member
// owns (clicks: the group's one topic).
func describedTopicID(members []kmsg.ConsumerGroupDescribeResponseGroupMember) [16]byte {
	for _, m := range members {
		for _, tp := range m.Assignment.TopicPartitions {
			return tp.TopicID
		}
	}
	return [16]byte{}
}
