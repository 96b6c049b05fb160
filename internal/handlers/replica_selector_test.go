package handlers

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// TestPreferredReadReplica: the rack-aware choice among the candidates (the
// in-sync followers holding the fetch offset), as Kafka's
// RackAwareReplicaSelector: the leader when it is in the consumer's rack or
// none is; else the most caught up in the rack (the higher log end, then the
// more recently caught up, then the higher id).
func TestPreferredReadReplica(t *testing.T) {
	var recs []metadata.Record
	for id, rack := range map[int32]string{1: "a", 2: "b", 3: "c", 4: "b", 5: "c", 6: ""} {
		recs = append(recs, &metadata.RegisterBrokerRecord{BrokerID: id, Epoch: 1, Host: "h", Port: 9092, Rack: rack, Fenced: id == 5})
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), recs)
	if err != nil {
		t.Fatal(err)
	}
	at := func(id int32, logEnd int64, since time.Duration) replica.ReplicaView {
		return replica.ReplicaView{ID: id, LogEndOffset: logEnd, SinceCaughtUp: since}
	}
	views := func(ids ...int32) []replica.ReplicaView {
		var vs []replica.ReplicaView
		for _, id := range ids {
			vs = append(vs, at(id, 10, 0))
		}
		return vs
	}
	for _, tc := range []struct {
		name       string
		candidates []replica.ReplicaView
		leader     int32
		rack       string
		want       int32
	}{
		{"no client rack: the leader", views(2, 3), 1, "", noPreferredReplica},
		{"the leader is in the rack", views(2, 3), 1, "a", noPreferredReplica},
		{"a candidate in the rack", views(2, 3), 1, "b", 2},
		{"the higher log end of several", []replica.ReplicaView{at(4, 9, 0), at(2, 10, time.Second)}, 1, "b", 2},
		{"then the more recently caught up", []replica.ReplicaView{at(2, 10, time.Second), at(4, 10, 0)}, 1, "b", 4},
		{"then the higher id", views(2, 4), 1, "b", 4},
		{"no candidate in the rack (2 does not hold the offset)", views(3), 1, "b", noPreferredReplica},
		{"a fenced candidate is not chosen", views(5), 1, "c", noPreferredReplica},
		{"no replica in the rack", views(2, 3), 1, "z", noPreferredReplica},
		{"a broker without a rack matches nothing", views(6), 1, "", noPreferredReplica},
	} {
		if got := preferredReadReplica(img, tc.candidates, tc.leader, tc.rack); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

var nearTopicID = metadata.UUID{22}

// TestPreferredReadReplicaHoldsFetchOffset (KIP-392): a leader names a
// preferred read replica only when, by the follower's last fetch, its log
// holds the consumer's fetch offset (its log start at or below it, its log end
// at or above it), as Kafka's ReplicaManager.findPreferredReadReplica filters
// the ISR; otherwise it serves the fetch itself. A follower that does not
// hold the offset answers the consumer OFFSET_OUT_OF_RANGE, and the consumer,
// back at the leader, would be sent to it again. Strata used to name the
// in-rack follower whatever the offset.
//
// Broker 1 (rack a) leads near-0 with 2 (rack b) and 3 (rack c) in sync; the
// leader holds offsets 0-39. Follower 2 last fetched at 30 with its log
// starting at 20 (its own retention deleted below); follower 3 at 40 from 0.
// The HWM is 30.
func TestPreferredReadReplicaHoldsFetchOffset(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := replica.NewManager(vfs.NewMem(), "/logs", 1, logger, replica.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	recs := []metadata.Record{&metadata.TopicRecord{Name: "near", ID: nearTopicID}}
	for id, rack := range []string{"a", "b", "c"} {
		recs = append(recs, &metadata.RegisterBrokerRecord{BrokerID: int32(id + 1), Epoch: 1, Host: "127.0.0.1", Port: 9092 + int32(id), Rack: rack})
	}
	recs = append(recs, &metadata.PartitionRecord{TopicID: nearTopicID, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1})
	img, err := metadata.ApplyAll(metadata.NewImage(), recs)
	if err != nil {
		t.Fatal(err)
	}
	img = img.WithOffset(1)
	if err := m.Apply(img); err != nil {
		t.Fatal(err)
	}
	p, err := m.Partition("near", 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := p.Append(batchtest.Build(batchtest.Options{Records: batchtest.Values(10, 10)}), 1); err != nil {
			t.Fatal(err)
		}
	}
	h := New(Config{NodeID: 1, BrokerEpoch: func() int64 { return 1 }, RackAwareReplicaSelector: true}, fakeCluster{img: img}, m, nil, nil, logger)

	fetch := func(replicaID int32, rack string, offset, logStart int64) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes, req.SessionEpoch, req.Rack = replicaID, 1<<20, -1, rack
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "near"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.LogStartOffset, rp.PartitionMaxBytes = offset, logStart, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return serve(t, h, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}
	fetch(2, "", 30, 20)
	fetch(3, "", 40, 0)
	wait.Within(t, 10*time.Second, "the HWM to reach 30", func() bool { return p.HighWatermark() >= 30 })

	for _, tc := range []struct {
		name      string
		rack      string
		offset    int64
		preferred int32
		records   bool // the leader serves records itself
	}{
		{"follower 2 holds the offset", "b", 25, 2, false},
		{"at follower 2's log end (the HWM)", "b", 30, 2, false},
		{"below follower 2's log start: the leader serves", "b", 5, -1, true},
		{"past follower 2's log end: the leader answers", "b", 35, -1, false},
		{"follower 3 holds the offset", "c", 5, 3, false},
		{"the leader's rack", "a", 25, -1, true},
	} {
		got := fetch(-1, tc.rack, tc.offset, -1)
		if got.ErrorCode != 0 || got.PreferredReadReplica != tc.preferred || (len(got.RecordBatches) > 0) != tc.records {
			t.Errorf("%s: rack %s at %d: error %d, preferred read replica %d, %d record bytes; want preferred %d, records %v",
				tc.name, tc.rack, tc.offset, got.ErrorCode, got.PreferredReadReplica, len(got.RecordBatches), tc.preferred, tc.records)
		}
	}
}
