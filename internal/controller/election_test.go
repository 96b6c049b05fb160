package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

func TestPlanElectLeaders(t *testing.T) {
	// a-0: preferred 1 in the isr, 2 leads. a-1: preferred 2 leads. a-2:
	// preferred 3 out of the isr. b-0: preferred 1 in the isr, 2 leads.
	img := withTopic(t, clusterImage(t, 3), "a", idOrders, nil, []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2})
	img = withTopic(t, img, "b", idLogs, nil, []int32{1, 2})
	img = apply(t, img,
		&metadata.PartitionChangeRecord{TopicID: idOrders, Partition: 0, Leader: 2, LeaderEpoch: 1, ISR: []int32{1, 2, 3}},
		&metadata.PartitionChangeRecord{TopicID: idOrders, Partition: 2, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2}},
		&metadata.PartitionChangeRecord{TopicID: idLogs, Partition: 0, Leader: 2, LeaderEpoch: 1, ISR: []int32{1, 2}})
	ref := func(topic string, p int32) TopicPartitionRef { return TopicPartitionRef{Topic: topic, Partition: p} }
	elected := []partState{{"a", 0, 1, 2, []int32{1, 2, 3}}, {"b", 0, 1, 2, []int32{1, 2}}}
	unchanged := []partState{{"a", 0, 2, 1, []int32{1, 2, 3}}, {"b", 0, 2, 1, []int32{1, 2}}}
	tests := []struct {
		name  string
		img   *metadata.Image
		parts []TopicPartitionRef
		down  ShuttingDown
		want  []electResult
		after []partState
	}{
		{
			name:  "named partitions, a repeat and an unknown one",
			img:   img,
			parts: []TopicPartitionRef{ref("a", 0), ref("a", 1), ref("a", 2), ref("b", 0), ref("c", 0), ref("a", 7), ref("a", 0)},
			want: []electResult{
				{ref("a", 0), nil}, {ref("a", 1), metadata.ErrElectionNotNeeded},
				{ref("a", 2), metadata.ErrPreferredLeaderNotAvailable}, {ref("b", 0), nil},
				{ref("c", 0), metadata.ErrUnknownTopic}, {ref("a", 7), metadata.ErrUnknownTopic},
				{ref("a", 0), metadata.ErrElectionNotNeeded},
			},
			after: elected,
		},
		{
			name:  "the preferred replica is shutting down",
			img:   img,
			parts: []TopicPartitionRef{ref("a", 0), ref("b", 0)},
			down:  ShuttingDown{1: true},
			want:  []electResult{{ref("a", 0), metadata.ErrPreferredLeaderNotAvailable}, {ref("b", 0), metadata.ErrPreferredLeaderNotAvailable}},
			after: unchanged,
		},
		{
			name:  "the preferred replica is marked in controlled shutdown",
			img:   markShutdown(t, img, 1),
			parts: []TopicPartitionRef{ref("a", 0)},
			want:  []electResult{{ref("a", 0), metadata.ErrPreferredLeaderNotAvailable}},
			after: unchanged,
		},
		{
			name:  "the preferred replica is fenced",
			img:   apply(t, img, &metadata.FenceBrokerRecord{BrokerID: 1, Epoch: 1}),
			parts: []TopicPartitionRef{ref("a", 0)},
			want:  []electResult{{ref("a", 0), metadata.ErrPreferredLeaderNotAvailable}},
			after: unchanged,
		},
		{
			name: "every partition, topic by topic",
			img:  img,
			want: []electResult{{ref("a", 0), nil}, {ref("a", 1), metadata.ErrElectionNotNeeded},
				{ref("a", 2), metadata.ErrPreferredLeaderNotAvailable}, {ref("b", 0), nil}},
			after: elected,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, results := PlanElectLeaders(tt.img, tt.parts, ElectPreferred, tt.down)
			checkElectResults(t, results, tt.want)
			checkPartitions(t, apply(t, tt.img, recs...), tt.after)
		})
	}
}

func TestChangesForShutdown(t *testing.T) {
	// Partitions: led by 1 with others in the isr; led by 1 alone; led by 2
	// with 1 following; leaderless with isr [1 3]; 1 the only isr member of a
	// leaderless partition; led by 1 with only a fenced broker in the isr.
	img := withTopic(t, clusterImage(t, 4), "t", idOrders, nil,
		[]int32{1, 2, 3}, []int32{1}, []int32{2, 1}, []int32{3, 1}, []int32{1, 3}, []int32{1, 4})
	img = apply(t, img,
		&metadata.PartitionChangeRecord{TopicID: idOrders, Partition: 3, Leader: metadata.NoLeader, LeaderEpoch: 1, ISR: []int32{3, 1}},
		&metadata.PartitionChangeRecord{TopicID: idOrders, Partition: 4, Leader: metadata.NoLeader, LeaderEpoch: 1, ISR: []int32{1}},
		&metadata.FenceBrokerRecord{BrokerID: 4, Epoch: 1})
	img = apply(t, img, changesForShutdown(img, 1, ShuttingDown{1: true})...)
	checkPartitions(t, img, []partState{
		{"t", 0, 2, 1, []int32{2, 3}},
		{"t", 1, 1, 0, []int32{1}},
		{"t", 2, 2, 0, []int32{2}},
		{"t", 3, metadata.NoLeader, 1, []int32{3}},
		{"t", 4, metadata.NoLeader, 1, []int32{1}},
		{"t", 5, 1, 0, []int32{1, 4}},
	})
	if again := changesForShutdown(img, 1, ShuttingDown{1: true}); len(again) != 0 {
		t.Errorf("second hand-off = %v, want nothing", again)
	}
}

// uncleanImage: brokers 1-3, then 1 fenced. a-0 [1 2 3] lost its whole ISR
// [1]; a-1 [2 3] is led by 2; a-2 [1] has no other replica; b-0 [1 2] lost
// its ISR [1]. Only b enables unclean.leader.election.enable, after the fence.
func uncleanImage(t *testing.T) *metadata.Image {
	img := withTopic(t, clusterImage(t, 3), "a", idOrders, nil, []int32{1, 2, 3}, []int32{2, 3}, []int32{1})
	img = withTopic(t, img, "b", idLogs, nil, []int32{1, 2})
	img = apply(t, img,
		&metadata.PartitionChangeRecord{TopicID: idOrders, Partition: 0, Leader: 1, LeaderEpoch: 0, ISR: []int32{1}},
		&metadata.PartitionChangeRecord{TopicID: idLogs, Partition: 0, Leader: 1, LeaderEpoch: 0, ISR: []int32{1}})
	recs, err := PlanFenceBroker(img, 1, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	img = apply(t, img, recs...)
	return apply(t, img, &metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "b",
		Key: "unclean.leader.election.enable", Value: "true"})
}

func TestPlanElectLeadersUnclean(t *testing.T) {
	img := uncleanImage(t)
	if p := img.Partition("a", 0); p.Leader != metadata.NoLeader || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("a-0 after fencing its only ISR member = %+v, want leaderless with isr [1]", p)
	}
	ref := func(topic string, p int32) TopicPartitionRef { return TopicPartitionRef{Topic: topic, Partition: p} }
	tests := []struct {
		name  string
		parts []TopicPartitionRef
		down  ShuttingDown
		want  []electResult
		after []partState
	}{
		{
			name:  "named partitions",
			parts: []TopicPartitionRef{ref("a", 0), ref("a", 1), ref("a", 2), ref("b", 0), ref("c", 0), ref("a", 7), ref("a", 0)},
			want: []electResult{
				{ref("a", 0), nil}, {ref("a", 1), metadata.ErrElectionNotNeeded},
				{ref("a", 2), metadata.ErrEligibleLeadersNotAvailable}, {ref("b", 0), nil},
				{ref("c", 0), metadata.ErrUnknownTopic}, {ref("a", 7), metadata.ErrUnknownTopic},
				{ref("a", 0), metadata.ErrElectionNotNeeded},
			},
			after: []partState{
				{"a", 0, 2, 2, []int32{2}},                 // outside the ISR: it becomes the ISR
				{"a", 1, 2, 0, []int32{2, 3}},              // untouched
				{"a", 2, metadata.NoLeader, 1, []int32{1}}, // nobody live
				{"b", 0, 2, 2, []int32{2}},
			},
		},
		{
			name:  "a replica in controlled shutdown is passed over",
			parts: []TopicPartitionRef{ref("a", 0)},
			down:  ShuttingDown{2: true},
			want:  []electResult{{ref("a", 0), nil}},
			after: []partState{{"a", 0, 3, 2, []int32{3}}},
		},
		{
			name: "every partition, topic by topic",
			want: []electResult{{ref("a", 0), nil}, {ref("a", 1), metadata.ErrElectionNotNeeded},
				{ref("a", 2), metadata.ErrEligibleLeadersNotAvailable}, {ref("b", 0), nil}},
			after: []partState{{"a", 0, 2, 2, []int32{2}}, {"b", 0, 2, 2, []int32{2}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, results := PlanElectLeaders(img, tt.parts, ElectUnclean, tt.down)
			checkElectResults(t, results, tt.want)
			checkPartitions(t, apply(t, img, recs...), tt.after)
		})
	}
}

func TestPlanUncleanElections(t *testing.T) {
	img := uncleanImage(t)
	// Only b allows unclean election: a-0 waits for an operator.
	recs := PlanUncleanElections(img, nil)
	after := apply(t, img, recs...)
	checkPartitions(t, after, []partState{
		{"a", 0, metadata.NoLeader, 1, []int32{1}},
		{"b", 0, 2, 2, []int32{2}},
	})
	if again := PlanUncleanElections(after, nil); len(again) != 0 {
		t.Errorf("second pass = %v, want nothing", again)
	}
	if got := PlanUncleanElections(img, ShuttingDown{2: true}); len(got) != 0 {
		t.Errorf("with b-0's only live replica shutting down = %v, want nothing", got)
	}
	// The cluster-wide broker default turns it on for a too.
	withDefault := apply(t, img, &metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, Key: "unclean.leader.election.enable", Value: "true"})
	checkPartitions(t, apply(t, withDefault, PlanUncleanElections(withDefault, nil)...), []partState{
		{"a", 0, 2, 2, []int32{2}},
		{"a", 2, metadata.NoLeader, 1, []int32{1}},
		{"b", 0, 2, 2, []int32{2}},
	})
}

// electResult is an ElectResult a test expects: the partition, and the error
// its Err wraps (nil for none).
type electResult struct {
	ref TopicPartitionRef
	err error
}

func checkElectResults(t *testing.T, got []ElectResult, want []electResult) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("results = %+v, want %d", got, len(want))
	}
	for i, r := range got {
		w := want[i]
		if r.Topic != w.ref.Topic || r.Partition != w.ref.Partition || !errors.Is(r.Err, w.err) || (w.err == nil) != (r.Err == nil) {
			t.Errorf("result %d = %+v, want %+v", i, r, w)
		}
	}
}
