package controller

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

// reassigning is orders-0 of brokers 1-5 with replicas [1 2 3] (leader 1,
// leader epoch 3), reassigned by PlanAlterReassignments to target.
func reassigning(t *testing.T, target ...int32) *metadata.Image {
	t.Helper()
	img := withTopic(t, clusterImage(t, 5), "orders", idOrders, nil, []int32{1, 2, 3})
	img = apply(t, img, &metadata.PartitionChangeRecord{TopicID: idOrders, Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2, 3}})
	recs, errs := PlanAlterReassignments(img, []Reassignment{{Topic: "orders", Replicas: target}}, nil)
	if errs[0] != nil {
		t.Fatalf("reassigning to %v: %v", target, errs[0])
	}
	return apply(t, img, recs...)
}

func partitionString(p *metadata.Partition) string {
	return fmt.Sprintf("replicas %v adding %v removing %v isr %v leader %d epoch %d",
		p.Replicas, p.Adding, p.Removing, p.ISR, p.Leader, p.LeaderEpoch)
}

func TestPlanAlterReassignments(t *testing.T) {
	tests := []struct {
		name string
		img  func(t *testing.T) *metadata.Image
		req  Reassignment
		// want is the partition afterwards (partitionString), or wantErr.
		want    string
		wantErr error
	}{
		{
			name: "start: adding replicas follow, leader and isr stay",
			img:  func(t *testing.T) *metadata.Image { return reassigning(t, 1, 2, 3) },
			req:  Reassignment{Topic: "orders", Replicas: []int32{4, 5, 2}},
			want: "replicas [4 5 2 1 3] adding [4 5] removing [1 3] isr [1 2 3] leader 1 epoch 3",
		},
		{
			name: "a target inside the isr completes at once; the removed leader hands over",
			img:  func(t *testing.T) *metadata.Image { return reassigning(t, 1, 2, 3) },
			req:  Reassignment{Topic: "orders", Replicas: []int32{3, 2}},
			want: "replicas [3 2] adding [] removing [] isr [2 3] leader 3 epoch 4",
		},
		{
			name: "a new order only changes the preferred leader",
			img:  func(t *testing.T) *metadata.Image { return reassigning(t, 1, 2, 3) },
			req:  Reassignment{Topic: "orders", Replicas: []int32{2, 3, 1}},
			want: "replicas [2 3 1] adding [] removing [] isr [1 2 3] leader 1 epoch 3",
		},
		{
			// A replica leaving fences its fetches: the leader epoch moves on
			// with the leader unchanged.
			name: "removing a replica moves the leader epoch",
			img:  func(t *testing.T) *metadata.Image { return reassigning(t, 1, 2, 3) },
			req:  Reassignment{Topic: "orders", Replicas: []int32{1, 2}},
			want: "replicas [1 2] adding [] removing [] isr [1 2] leader 1 epoch 4",
		},
		{
			name: "cancel goes back to the original replicas, removing the added ones",
			img:  func(t *testing.T) *metadata.Image { return reassigning(t, 4, 5, 2) },
			req:  Reassignment{Topic: "orders"},
			want: "replicas [2 1 3] adding [] removing [] isr [1 2 3] leader 1 epoch 4",
		},
		{
			name: "a new target replaces the ongoing one, measured against the current replicas",
			img:  func(t *testing.T) *metadata.Image { return reassigning(t, 4, 5, 2) },
			req:  Reassignment{Topic: "orders", Replicas: []int32{4, 1, 2}},
			want: "replicas [4 1 2 5 3] adding [] removing [5 3] isr [1 2 3] leader 1 epoch 3",
		},
		{
			name:    "cancel without a reassignment",
			img:     func(t *testing.T) *metadata.Image { return reassigning(t, 1, 2, 3) },
			req:     Reassignment{Topic: "orders"},
			wantErr: metadata.ErrNoReassignmentInProgress,
		},
		{
			name:    "unknown broker",
			img:     func(t *testing.T) *metadata.Image { return reassigning(t, 1, 2, 3) },
			req:     Reassignment{Topic: "orders", Replicas: []int32{1, 9}},
			wantErr: metadata.ErrInvalidReplicaAssignment,
		},
		{
			name:    "repeated broker",
			img:     func(t *testing.T) *metadata.Image { return reassigning(t, 1, 2, 3) },
			req:     Reassignment{Topic: "orders", Replicas: []int32{4, 4}},
			wantErr: metadata.ErrInvalidReplicaAssignment,
		},
		{
			name:    "empty target",
			img:     func(t *testing.T) *metadata.Image { return reassigning(t, 1, 2, 3) },
			req:     Reassignment{Topic: "orders", Replicas: []int32{}},
			wantErr: metadata.ErrInvalidReplicaAssignment,
		},
		{
			name:    "replication factor kept",
			img:     func(t *testing.T) *metadata.Image { return reassigning(t, 1, 2, 3) },
			req:     Reassignment{Topic: "orders", Replicas: []int32{4, 5}, KeepReplicationFactor: true},
			wantErr: metadata.ErrInvalidReplicationFactor,
		},
		{
			name:    "unknown partition",
			img:     func(t *testing.T) *metadata.Image { return reassigning(t, 1, 2, 3) },
			req:     Reassignment{Topic: "orders", Partition: 1, Replicas: []int32{1}},
			wantErr: metadata.ErrUnknownTopic,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := tt.img(t)
			recs, errs := PlanAlterReassignments(img, []Reassignment{tt.req}, nil)
			if tt.wantErr != nil {
				if !errors.Is(errs[0], tt.wantErr) || len(recs) != 0 {
					t.Fatalf("err %v with %d records, want %v and none", errs[0], len(recs), tt.wantErr)
				}
				return
			}
			if errs[0] != nil {
				t.Fatal(errs[0])
			}
			got := partitionString(apply(t, img, recs...).Partition("orders", 0))
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestReassignmentCompletesWhenISRCatchesUp: the adding replicas join the ISR
// one AlterPartition at a time; the one that completes the target also ends
// the reassignment in the same batch, and the removed leader hands over.
func TestReassignmentCompletesWhenISRCatchesUp(t *testing.T) {
	img := reassigning(t, 4, 5, 2)
	alter := func(isr ...int32) (*metadata.Partition, int) {
		p := img.Partition("orders", 0)
		recs, np, err := PlanAlterPartition(img, AlterPartitionRequest{BrokerID: p.Leader, BrokerEpoch: 1, TopicID: idOrders,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: isr}, nil)
		if errors.Is(err, metadata.ErrNewLeaderElected) && np.Leader != p.Leader {
			err = nil // applied: the completion moved the leadership (TestAlterPartitionCompletingReassignmentElectsNewLeader)
		}
		if err != nil {
			t.Fatalf("AlterPartition %v: %v", isr, err)
		}
		img = apply(t, img, recs...)
		if got, want := partitionString(np), partitionString(img.Partition("orders", 0)); got != want {
			t.Fatalf("returned %s, applied %s", got, want)
		}
		return np, len(recs)
	}
	if p, n := alter(1, 2, 3, 4); n != 1 || !p.Reassigning() {
		t.Fatalf("after 4 joins: %d records, %s", n, partitionString(p))
	}
	p, n := alter(1, 2, 3, 4, 5)
	if n != 2 || p.Reassigning() || !slices.Equal(p.Replicas, []int32{4, 5, 2}) || p.Leader != 4 || p.LeaderEpoch != 4 ||
		!slices.Equal(p.ISR, []int32{2, 4, 5}) {
		t.Fatalf("after 5 joins: %d records, %s", n, partitionString(p))
	}
	if got := ListReassignments(img, nil); len(got) != 0 {
		t.Fatalf("still listed: %+v", got)
	}
}

func TestListReassignments(t *testing.T) {
	img := reassigning(t, 4, 5, 2)
	img = apply(t, img, &metadata.TopicRecord{Name: "other", ID: metadata.UUID{9}},
		&metadata.PartitionRecord{TopicID: metadata.UUID{9}, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
	for _, tt := range []struct {
		topics map[string][]int32
		want   int
	}{
		{nil, 1},
		{map[string][]int32{"orders": nil}, 1},
		{map[string][]int32{"orders": {0}}, 1},
		{map[string][]int32{"orders": {1}}, 0},
		{map[string][]int32{"other": nil, "nope": nil}, 0},
	} {
		got := ListReassignments(img, tt.topics)
		if len(got) != tt.want {
			t.Errorf("ListReassignments(%v) = %+v, want %d", tt.topics, got, tt.want)
		}
	}
	got := ListReassignments(img, nil)[0]
	if !slices.Equal(got.Replicas, []int32{4, 5, 2, 1, 3}) || !slices.Equal(got.Adding, []int32{4, 5}) || !slices.Equal(got.Removing, []int32{1, 3}) {
		t.Errorf("listed %+v", got)
	}
}

// TestUncleanElectionCompletesReassignment: an unclean election makes the new
// leader the whole ISR. When that leader is the whole target of a
// reassignment, the ISR now holds the target, and the same batch must
// complete the reassignment, as PlanAlterReassignments promises ("When the
// ISR holds the whole target, the same batch completes the reassignment").
// Before the fix the elections left it in progress for good: the leader sends
// no AlterPartition for an ISR that does not change (and one it sent would
// change nothing), so the reassignment completed only if a removed replica
// came back and rejoined the ISR, or the operator submitted it again.
// Found by TestPlanSequence.
func TestUncleanElectionCompletesReassignment(t *testing.T) {
	unclean := map[string]string{"unclean.leader.election.enable": "true"}
	// orders-0 of brokers 1-3, replicas [1 2 3] with isr [1] led by
	// leader, being reassigned to [3] alone (3 not in the isr).
	state := func(t *testing.T, leader int32, fenced ...int32) *metadata.Image {
		img := withTopic(t, clusterImage(t, 3), "orders", idOrders, unclean, []int32{1, 2, 3})
		img = apply(t, img, &metadata.PartitionChangeRecord{TopicID: idOrders, BasePartitionEpoch: 0,
			Leader: leader, LeaderEpoch: 1, ISR: []int32{1}})
		img = apply(t, img, &metadata.ReassignmentRecord{TopicID: idOrders, BasePartitionEpoch: 1,
			Replicas: []int32{3, 1, 2}, Removing: []int32{1, 2}, ISR: []int32{1}, Leader: leader, LeaderEpoch: 1})
		return fence(t, img, fenced...)
	}
	tests := []struct {
		name string
		// plan returns the image before and the records the plan returns.
		plan func(t *testing.T) (*metadata.Image, []metadata.Record)
	}{
		{"fencing the last isr member", func(t *testing.T) (*metadata.Image, []metadata.Record) {
			img := state(t, 1)
			recs, err := PlanFenceBroker(img, 1, img.Broker(1).Epoch, nil)
			if err != nil {
				t.Fatal(err)
			}
			return img, recs
		}},
		{"unfencing a target replica", func(t *testing.T) (*metadata.Image, []metadata.Record) {
			img := state(t, metadata.NoLeader, 1, 3)
			recs, err := PlanUnfenceBroker(img, 3, img.Broker(3).Epoch, nil)
			if err != nil {
				t.Fatal(err)
			}
			return img, recs
		}},
		{"the unclean election duty", func(t *testing.T) (*metadata.Image, []metadata.Record) {
			img := state(t, metadata.NoLeader, 1)
			return img, PlanUncleanElections(img, nil)
		}},
		{"an unclean ElectLeaders", func(t *testing.T) (*metadata.Image, []metadata.Record) {
			img := state(t, metadata.NoLeader, 1)
			recs, results := PlanElectLeaders(img, nil, ElectUnclean, nil)
			if len(results) != 1 || results[0].Err != nil {
				t.Fatalf("results %+v", results)
			}
			return img, recs
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, recs := tt.plan(t)
			p := apply(t, img, recs...).Partition("orders", 0)
			// Epoch 3: the election moves it, and so does the completion,
			// which removes replicas 1 and 2.
			if got, want := partitionString(p), "replicas [3] adding [] removing [] isr [3] leader 3 epoch 3"; got != want {
				t.Errorf("after the election: %s, want %s", got, want)
			}
		})
	}
}

// TestCancelElectsLeaderOfLeaderlessPartition: cancelling a reassignment that
// only removes replicas, of a partition with no leader but an eligible ISR
// member, elects that member at the next leader epoch. It used to keep the
// epoch, the record was refused when applied (FENCED_LEADER_EPOCH) and the
// cancel failed. Such a partition arises when its last eligible ISR member
// was in controlled shutdown as its leader was fenced, and the active
// controller then changed (the shutting-down set is in memory only).
func TestCancelElectsLeaderOfLeaderlessPartition(t *testing.T) {
	img := withTopic(t, clusterImage(t, 4), "orders", idOrders, nil, []int32{1, 2, 3})
	// ISR [1 2]: 3 is out of sync. Reassign to [1 3]: removing 2, adding
	// nothing; pending until 3 rejoins the ISR.
	img = apply(t, img, &metadata.PartitionChangeRecord{TopicID: idOrders, Leader: 1, LeaderEpoch: 0, ISR: []int32{1, 2}})
	recs, errs := PlanAlterReassignments(img, []Reassignment{{Topic: "orders", Replicas: []int32{1, 3}}}, nil)
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	img = apply(t, img, recs...)
	if p := img.Partition("orders", 0); !p.Reassigning() {
		t.Fatalf("reassignment completed at once: %s", partitionString(p))
	}
	// Broker 2 is in controlled shutdown when leader 1 is fenced: the
	// partition has no leader and ISR [2].
	recs, err := PlanFenceBroker(img, 1, 1, ShuttingDown{2: true})
	if err != nil {
		t.Fatal(err)
	}
	img = apply(t, img, recs...)
	p := img.Partition("orders", 0)
	if p.Leader != metadata.NoLeader || !slices.Equal(p.ISR, []int32{2}) {
		t.Fatalf("after fencing 1: %s", partitionString(p))
	}
	// A new active controller (no broker in controlled shutdown) cancels.
	recs, errs = PlanAlterReassignments(img, []Reassignment{{Topic: "orders"}}, nil)
	if errs[0] != nil {
		t.Fatalf("cancel: %v (records %s)", errs[0], fmtRecords(recs))
	}
	img = apply(t, img, recs...)
	if p := img.Partition("orders", 0); p.Leader != 2 || p.LeaderEpoch != 2 || p.Reassigning() || !slices.Equal(slices.Sorted(slices.Values(p.Replicas)), []int32{1, 2, 3}) {
		t.Fatalf("after the cancel: %s, want replicas 1, 2 and 3 led by 2 at epoch 2", partitionString(p))
	}
}

// TestAlterPartitionCompletingReassignmentElectsNewLeader: an AlterPartition
// whose ISR completes a reassignment that removes its sender, the leader, is
// applied and answered NEW_LEADER_ELECTED, as Kafka's controller answers it:
// the sender must not take the answer for an ISR it still leads with. One
// that leaves the sender leading is answered with the partition.
func TestAlterPartitionCompletingReassignmentElectsNewLeader(t *testing.T) {
	tests := []struct {
		name    string
		target  []int32
		isr     []int32
		want    string // the partition afterwards (partitionString)
		wantErr error
	}{
		{"leader removed", []int32{4, 5, 2}, []int32{1, 2, 3, 4, 5},
			"replicas [4 5 2] adding [] removing [] isr [2 4 5] leader 4 epoch 4", metadata.ErrNewLeaderElected},
		{"leader kept", []int32{1, 4}, []int32{1, 2, 3, 4},
			"replicas [1 4] adding [] removing [] isr [1 4] leader 1 epoch 4", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := reassigning(t, tt.target...)
			p := img.Partition("orders", 0)
			recs, res, err := PlanAlterPartitions(img, []AlterPartitionRequest{{BrokerID: 1, BrokerEpoch: 1, TopicID: idOrders,
				LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: tt.isr}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(res[0].Err, tt.wantErr) || (tt.wantErr == nil) != (res[0].Err == nil) {
				t.Fatalf("answered %v, want %v", res[0].Err, tt.wantErr)
			}
			if got := partitionString(apply(t, img, recs...).Partition("orders", 0)); got != tt.want {
				t.Errorf("applied %s\nwant    %s", got, tt.want)
			}
		})
	}
}

// TestCancelWithNoOriginalReplicaInSync: a move [1 2] -> [3 4] whose original
// replicas have all left the ISR (3 alone in it, leading). Cancelling it
// needs an unclean election of an original replica, as Kafka's
// PartitionReassignmentRevert: refused with INVALID_REPLICA_ASSIGNMENT and
// Kafka's message unless the topic allows unclean elections, in which case
// the first original replica becomes the ISR and leads (a later one if it is
// not live).
func TestCancelWithNoOriginalReplicaInSync(t *testing.T) {
	unclean := map[string]string{"unclean.leader.election.enable": "true"}
	for _, tc := range []struct {
		name    string
		configs map[string]string
		down    ShuttingDown
		want    string // partitionString, or the error's text
	}{
		{"unclean elections off", nil, nil,
			"Unable to revert partition assignment for orders:0 because it would require an unclean leader election."},
		{"unclean elections on", unclean, nil,
			"replicas [1 2] adding [] removing [] isr [1] leader 1 epoch 2"},
		{"unclean elections on, the first original replica shutting down", unclean, ShuttingDown{1: true},
			"replicas [1 2] adding [] removing [] isr [2] leader 2 epoch 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := withTopic(t, clusterImage(t, 4), "orders", idOrders, tc.configs, []int32{1, 2})
			recs, errs := PlanAlterReassignments(img, []Reassignment{{Topic: "orders", Replicas: []int32{3, 4}}}, nil)
			if errs[0] != nil {
				t.Fatal(errs[0])
			}
			img = apply(t, img, recs...)
			img = apply(t, img, &metadata.PartitionChangeRecord{TopicID: idOrders, BasePartitionEpoch: 1, Leader: 3, LeaderEpoch: 1, ISR: []int32{3}})
			recs, errs = PlanAlterReassignments(img, []Reassignment{{Topic: "orders"}}, tc.down)
			var got string
			if errs[0] != nil {
				got = errs[0].Error()
				if !errors.Is(errs[0], metadata.ErrInvalidReplicaAssignment) {
					t.Errorf("cancel: %v, want INVALID_REPLICA_ASSIGNMENT", errs[0])
				}
			} else {
				got = partitionString(apply(t, img, recs...).Partition("orders", 0))
			}
			if got != tc.want {
				t.Errorf("cancel: %s\nwant %s", got, tc.want)
			}
		})
	}
}
