package controller

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

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
	recs, err := PlanFenceBroker(img, 1, 1, nil)
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
	if again, err := PlanFenceBroker(fenced, 1, 1, nil); err != nil || len(again) != 0 {
		t.Errorf("fencing again = %v, %v; want nothing", again, err)
	}

	recs, err = PlanUnfenceBroker(fenced, 1, 1, nil)
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
	if again, err := PlanUnfenceBroker(back, 1, 1, nil); err != nil || len(again) != 0 {
		t.Errorf("unfencing a live broker = %v, %v; want nothing", again, err)
	}

	for _, tt := range []struct {
		id    int32
		epoch int64
		want  error
	}{{1, 2, metadata.ErrStaleBrokerEpoch}, {9, 1, metadata.ErrUnknownBroker}} {
		if _, err := PlanFenceBroker(img, tt.id, tt.epoch, nil); !errors.Is(err, tt.want) {
			t.Errorf("PlanFenceBroker(%d, %d) = %v, want %v", tt.id, tt.epoch, err, tt.want)
		}
		if _, err := PlanUnfenceBroker(img, tt.id, tt.epoch, nil); !errors.Is(err, tt.want) {
			t.Errorf("PlanUnfenceBroker(%d, %d) = %v, want %v", tt.id, tt.epoch, err, tt.want)
		}
	}
}

func TestPlanRegisterBroker(t *testing.T) {
	inc1, inc2 := metadata.UUID{1}, metadata.UUID{2}
	req := RegisterBroker{ID: 4, Incarnation: inc1, Host: "h", Port: 9092, Rack: "r"}
	img := clusterImage(t, 3)

	recs, epoch, err := PlanRegisterBroker(img, req, false, nil)
	if err != nil || epoch != 1 || len(recs) != 1 {
		t.Fatalf("first registration = %v, %d, %v", recs, epoch, err)
	}
	img = apply(t, img, recs...)
	if b := img.Broker(4); b == nil || b.Fenced || b.Addr() != "h:9092" || b.Rack != "r" {
		t.Fatalf("broker = %+v", b)
	}

	recs, epoch, err = PlanRegisterBroker(img, req, false, nil)
	if err != nil || epoch != 1 || len(recs) != 0 {
		t.Errorf("retry = %v, %d, %v; want no records, epoch 1", recs, epoch, err)
	}

	req.Incarnation = inc2
	recs, epoch, err = PlanRegisterBroker(img, req, false, nil)
	if err != nil || epoch != 2 {
		t.Fatalf("restart = %d, %v", epoch, err)
	}
	img = apply(t, img, recs...)

	// A fenced broker re-registering becomes live and leads what it can.
	img = withTopic(t, img, "solo", idOrders, nil, []int32{4})
	recs, _ = PlanFenceBroker(img, 4, 2, nil)
	img = apply(t, img, recs...)
	if p := img.Partition("solo", 0); p.Leader != metadata.NoLeader {
		t.Fatalf("fenced broker still leads: %+v", p)
	}
	recs, epoch, err = PlanRegisterBroker(img, req, false, nil)
	if err != nil || epoch != 3 {
		t.Fatalf("re-registration of a fenced broker = %d, %v", epoch, err)
	}
	img = apply(t, img, recs...)
	if p := img.Partition("solo", 0); p.Leader != 4 || p.LeaderEpoch != 2 || !img.IsLive(4) {
		t.Errorf("after re-registration: %+v live=%v", p, img.IsLive(4))
	}

	for _, bad := range []RegisterBroker{{ID: -1, Host: "h", Port: 1}, {ID: 1, Port: 1}, {ID: 1, Host: "h"}, {ID: 1, Host: "h", Port: 65536}} {
		if _, _, err := PlanRegisterBroker(img, bad, false, nil); !errors.Is(err, metadata.ErrInvalidRequest) {
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

// heartbeatImage: brokers 1-3; "orders" partitions [1,2,3] led by 1, [2,1] led
// by 2 and [1] led by 1.
func heartbeatImage(t *testing.T) *metadata.Image {
	return withTopic(t, clusterImage(t, 3), "orders", idOrders, nil, []int32{1, 2, 3}, []int32{2, 1}, []int32{1})
}

func TestPlanBrokerHeartbeat(t *testing.T) {
	base := heartbeatImage(t)
	recs, err := PlanFenceBroker(base, 1, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	fenced := apply(t, base, recs...)
	marked := apply(t, base, &metadata.ControlledShutdownRecord{BrokerID: 1, Epoch: 1})
	handedOff := apply(t, marked, changesForShutdown(marked, 1, ShuttingDown{1: true})...)
	untouched := []partState{
		{"orders", 0, 1, 0, []int32{1, 2, 3}},
		{"orders", 1, 2, 0, []int32{2, 1}},
		{"orders", 2, 1, 0, []int32{1}},
	}
	tests := []struct {
		name    string
		img     *metadata.Image
		req     HeartbeatRequest
		st      HeartbeatState
		want    HeartbeatResult
		wantErr error
		records bool        // whether the heartbeat proposes anything
		parts   []partState // after applying the records
		live    bool        // broker 1 live afterwards
		marked  bool        // broker 1 in controlled shutdown afterwards (its image mark)
	}{
		{name: "live broker: nothing to do", img: base, req: HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1},
			parts: untouched, live: true},
		{name: "stale epoch", img: base, req: HeartbeatRequest{BrokerID: 1, BrokerEpoch: 2}, wantErr: metadata.ErrStaleBrokerEpoch},
		{name: "unknown broker", img: base, req: HeartbeatRequest{BrokerID: 9, BrokerEpoch: 1}, wantErr: metadata.ErrUnknownBroker},
		{name: "fenced, not caught up: stays fenced", img: fenced,
			req: HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1, MetadataOffset: 9}, st: HeartbeatState{UnfenceOffset: 10},
			want: HeartbeatResult{Fenced: true}},
		{name: "fenced, caught up: unfenced, leads its leaderless partition again", img: fenced,
			req: HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1, MetadataOffset: 10}, st: HeartbeatState{UnfenceOffset: 10},
			records: true, live: true, parts: []partState{
				{"orders", 0, 2, 1, []int32{2, 3}}, // led elsewhere now: no change until a preferred election
				{"orders", 1, 2, 0, []int32{2}},
				{"orders", 2, 1, 2, []int32{1}},
			}},
		{name: "fenced and shutting down: may stop", img: fenced,
			req:  HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1, MetadataOffset: 10, WantShutdown: true},
			want: HeartbeatResult{Fenced: true, ShouldShutdown: true}},
		{name: "fenced, in controlled shutdown from an earlier heartbeat", img: fenced,
			req: HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1, MetadataOffset: 10}, st: HeartbeatState{ShuttingDown: ShuttingDown{1: true}},
			want: HeartbeatResult{Fenced: true, ShouldShutdown: true}},
		{name: "controlled shutdown starts: the broker is marked first, alone", img: base,
			req:     HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1, MetadataOffset: 100, WantShutdown: true},
			records: true, live: true, marked: true, parts: untouched},
		{name: "controlled shutdown, marked: leadership and isr membership handed off", img: marked,
			req:     HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1, MetadataOffset: 100, WantShutdown: true},
			records: true, live: true, marked: true, parts: []partState{
				{"orders", 0, 2, 1, []int32{2, 3}},
				{"orders", 1, 2, 0, []int32{2}},
				{"orders", 2, 1, 0, []int32{1}}, // nobody to hand it to
			}},
		{name: "controlled shutdown skips brokers that are shutting down too", img: marked,
			req: HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1, WantShutdown: true}, st: HeartbeatState{ShuttingDown: ShuttingDown{2: true}},
			records: true, live: true, marked: true, parts: []partState{
				{"orders", 0, 3, 1, []int32{2, 3}},
				{"orders", 1, 2, 0, []int32{2}},
			}},
		{name: "controlled shutdown: hand-off not yet seen by the broker", img: handedOff,
			req: HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1, MetadataOffset: 9, WantShutdown: true},
			st:  HeartbeatState{ShuttingDown: ShuttingDown{1: true}, ShutdownOffset: 10}, live: true, marked: true},
		{name: "controlled shutdown complete: fenced, told to stop", img: handedOff,
			req:  HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1, MetadataOffset: 10, WantShutdown: true},
			st:   HeartbeatState{ShuttingDown: ShuttingDown{1: true}, ShutdownOffset: 10},
			want: HeartbeatResult{Fenced: true, ShouldShutdown: true}, records: true, marked: true, parts: []partState{
				{"orders", 0, 2, 1, []int32{2, 3}},
				{"orders", 1, 2, 0, []int32{2}},
				{"orders", 2, metadata.NoLeader, 1, []int32{1}}, // keeps its isr: no data loss when it returns
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, res, err := PlanBrokerHeartbeat(tt.img, tt.req, tt.st)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if res != tt.want {
				t.Errorf("result = %+v, want %+v", res, tt.want)
			}
			if (len(recs) > 0) != tt.records {
				t.Fatalf("records = %v, want some: %v", recs, tt.records)
			}
			img := apply(t, tt.img, recs...)
			checkPartitions(t, img, tt.parts)
			if img.IsLive(1) != tt.live {
				t.Errorf("broker 1 live = %v, want %v", img.IsLive(1), tt.live)
			}
			if img.InControlledShutdown(1) != tt.marked {
				t.Errorf("broker 1 in controlled shutdown = %v, want %v", img.InControlledShutdown(1), tt.marked)
			}
		})
	}
}

func TestPlanRegisterBrokerSessions(t *testing.T) {
	base := heartbeatImage(t)
	restart := RegisterBroker{ID: 1, Incarnation: metadata.UUID{9}, Host: "127.0.0.1", Port: 9001}

	if _, _, err := PlanRegisterBroker(base, restart, true, nil); !errors.Is(err, metadata.ErrDuplicateBrokerRegistration) ||
		metadata.ErrorCode(err) != 101 {
		t.Errorf("new incarnation while the old one has a live session = %v, want DUPLICATE_BROKER_REGISTRATION", err)
	}

	// The old process's session expired: the new one replaces it. What the
	// old process led moves on with a new leader epoch, it leaves the ISRs,
	// and leads again only where nobody else can.
	recs, epoch, err := PlanRegisterBroker(base, restart, false, nil)
	if err != nil || epoch != 2 {
		t.Fatalf("replacing registration = %d, %v", epoch, err)
	}
	img := apply(t, base, recs...)
	checkPartitions(t, img, []partState{
		{"orders", 0, 2, 1, []int32{2, 3}},
		{"orders", 1, 2, 0, []int32{2}},
		{"orders", 2, 1, 2, []int32{1}},
	})
	if b := img.Broker(1); b.Epoch != 2 || b.Incarnation != restart.Incarnation || b.Fenced {
		t.Errorf("broker = %+v", b)
	}

	// A retry of the registration that took effect changes nothing, live
	// session or not.
	if recs, epoch, err := PlanRegisterBroker(img, restart, true, nil); err != nil || epoch != 2 || len(recs) != 0 {
		t.Errorf("retry = %v, %d, %v", recs, epoch, err)
	}

	// A fenced registration never blocks a new incarnation.
	fenced := fence(t, base, 1)
	if _, epoch, err := PlanRegisterBroker(fenced, restart, true, nil); err != nil || epoch != 2 {
		t.Errorf("after fencing = %d, %v", epoch, err)
	}

	// Brokers in controlled shutdown are passed over when the new
	// registration elects leaders: "pair" is leaderless with isr [2 1], and 2,
	// back first, is shutting down.
	img = withTopic(t, fence(t, clusterImage(t, 3), 1, 2), "pair", idLogs, nil, []int32{2, 1})
	img = apply(t, img,
		&metadata.PartitionChangeRecord{TopicID: idLogs, Leader: metadata.NoLeader, LeaderEpoch: 1, ISR: []int32{2, 1}},
		&metadata.UnfenceBrokerRecord{BrokerID: 2, Epoch: 1})
	recs, _, err = PlanRegisterBroker(img, restart, false, ShuttingDown{2: true})
	if err != nil {
		t.Fatal(err)
	}
	checkPartitions(t, apply(t, img, recs...), []partState{{"pair", 0, 1, 2, []int32{2, 1}}})
}

func TestPlanFenceBrokers(t *testing.T) {
	img := heartbeatImage(t)
	recs, ids, err := planFenceBrokers(img, []int32{1, 9, 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []int32{1, 2}) {
		t.Errorf("fenced %v, want [1 2]", ids)
	}
	img = apply(t, img, recs...)
	// Each fence sees the ones before it: 1's partition goes to 2, then on to 3.
	checkPartitions(t, img, []partState{
		{"orders", 0, 3, 2, []int32{3}},
		{"orders", 1, metadata.NoLeader, 1, []int32{2}},
		{"orders", 2, metadata.NoLeader, 1, []int32{1}},
	})
	if recs, ids, err := planFenceBrokers(img, []int32{1, 2}, nil); err != nil || len(recs) != 0 || len(ids) != 0 {
		t.Errorf("fencing fenced brokers again = %v, %v, %v", recs, ids, err)
	}
}

func TestPlanUnregisterBroker(t *testing.T) {
	img := withTopic(t, clusterImage(t, 3), "orders", idOrders, nil, []int32{3, 1, 2}, []int32{3})
	recs, err := PlanUnregisterBroker(img, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	img = apply(t, img, recs...)
	if img.Broker(3) != nil {
		t.Fatal("broker 3 still registered")
	}
	// Its leadership moved where another ISR member could take it; as the
	// last ISR member it keeps the partition leaderless, nothing lost.
	checkPartitions(t, img, []partState{
		{topic: "orders", index: 0, leader: 1, leaderEpoch: 1, isr: []int32{1, 2}},
		{topic: "orders", index: 1, leader: metadata.NoLeader, leaderEpoch: 1, isr: []int32{3}},
	})
	if _, err := PlanUnregisterBroker(img, 3, nil); !errors.Is(err, metadata.ErrBrokerIDNotRegistered) {
		t.Fatalf("unregistering it again: %v, want BROKER_ID_NOT_REGISTERED", err)
	}
}

// TestPlanRegisterBrokerNewDirectory: a broker that registers again with
// another data directory than its last registration's (a dead machine
// replaced by one with an empty disk and the same node id) leaves every ISR,
// as the last member too, so its empty replica is never elected where it was
// the only in-sync one; with the same directory, or where either side does not
// know its directory, it is a restart and leads again where nobody else can.
// An unregistered broker (kafka-cluster unregister) that comes back is
// compared with the directory of the registration removed: its partitions
// keep it as the last ISR member, as Kafka's keep the replica's directory.
func TestPlanRegisterBrokerNewDirectory(t *testing.T) {
	dir := func(id int32) metadata.UUID { return metadata.UUID{0xd, byte(id)} }
	img := metadata.NewImage()
	for id := int32(1); id <= 3; id++ {
		img = apply(t, img, &metadata.RegisterBrokerRecord{BrokerID: id, Epoch: 1, Host: "127.0.0.1", Port: 9000 + id},
			&metadata.BrokerDirectoryRecord{BrokerID: id, Epoch: 1, DirectoryID: dir(id)})
	}
	withDirs := withTopic(t, img, "orders", idOrders, nil, []int32{1, 2, 3}, []int32{2, 1}, []int32{1})
	restarted := []partState{
		{"orders", 0, 2, 1, []int32{2, 3}},
		{"orders", 1, 2, 0, []int32{2}},
		{"orders", 2, 1, 2, []int32{1}},
	}
	replaced := []partState{
		{"orders", 0, 2, 1, []int32{2, 3}},
		{"orders", 1, 2, 0, []int32{2}},
		{"orders", 2, metadata.NoLeader, 1, []int32{}},
	}
	tests := []struct {
		name   string
		img    *metadata.Image
		dir    metadata.UUID
		fenced bool // broker 1's old registration fenced before it registers
		// unregistered: broker 1's old registration removed before it registers
		unregistered bool
		want         []partState
	}{
		{"same directory", withDirs, dir(1), false, false, restarted},
		{"new directory", withDirs, metadata.UUID{0xe}, false, false, replaced},
		{"new directory, old registration fenced", withDirs, metadata.UUID{0xe}, true, false, replaced},
		{"directory unknown to the request", withDirs, metadata.UUID{}, false, false, restarted},
		{"directory unknown to the old registration", heartbeatImage(t), metadata.UUID{0xe}, false, false, restarted},
		{"same directory, old registration removed", withDirs, dir(1), false, true, restarted},
		{"new directory, old registration removed", withDirs, metadata.UUID{0xe}, false, true, replaced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := tt.img
			if tt.fenced {
				recs, err := PlanFenceBroker(img, 1, 1, nil)
				if err != nil {
					t.Fatal(err)
				}
				img = apply(t, img, recs...)
			}
			if tt.unregistered {
				recs, err := PlanUnregisterBroker(img, 1, nil)
				if err != nil {
					t.Fatal(err)
				}
				img = apply(t, img, recs...)
				// The snapshot of the image keeps what a new registration is
				// compared with.
				if img, err = metadata.DecodeSnapshot(metadata.EncodeSnapshot(img)); err != nil {
					t.Fatal(err)
				}
			}
			req := RegisterBroker{ID: 1, Incarnation: metadata.UUID{9}, DirectoryID: tt.dir, Host: "127.0.0.1", Port: 9001}
			recs, epoch, err := PlanRegisterBroker(img, req, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkPreviousReleaseDecodes(t, recs)
			img = apply(t, img, recs...)
			checkPartitions(t, img, tt.want)
			if recs, err = PlanBrokerDirectory(img, 1, epoch, tt.dir); err != nil {
				t.Fatal(err)
			}
			img = apply(t, img, recs...)
			if b := img.Broker(1); b.Fenced || b.DirectoryID != tt.dir {
				t.Errorf("broker 1 = %+v, want live with directory %v", b, tt.dir)
			}
		})
	}
}

// previousRelease are the record types main 1c559c3 (the release before
// directory ids) decodes, each at version 0 only: a batch holding any other
// is refused whole by its nodes (see metadata's package doc).
var previousRelease = map[metadata.RecordType]bool{
	metadata.TypeRegisterBroker: true, metadata.TypeFenceBroker: true, metadata.TypeUnfenceBroker: true,
	metadata.TypeTopic: true, metadata.TypePartition: true, metadata.TypePartitionChange: true,
	metadata.TypeRemoveTopic: true, metadata.TypeConfig: true, metadata.TypeProducerIDs: true,
	metadata.TypeReassignment: true, metadata.TypeUnregister: true,
	metadata.TypeScramCredential: true, metadata.TypeAcl: true, metadata.TypeClientQuota: true,
	metadata.TypeDelegationToken: true, metadata.TypeRemoveDelegationToken: true, metadata.TypeIPQuota: true,
}

// checkPreviousReleaseDecodes fails unless every record of recs encodes as a
// type and version the previous release decodes, read from the encoded bytes
// (length uvarint, type, version).
func checkPreviousReleaseDecodes(t *testing.T, recs []metadata.Record) {
	t.Helper()
	for _, rec := range recs {
		b := metadata.AppendRecord(nil, rec)
		_, n := binary.Uvarint(b)
		if n <= 0 || len(b) < n+2 {
			t.Fatalf("%T encodes as %x", rec, b)
		}
		if typ, version := metadata.RecordType(b[n]), b[n+1]; !previousRelease[typ] || version != 0 {
			t.Errorf("%T encodes as type %d version %d: the previous release refuses its batch", rec, typ, version)
		}
	}
}

func TestPlanBrokerDirectory(t *testing.T) {
	img := clusterImage(t, 2)
	epoch := img.Broker(1).Epoch
	dir := metadata.UUID{0xd}
	recorded := apply(t, img, &metadata.BrokerDirectoryRecord{BrokerID: 1, Epoch: epoch, DirectoryID: dir})
	for _, tc := range []struct {
		name    string
		img     *metadata.Image
		id      int32
		epoch   int64
		dir     metadata.UUID
		records int
		err     error
	}{
		{"new", img, 1, epoch, dir, 1, nil},
		{"recorded already", recorded, 1, epoch, dir, 0, nil},
		{"another directory", recorded, 1, epoch, metadata.UUID{0xe}, 1, nil},
		{"zero", img, 1, epoch, metadata.UUID{}, 0, nil},
		{"unknown broker", img, 9, 1, dir, 0, metadata.ErrUnknownBroker},
		{"stale epoch", img, 1, epoch - 1, dir, 0, metadata.ErrStaleBrokerEpoch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := PlanBrokerDirectory(tc.img, tc.id, tc.epoch, tc.dir)
			if !errors.Is(err, tc.err) || len(recs) != tc.records {
				t.Fatalf("PlanBrokerDirectory: %d records, %v; want %d, %v", len(recs), err, tc.records, tc.err)
			}
			if len(recs) > 0 {
				if got := apply(t, tc.img, recs...).Broker(tc.id).DirectoryID; got != tc.dir {
					t.Fatalf("DirectoryID = %v, want %v", got, tc.dir)
				}
			}
		})
	}
}

// TestRequestsOfUnregisteredBrokerAreStale: a broker request that names a
// broker id nobody holds (its registration was removed, or it never had one)
// is answered STALE_BROKER_EPOCH, as Kafka's controller answers every request
// whose broker epoch it cannot match (ClusterControlManager.checkBrokerEpoch),
// not BROKER_NOT_AVAILABLE.
func TestRequestsOfUnregisteredBrokerAreStale(t *testing.T) {
	img := withTopic(t, clusterImage(t, 2), "orders", idOrders, nil, []int32{1, 2})
	recs, err := PlanUnregisterBroker(img, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	img = apply(t, img, recs...)
	for _, id := range []int32{2, 9} { // unregistered, never registered
		for name, plan := range map[string]func() error{
			"BrokerHeartbeat": func() error {
				_, _, err := PlanBrokerHeartbeat(img, HeartbeatRequest{BrokerID: id, BrokerEpoch: 1}, HeartbeatState{})
				return err
			},
			"BrokerHeartbeat, controlled shutdown": func() error {
				_, _, err := PlanBrokerHeartbeat(img, HeartbeatRequest{BrokerID: id, BrokerEpoch: 1, WantShutdown: true}, HeartbeatState{})
				return err
			},
			"AllocateProducerIds": func() error {
				_, _, err := PlanAllocateProducerIDs(img, id, 1)
				return err
			},
			"AlterPartition": func() error {
				_, _, err := PlanAlterPartitions(img, []AlterPartitionRequest{{BrokerID: id, BrokerEpoch: 1,
					TopicID: idOrders, NewISR: []int32{id}}}, nil)
				return err
			},
		} {
			if err := plan(); metadata.ErrorCode(err) != kerr.StaleBrokerEpoch.Code {
				t.Errorf("%s of broker %d: %v, want STALE_BROKER_EPOCH", name, id, err)
			}
		}
	}
}
