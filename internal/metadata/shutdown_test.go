package metadata

import (
	"errors"
	"testing"
)

// TestControlledShutdownMark: the mark belongs to the registration it names:
// fencing keeps it, a snapshot keeps it, a new registration starts without
// it; one for an unknown broker or another registration is refused, the
// image unchanged.
func TestControlledShutdownMark(t *testing.T) {
	marked := mustApply(t, baseImage(t), &ControlledShutdownRecord{BrokerID: 1, Epoch: 1})
	fromSnapshot, err := DecodeSnapshot(EncodeSnapshot(marked))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		img  *Image
		want bool
	}{
		{"not marked", baseImage(t), false},
		{"marked", marked, true},
		{"marked twice", mustApply(t, marked, &ControlledShutdownRecord{BrokerID: 1, Epoch: 1}), true},
		{"fenced", mustApply(t, marked, &FenceBrokerRecord{BrokerID: 1, Epoch: 1}), true},
		{"registered again", mustApply(t, marked, register(1, 5)), false},
		{"through a snapshot", fromSnapshot, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.img.InControlledShutdown(1); got != tc.want {
				t.Fatalf("InControlledShutdown(1) = %v, want %v", got, tc.want)
			}
			if tc.img.InControlledShutdown(2) {
				t.Fatal("broker 2 is in controlled shutdown too")
			}
		})
	}

	for _, tc := range []struct {
		name string
		rec  *ControlledShutdownRecord
		want error
	}{
		{"unknown broker", &ControlledShutdownRecord{BrokerID: 9, Epoch: 1}, ErrUnknownBroker},
		{"older registration", &ControlledShutdownRecord{BrokerID: 1, Epoch: 0}, ErrStaleBrokerEpoch},
		{"newer registration", &ControlledShutdownRecord{BrokerID: 1, Epoch: 2}, ErrStaleBrokerEpoch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := baseImage(t)
			if _, err := ApplyAll(img, []Record{tc.rec}); !errors.Is(err, tc.want) {
				t.Fatalf("applying %+v: %v, want %v", tc.rec, err, tc.want)
			}
			if img.InControlledShutdown(1) {
				t.Fatal("a refused record changed the image")
			}
		})
	}
}
