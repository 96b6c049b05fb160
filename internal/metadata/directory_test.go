package metadata

import (
	"errors"
	"testing"
)

// TestBrokerDirectory: a directory id belongs to the registration it names:
// a new registration starts without one, fencing keeps it, a snapshot keeps
// it; one for an unknown broker, another registration, or a zero id is
// refused, the image unchanged.
func TestBrokerDirectory(t *testing.T) {
	dir := UUID{0xd, 1}
	recorded := mustApply(t, baseImage(t), &BrokerDirectoryRecord{BrokerID: 1, Epoch: 1, DirectoryID: dir})
	fromSnapshot, err := DecodeSnapshot(EncodeSnapshot(recorded))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		img  *Image
		want UUID
	}{
		{"none recorded", baseImage(t), UUID{}},
		{"recorded", recorded, dir},
		{"fenced", mustApply(t, recorded, &FenceBrokerRecord{BrokerID: 1, Epoch: 1}), dir},
		{"registered again", mustApply(t, recorded, register(1, 5)), UUID{}},
		{"through a snapshot", fromSnapshot, dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.img.Broker(1).DirectoryID; got != tc.want {
				t.Fatalf("DirectoryID = %v, want %v", got, tc.want)
			}
		})
	}

	for _, tc := range []struct {
		name string
		rec  *BrokerDirectoryRecord
		want error
	}{
		{"unknown broker", &BrokerDirectoryRecord{BrokerID: 9, Epoch: 1, DirectoryID: dir}, ErrUnknownBroker},
		{"older registration", &BrokerDirectoryRecord{BrokerID: 1, Epoch: 0, DirectoryID: dir}, ErrStaleBrokerEpoch},
		{"newer registration", &BrokerDirectoryRecord{BrokerID: 1, Epoch: 2, DirectoryID: dir}, ErrStaleBrokerEpoch},
		{"zero id", &BrokerDirectoryRecord{BrokerID: 1, Epoch: 1}, ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := baseImage(t)
			if _, err := ApplyAll(img, []Record{tc.rec}); !errors.Is(err, tc.want) {
				t.Fatalf("applying %+v: %v, want %v", tc.rec, err, tc.want)
			}
			if !img.Broker(1).DirectoryID.IsZero() {
				t.Fatal("a refused record changed the image")
			}
		})
	}
}
