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

// TestFormerDirectory: unregistering a broker keeps the directory id of the
// registration it removes, a snapshot keeps it, and a new registration of
// the id forgets it; a FormerDirectoryRecord of a registered broker or a zero
// id is refused.
func TestFormerDirectory(t *testing.T) {
	dir := UUID{0xd, 1}
	fenced := mustApply(t, baseImage(t), &BrokerDirectoryRecord{BrokerID: 1, Epoch: 1, DirectoryID: dir},
		&FenceBrokerRecord{BrokerID: 1, Epoch: 1}, &FenceBrokerRecord{BrokerID: 2, Epoch: 1})
	unregistered := mustApply(t, fenced, &UnregisterBrokerRecord{BrokerID: 1, Epoch: 1}, &UnregisterBrokerRecord{BrokerID: 2, Epoch: 1})
	fromSnapshot, err := DecodeSnapshot(EncodeSnapshot(unregistered))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		img  *Image
		id   int32
		want UUID
	}{
		{"registered", fenced, 1, UUID{}},
		{"unregistered", unregistered, 1, dir},
		{"unregistered without a directory", unregistered, 2, UUID{}},
		{"through a snapshot", fromSnapshot, 1, dir},
		{"registered again", mustApply(t, unregistered, register(1, 5)), 1, UUID{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.img.FormerDirectory(tc.id); got != tc.want {
				t.Fatalf("FormerDirectory(%d) = %v, want %v", tc.id, got, tc.want)
			}
		})
	}
	for _, rec := range []*FormerDirectoryRecord{{BrokerID: 3, DirectoryID: dir}, {BrokerID: 1}} {
		if _, err := ApplyAll(unregistered, []Record{rec}); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("applying %+v: %v, want INVALID_REQUEST", rec, err)
		}
	}
}
