package handlers

import (
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

func TestPreferredReadReplica(t *testing.T) {
	var recs []metadata.Record
	for id, rack := range map[int32]string{1: "a", 2: "b", 3: "c", 4: "b", 5: "c", 6: ""} {
		recs = append(recs, &metadata.RegisterBrokerRecord{BrokerID: id, Epoch: 1, Host: "h", Port: 9092, Rack: rack, Fenced: id == 5})
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		isr    []int32
		leader int32
		rack   string
		want   int32
	}{
		{"no client rack: the leader", []int32{1, 2, 3}, 1, "", noPreferredReplica},
		{"the leader is in the rack", []int32{1, 2, 3}, 1, "a", noPreferredReplica},
		{"an in-sync follower in the rack", []int32{1, 2, 3}, 1, "b", 2},
		{"the lowest id of several", []int32{4, 1, 2}, 1, "b", 2},
		{"a follower out of the ISR is not chosen", []int32{1, 3}, 1, "b", noPreferredReplica},
		{"a fenced follower is not chosen", []int32{1, 5}, 1, "c", noPreferredReplica},
		{"no replica in the rack", []int32{1, 2, 3}, 1, "z", noPreferredReplica},
		{"a broker without a rack matches nothing", []int32{1, 6}, 1, "", noPreferredReplica},
	} {
		if got := preferredReadReplica(img, tc.isr, tc.leader, tc.rack); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}
