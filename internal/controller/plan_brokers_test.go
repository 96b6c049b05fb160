package controller

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

func TestElectLeader(t *testing.T) {
	live := func(ids ...int32) func(int32) bool {
		return func(id int32) bool { return slices.Contains(ids, id) }
	}
	p := &metadata.Partition{Replicas: []int32{1, 2, 3}}
	tests := []struct {
		name       string
		isr        []int32
		live       func(int32) bool
		unclean    bool
		wantLeader int32
		wantISR    []int32
	}{
		{"preferred replica", []int32{1, 2, 3}, live(1, 2, 3), false, 1, []int32{1, 2, 3}},
		{"replica order, not isr order", []int32{3, 2}, live(1, 2, 3), false, 2, []int32{3, 2}},
		{"skip dead isr member", []int32{1, 2}, live(2, 3), false, 2, []int32{1, 2}},
		{"live replica outside isr is not clean", []int32{1}, live(2, 3), false, metadata.NoLeader, []int32{1}},
		{"unclean takes first live replica", []int32{1}, live(2, 3), true, 2, []int32{2}},
		{"unclean still prefers the isr", []int32{1, 3}, live(2, 3), true, 3, []int32{1, 3}},
		{"nobody live", []int32{1, 2}, live(), true, metadata.NoLeader, []int32{1, 2}},
	}
	for _, tt := range tests {
		leader, isr := ElectLeader(p, tt.isr, tt.live, tt.unclean)
		if leader != tt.wantLeader || !slices.Equal(isr, tt.wantISR) {
			t.Errorf("%s: ElectLeader = %d %v, want %d %v", tt.name, leader, isr, tt.wantLeader, tt.wantISR)
		}
	}
}

// fenceImage: brokers 1-3; "orders" partitions led by 1 ([1,2,3]), by 2 ([2,1]),
// and only on 1 ([1]); "unclean" allows unclean election, one partition [1,2]
// whose ISR is [1].
func fenceImage(t *testing.T) *metadata.Image {
	img := withTopic(t, clusterImage(t, 3), "orders", idOrders, nil, []int32{1, 2, 3}, []int32{2, 1}, []int32{1})
	img = withTopic(t, img, "unclean", idLogs, map[string]string{"unclean.leader.election.enable": "true"}, []int32{1, 2})
	return apply(t, img, &metadata.PartitionChangeRecord{TopicID: idLogs, Leader: 1, ISR: []int32{1}})
}

func TestPlanFenceAndUnfenceBroker(t *testing.T) {
	img := fenceImage(t)
	recs, err := PlanFenceBroker(img, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := recs[0].(*metadata.FenceBrokerRecord); !ok {
		t.Fatalf("first record %T", recs[0])
	}
	fenced := apply(t, img, recs...)
	tests := []struct {
		topic               string
		index               int32
		leader, leaderEpoch int32
		isr                 []int32
	}{
		{"orders", 0, 2, 1, []int32{2, 3}},              // led by 1: next in replica order
		{"orders", 1, 2, 0, []int32{2}},                 // led by 2: 1 just leaves the ISR
		{"orders", 2, metadata.NoLeader, 1, []int32{1}}, // 1 was the only replica: stays in the ISR
		{"unclean", 0, 2, 1, []int32{2}},                // unclean election to a replica outside the ISR
	}
	for _, tt := range tests {
		p := fenced.Partition(tt.topic, tt.index)
		if p.Leader != tt.leader || p.LeaderEpoch != tt.leaderEpoch || !slices.Equal(p.ISR, tt.isr) {
			t.Errorf("after fencing: %s-%d = leader %d epoch %d isr %v, want %d %d %v",
				tt.topic, tt.index, p.Leader, p.LeaderEpoch, p.ISR, tt.leader, tt.leaderEpoch, tt.isr)
		}
	}
	if again, err := PlanFenceBroker(fenced, 1, 1); err != nil || len(again) != 0 {
		t.Errorf("fencing again = %v, %v; want nothing", again, err)
	}

	recs, err = PlanUnfenceBroker(fenced, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	back := apply(t, fenced, recs...)
	if p := back.Partition("orders", 2); p.Leader != 1 || p.LeaderEpoch != 2 {
		t.Errorf("after unfencing, orders-2 = %+v; want leader 1 epoch 2", p)
	}
	if p := back.Partition("orders", 0); p.Leader != 2 {
		t.Errorf("unfencing moved a led partition: %+v", p)
	}
	if again, err := PlanUnfenceBroker(back, 1, 1); err != nil || len(again) != 0 {
		t.Errorf("unfencing a live broker = %v, %v; want nothing", again, err)
	}

	for _, tt := range []struct {
		id    int32
		epoch int64
		want  error
	}{{1, 2, metadata.ErrStaleBrokerEpoch}, {9, 1, metadata.ErrUnknownBroker}} {
		if _, err := PlanFenceBroker(img, tt.id, tt.epoch); !errors.Is(err, tt.want) {
			t.Errorf("PlanFenceBroker(%d, %d) = %v, want %v", tt.id, tt.epoch, err, tt.want)
		}
		if _, err := PlanUnfenceBroker(img, tt.id, tt.epoch); !errors.Is(err, tt.want) {
			t.Errorf("PlanUnfenceBroker(%d, %d) = %v, want %v", tt.id, tt.epoch, err, tt.want)
		}
	}
}

func TestPlanRegisterBroker(t *testing.T) {
	inc1, inc2 := metadata.UUID{1}, metadata.UUID{2}
	req := RegisterBroker{ID: 4, Incarnation: inc1, Host: "h", Port: 9092, Rack: "r"}
	img := clusterImage(t, 3)

	recs, epoch, err := PlanRegisterBroker(img, req)
	if err != nil || epoch != 1 || len(recs) != 1 {
		t.Fatalf("first registration = %v, %d, %v", recs, epoch, err)
	}
	img = apply(t, img, recs...)
	if b := img.Broker(4); b == nil || b.Fenced || b.Addr() != "h:9092" || b.Rack != "r" {
		t.Fatalf("broker = %+v", b)
	}

	recs, epoch, err = PlanRegisterBroker(img, req)
	if err != nil || epoch != 1 || len(recs) != 0 {
		t.Errorf("retry = %v, %d, %v; want no records, epoch 1", recs, epoch, err)
	}

	req.Incarnation = inc2
	recs, epoch, err = PlanRegisterBroker(img, req)
	if err != nil || epoch != 2 {
		t.Fatalf("restart = %d, %v", epoch, err)
	}
	img = apply(t, img, recs...)

	// A fenced broker re-registering becomes live and leads what it can.
	img = withTopic(t, img, "solo", idOrders, nil, []int32{4})
	recs, _ = PlanFenceBroker(img, 4, 2)
	img = apply(t, img, recs...)
	if p := img.Partition("solo", 0); p.Leader != metadata.NoLeader {
		t.Fatalf("fenced broker still leads: %+v", p)
	}
	recs, epoch, err = PlanRegisterBroker(img, req)
	if err != nil || epoch != 3 {
		t.Fatalf("re-registration of a fenced broker = %d, %v", epoch, err)
	}
	img = apply(t, img, recs...)
	if p := img.Partition("solo", 0); p.Leader != 4 || p.LeaderEpoch != 2 || !img.IsLive(4) {
		t.Errorf("after re-registration: %+v live=%v", p, img.IsLive(4))
	}

	for _, bad := range []RegisterBroker{{ID: -1, Host: "h", Port: 1}, {ID: 1, Port: 1}, {ID: 1, Host: "h"}, {ID: 1, Host: "h", Port: 65536}} {
		if _, _, err := PlanRegisterBroker(img, bad); !errors.Is(err, metadata.ErrInvalidRequest) {
			t.Errorf("PlanRegisterBroker(%+v) = %v, want ErrInvalidRequest", bad, err)
		}
	}
}

func TestPlanAllocateProducerIDs(t *testing.T) {
	img := clusterImage(t, 2)
	var next int64
	for range 3 {
		for _, b := range []int32{1, 2} {
			recs, block, err := PlanAllocateProducerIDs(img, b, 1)
			if err != nil {
				t.Fatal(err)
			}
			if block.First != next || block.Len != ProducerIDBlockSize {
				t.Fatalf("block = %+v, want first %d", block, next)
			}
			next += ProducerIDBlockSize
			img = apply(t, img, recs...)
			if img.NextProducerID() != next {
				t.Fatalf("next producer id = %d, want %d", img.NextProducerID(), next)
			}
		}
	}
	if _, _, err := PlanAllocateProducerIDs(img, 1, 0); !errors.Is(err, metadata.ErrStaleBrokerEpoch) {
		t.Errorf("stale epoch: %v", err)
	}
	if _, _, err := PlanAllocateProducerIDs(img, 7, 1); !errors.Is(err, metadata.ErrUnknownBroker) {
		t.Errorf("unknown broker: %v", err)
	}
	img = apply(t, img, &metadata.ProducerIDsRecord{NextProducerID: math.MaxInt64 - 10})
	if _, _, err := PlanAllocateProducerIDs(img, 1, 1); !errors.Is(err, metadata.ErrProducerIDs) {
		t.Errorf("exhausted: %v", err)
	}
}
