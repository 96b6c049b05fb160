package controller

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

func TestPlanAlterPartition(t *testing.T) {
	// Brokers 1-4; orders-0 has replicas [1 2 3], isr [1 2], leader 1 at
	// leader epoch 3 and partition epoch 5.
	base := apply(t, clusterImage(t, 4),
		&metadata.TopicRecord{Name: "orders", ID: idOrders},
		&metadata.PartitionRecord{TopicID: idOrders, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 5})
	req := func(mutate func(*AlterPartitionRequest)) AlterPartitionRequest {
		r := AlterPartitionRequest{BrokerID: 1, BrokerEpoch: 1, TopicID: idOrders, LeaderEpoch: 3, PartitionEpoch: 5, NewISR: []int32{1, 2, 3}}
		if mutate != nil {
			mutate(&r)
		}
		return r
	}
	withISR := func(isr ...int32) func(*AlterPartitionRequest) {
		return func(r *AlterPartitionRequest) { r.NewISR = isr }
	}
	// full: the same with isr [1 2 3] at partition epoch 5.
	full := apply(t, clusterImage(t, 4),
		&metadata.TopicRecord{Name: "orders", ID: idOrders},
		&metadata.PartitionRecord{TopicID: idOrders, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 5})
	unregistered := apply(t, fence(t, full, 2), &metadata.UnregisterBrokerRecord{BrokerID: 2, Epoch: 1})
	tests := []struct {
		name    string
		img     *metadata.Image
		req     AlterPartitionRequest
		down    ShuttingDown
		wantErr error
		wantISR []int32 // on success
		noop    bool
		// wantLeader is the leader after a resignation (0: leader 1 stays).
		wantLeader int32
	}{
		{name: "expand", img: base, req: req(nil), wantISR: []int32{1, 2, 3}},
		{name: "shrink", img: base, req: req(withISR(1)), wantISR: []int32{1}},
		{name: "same set in another order changes nothing", img: base, req: req(withISR(2, 1)), wantISR: []int32{1, 2}, noop: true},
		{name: "stale leader epoch", img: base, req: req(func(r *AlterPartitionRequest) { r.LeaderEpoch = 2 }), wantErr: metadata.ErrFencedLeaderEpoch},
		// KIP-903: the broker epochs the leader saw its followers fetch with.
		{name: "expand with the added broker's current epoch", img: base, req: req(func(r *AlterPartitionRequest) { r.NewISRBrokerEpochs = []int64{1, 1, 1} }), wantISR: []int32{1, 2, 3}},
		{name: "expand with epochs unchecked (-1)", img: base, req: req(func(r *AlterPartitionRequest) { r.NewISRBrokerEpochs = []int64{-1, -1, -1} }), wantISR: []int32{1, 2, 3}},
		{name: "expand with a stale epoch of the added broker", img: base, req: req(func(r *AlterPartitionRequest) { r.NewISRBrokerEpochs = []int64{1, 1, 7} }), wantErr: metadata.ErrIneligibleReplica},
		// Kafka checks every member of the new ISR, kept ones too, not only
		// those the change adds.
		{name: "a kept member at a stale epoch", img: base, req: req(func(r *AlterPartitionRequest) { r.NewISR, r.NewISRBrokerEpochs = []int32{1, 2}, []int64{1, 7} }), wantErr: metadata.ErrIneligibleReplica},
		{name: "the leader at a stale epoch in its own isr", img: base, req: req(func(r *AlterPartitionRequest) { r.NewISRBrokerEpochs = []int64{7, 1, 1} }), wantErr: metadata.ErrIneligibleReplica},
		{name: "an epoch below -1 is checked, not skipped", img: base, req: req(func(r *AlterPartitionRequest) { r.NewISRBrokerEpochs = []int64{1, -2, 1} }), wantErr: metadata.ErrIneligibleReplica},
		{name: "shrink keeping a fenced member", img: fence(t, full, 2), req: req(withISR(1, 2)), wantErr: metadata.ErrIneligibleReplica},
		{name: "shrink keeping a member in controlled shutdown", img: full, req: req(withISR(1, 2)), down: ShuttingDown{2: true}, wantErr: metadata.ErrIneligibleReplica},
		{name: "shrink keeping an unregistered member", img: unregistered, req: req(withISR(1, 2)), wantErr: metadata.ErrIneligibleReplica},
		{name: "shrink dropping the ineligible member", img: fence(t, full, 3), req: req(withISR(1, 2)), wantISR: []int32{1, 2}},
		{name: "expand while a kept member is fenced", img: fence(t, base, 2), req: req(nil), wantErr: metadata.ErrIneligibleReplica},
		{name: "a fenced leader", img: fence(t, base, 1), req: req(nil), wantErr: metadata.ErrIneligibleReplica},
		// Strata keeps a broker in controlled shutdown leading what it could
		// not hand off; growing the ISR is how the hand-off becomes possible.
		{name: "a leader in controlled shutdown may grow its isr", img: base, req: req(nil), down: ShuttingDown{1: true}, wantISR: []int32{1, 2, 3}},
		// Epochs newer than the image's: the leader has seen metadata this
		// controller has not (NOT_CONTROLLER), checked before anything else.
		{name: "newer leader epoch", img: base, req: req(func(r *AlterPartitionRequest) { r.LeaderEpoch = 4 }), wantErr: ErrNotController},
		{name: "newer partition epoch", img: base, req: req(func(r *AlterPartitionRequest) { r.PartitionEpoch = 6 }), wantErr: ErrNotController},
		{name: "newer partition epoch from a follower", img: base, req: req(func(r *AlterPartitionRequest) { r.BrokerID, r.PartitionEpoch = 2, 6 }), wantErr: ErrNotController},
		{name: "stale leader epoch from a follower", img: base, req: req(func(r *AlterPartitionRequest) { r.BrokerID, r.LeaderEpoch = 2, 2 }), wantErr: metadata.ErrFencedLeaderEpoch},
		{name: "stale partition epoch", img: base, req: req(func(r *AlterPartitionRequest) { r.PartitionEpoch = 4 }), wantErr: metadata.ErrStalePartitionEpoch},
		{name: "stale partition epoch from a follower", img: base, req: req(func(r *AlterPartitionRequest) { r.BrokerID, r.PartitionEpoch = 2, 4 }), wantErr: metadata.ErrInvalidRequest},
		{name: "not the leader", img: base, req: req(func(r *AlterPartitionRequest) { r.BrokerID = 2 }), wantErr: metadata.ErrInvalidRequest},
		{name: "stale broker epoch", img: base, req: req(func(r *AlterPartitionRequest) { r.BrokerEpoch = 0 }), wantErr: metadata.ErrStaleBrokerEpoch},
		{name: "unknown broker", img: base, req: req(func(r *AlterPartitionRequest) { r.BrokerID = 9 }), wantErr: metadata.ErrStaleBrokerEpoch},
		{name: "unknown broker and unknown topic", img: base, req: req(func(r *AlterPartitionRequest) { r.BrokerID, r.TopicID = 9, idLogs }), wantErr: metadata.ErrStaleBrokerEpoch},
		{name: "unknown topic id", img: base, req: req(func(r *AlterPartitionRequest) { r.TopicID = idLogs }), wantErr: metadata.ErrUnknownTopicID},
		{name: "unknown partition", img: base, req: req(func(r *AlterPartitionRequest) { r.Partition = 1 }), wantErr: metadata.ErrUnknownTopic},
		{name: "negative partition", img: base, req: req(func(r *AlterPartitionRequest) { r.Partition = -1 }), wantErr: metadata.ErrUnknownTopic},
		{name: "leader resigns", img: base, req: req(withISR(2)), wantISR: []int32{2}, wantLeader: 2},
		{name: "leader resigns and adds at once", img: base, req: req(withISR(2, 3)), wantErr: metadata.ErrInvalidRequest},
		{name: "leader resigns to nobody eligible", img: base, req: req(withISR(2)), down: ShuttingDown{2: true}, wantErr: metadata.ErrIneligibleReplica},
		{name: "isr with a non-replica", img: base, req: req(withISR(1, 4)), wantErr: metadata.ErrInvalidRequest},
		{name: "isr with a repeat", img: base, req: req(withISR(1, 2, 2)), wantErr: metadata.ErrInvalidRequest},
		{name: "empty isr", img: base, req: req(withISR()), wantErr: metadata.ErrInvalidRequest},
		{name: "adding a fenced broker", img: fence(t, base, 3), req: req(nil), wantErr: metadata.ErrIneligibleReplica},
		{name: "adding a broker in controlled shutdown", img: base, req: req(nil), down: ShuttingDown{3: true}, wantErr: metadata.ErrIneligibleReplica},
		{name: "expand while a kept member is in controlled shutdown", img: base, req: req(nil), down: ShuttingDown{2: true}, wantErr: metadata.ErrIneligibleReplica},
		{name: "leader resigns to a member in controlled shutdown", img: full, req: req(withISR(2, 3)), down: ShuttingDown{3: true}, wantErr: metadata.ErrIneligibleReplica},
		// The metadata's mark counts as the memory does: a controller that
		// took over knows a broker in controlled shutdown before it heartbeats.
		{name: "adding a broker marked in controlled shutdown", img: markShutdown(t, base, 3), req: req(nil), wantErr: metadata.ErrIneligibleReplica},
		{name: "a leader marked in controlled shutdown may grow its isr", img: markShutdown(t, base, 1), req: req(nil), wantISR: []int32{1, 2, 3}},
		{name: "leader resigns to a member marked in controlled shutdown", img: markShutdown(t, full, 3), req: req(withISR(2, 3)), wantErr: metadata.ErrIneligibleReplica},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, p, err := PlanAlterPartition(tt.img, tt.req, tt.down)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if recs != nil || p != nil {
					t.Errorf("failed plan returned %v, %+v", recs, p)
				}
				return
			}
			if tt.noop != (len(recs) == 0) {
				t.Errorf("records = %v, want none: %v", recs, tt.noop)
			}
			wantEpoch := int32(6)
			if tt.noop {
				wantEpoch = 5
			}
			wantLeader, wantLeaderEpoch := int32(1), int32(3)
			if tt.wantLeader != 0 {
				wantLeader, wantLeaderEpoch = tt.wantLeader, 4
			}
			if p.Leader != wantLeader || p.LeaderEpoch != wantLeaderEpoch || p.PartitionEpoch != wantEpoch || !slices.Equal(p.ISR, tt.wantISR) {
				t.Errorf("partition = %+v, want leader %d, leader epoch %d, partition epoch %d, isr %v", p, wantLeader, wantLeaderEpoch, wantEpoch, tt.wantISR)
			}
			// The returned partition is what applying the records gives.
			applied := apply(t, tt.img, recs...).Partition("orders", 0)
			if applied.PartitionEpoch != p.PartitionEpoch || !slices.Equal(applied.ISR, p.ISR) || applied.Leader != p.Leader || applied.LeaderEpoch != p.LeaderEpoch {
				t.Errorf("applied %+v, returned %+v", applied, p)
			}
		})
	}
}

// TestPlanAlterPartitions: the changes of one request are planned as one
// batch, each on its own: refused ones leave the others to apply, a partition
// named twice is refused the second time, and a change that only applying
// can refuse (a partition epoch at its limit) sinks no other.
func TestPlanAlterPartitions(t *testing.T) {
	// orders-0..3: replicas [1 2 3], isr [1 2], leader 1 at leader epoch 3;
	// partition epoch 5, but orders-3's is at its limit.
	recs := []metadata.Record{&metadata.TopicRecord{Name: "orders", ID: idOrders}}
	for i := range int32(4) {
		epoch := int32(5)
		if i == 3 {
			epoch = math.MaxInt32
		}
		recs = append(recs, &metadata.PartitionRecord{TopicID: idOrders, Partition: i, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: epoch})
	}
	base := apply(t, clusterImage(t, 3), recs...)
	change := func(partition, partitionEpoch int32, isr ...int32) AlterPartitionRequest {
		return AlterPartitionRequest{BrokerID: 1, BrokerEpoch: 1, TopicID: idOrders, Partition: partition, LeaderEpoch: 3, PartitionEpoch: partitionEpoch, NewISR: isr}
	}
	tests := []struct {
		name string
		reqs []AlterPartitionRequest
		want []error   // per request
		isr  [][]int32 // orders-0..3 once the batch applies
	}{
		{
			name: "independent changes",
			reqs: []AlterPartitionRequest{change(0, 5, 1, 2, 3), change(1, 4, 1, 2, 3), change(2, 5, 1), change(0, 5, 1)},
			want: []error{nil, metadata.ErrStalePartitionEpoch, nil, metadata.ErrInvalidRequest},
			isr:  [][]int32{{1, 2, 3}, {1, 2}, {1}, {1, 2}},
		},
		{
			name: "a change applying refuses",
			reqs: []AlterPartitionRequest{change(0, 5, 1, 2, 3), change(3, math.MaxInt32, 1, 2, 3), change(2, 5, 1)},
			want: []error{nil, metadata.ErrStalePartitionEpoch, nil},
			isr:  [][]int32{{1, 2, 3}, {1, 2}, {1}, {1, 2}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, results, err := PlanAlterPartitions(base, tt.reqs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != len(tt.reqs) {
				t.Fatalf("%d results for %d changes", len(results), len(tt.reqs))
			}
			next, err := metadata.ApplyAll(base, recs)
			if err != nil {
				t.Fatalf("the planned batch does not apply: %v", err)
			}
			for i, res := range results {
				if !errors.Is(res.Err, tt.want[i]) {
					t.Errorf("change %d: err = %v, want %v", i, res.Err, tt.want[i])
				}
				if res.Err != nil {
					continue
				}
				if got := next.Partition("orders", tt.reqs[i].Partition); !reflect.DeepEqual(res.Partition, got) {
					t.Errorf("change %d: answered %+v, the image holds %+v", i, res.Partition, got)
				}
			}
			for i, want := range tt.isr {
				if got := next.Partition("orders", int32(i)).ISR; !slices.Equal(got, want) {
					t.Errorf("orders-%d: ISR %v, want %v", i, got, want)
				}
			}
		})
	}
}
