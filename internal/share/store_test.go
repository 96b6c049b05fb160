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
	s := Snapshot{StateEpoch: 4, LeaderEpoch: 3, Start: 10, Batches: []StateBatch{
		{First: 10, Last: 12, State: Available, DeliveryCount: 2},
		{First: 13, Last: 13, State: Archived, DeliveryCount: 5},
		{First: 14, Last: 20, State: Acknowledged, DeliveryCount: 1},
	}}
	s.DeliveryComplete = 9 // as a writer gave it: kept, not recounted
	got, err := decodeSnapshot(encodeSnapshot(s))
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("snapshot round trip: %+v %v", got, err)
	}
	// A value written before delivery complete counts (version 1) has it
	// counted off its batches (13-20); one written before state epochs (version
	// 0) also reads as state epoch 0.
	v1 := legacyValue(s, 1)
	old := s
	old.DeliveryComplete = 8
	if got, err := decodeSnapshot(v1); err != nil || !reflect.DeepEqual(got, old) {
		t.Fatalf("version 1 value: %+v %v", got, err)
	}
	v0 := legacyValue(s, 0)
	old.StateEpoch = 0
	if got, err := decodeSnapshot(v0); err != nil || !reflect.DeepEqual(got, old) {
		t.Fatalf("version 0 value: %+v %v", got, err)
	}
	for _, bad := range [][]byte{nil, {0, 1}, {0, 1, 0, 0, 0}, encodeSnapshot(s)[:24], append(encodeSnapshot(s), 0),
		v0[:20], v1[:21], append([]byte{0, 3}, encodeSnapshot(s)[2:]...)} {
		if _, err := decodeSnapshot(bad); err == nil {
			t.Errorf("decodeSnapshot(%x) succeeded", bad)
		}
	}
	if p := statePartition(k, 50); p < 0 || p >= 50 {
		t.Errorf("state partition %d", p)
	}
}

// TestStateEpochs: an offset reset starts the next state epoch, and a snapshot of a
// later state epoch supersedes one of an earlier, whatever their leader epochs.
func TestStateEpochs(t *testing.T) {
	if got := NextStateEpoch(Summary{}, false); got != 1 {
		t.Errorf("reset of no state: state epoch %d", got)
	}
	prev := Snapshot{StateEpoch: 4, LeaderEpoch: 9, Start: 2, Batches: []StateBatch{{First: 2, Last: 3, State: Acknowledged, DeliveryCount: 1}}}
	reset := Snapshot{StateEpoch: NextStateEpoch(Summary{StateEpoch: prev.StateEpoch}, true), LeaderEpoch: 5}
	if reset.StateEpoch != 5 {
		t.Errorf("reset: %+v", reset)
	}
	for _, tc := range []struct {
		s, o Snapshot
		want bool
	}{
		{reset, prev, true},  // a reset beats the higher leader epoch it replaced
		{prev, reset, false}, // a late write of the leader that loaded prev is fenced
		{Snapshot{StateEpoch: 5, LeaderEpoch: 6}, reset, true},
		{Snapshot{StateEpoch: 5, LeaderEpoch: 5}, reset, true}, // the latest of equals wins
		{Snapshot{StateEpoch: 5, LeaderEpoch: 4}, reset, false},
	} {
		if got := tc.s.newerThan(tc.o); got != tc.want {
			t.Errorf("%+v newerThan %+v = %v, want %v", tc.s, tc.o, got, tc.want)
		}
	}
}

// legacyValue is s as an older Strata wrote it: version 1 (no delivery complete
// count) or 0 (no state epoch either).
func legacyValue(s Snapshot, version int) []byte {
	v2 := encodeSnapshot(s) // version | state epoch | leader epoch, start | count | rest
	v1 := append(append([]byte{0, 1}, v2[2:18]...), v2[22:]...)
	if version == 1 {
		return v1
	}
	return append([]byte{0, 0}, v1[6:]...)
}
