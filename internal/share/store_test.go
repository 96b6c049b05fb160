package share

import (
	"reflect"
	"testing"
)

func TestStateRecords(t *testing.T) {
	k := Key{Group: "g", TopicID: [16]byte{1, 2, 3}, Partition: 7}
	if got, want := encodeKey(k), append([]byte{0, 0, 0, 1, 'g', 1, 2, 3}, make([]byte, 13+3)...); !reflect.DeepEqual(got, append(want, 7)) {
		t.Fatalf("key %x", got)
	}
	s := Snapshot{LeaderEpoch: 3, Start: 10, Batches: []StateBatch{
		{First: 10, Last: 12, State: Available, DeliveryCount: 2},
		{First: 13, Last: 13, State: Archived, DeliveryCount: 5},
		{First: 14, Last: 20, State: Acknowledged, DeliveryCount: 1},
	}}
	got, err := decodeSnapshot(encodeSnapshot(s))
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("snapshot round trip: %+v %v", got, err)
	}
	for _, bad := range [][]byte{nil, {0, 1}, encodeSnapshot(s)[:20], append(encodeSnapshot(s), 0)} {
		if _, err := decodeSnapshot(bad); err == nil {
			t.Errorf("decodeSnapshot(%x) succeeded", bad)
		}
	}
	if p := statePartition(k, 50); p < 0 || p >= 50 {
		t.Errorf("state partition %d", p)
	}
}
