package metadata

import (
	"errors"
	"testing"
)

func owedMarkers(id int32, epoch int64, level int32) *BrokerFeaturesRecord {
	return &BrokerFeaturesRecord{BrokerID: id, Epoch: epoch, Features: map[string]int32{FeatureOwedMarkers: level}}
}

// TestBrokersSupport: a Strata-internal feature is supported by the cluster
// only while every registered broker's current registration recorded it at
// the level asked for or above; a new registration starts without features,
// fencing keeps them, an unregistered broker no longer counts.
func TestBrokersSupport(t *testing.T) {
	all := []Record{owedMarkers(1, 1, 1), owedMarkers(2, 1, 1), owedMarkers(3, 1, 2)}
	for _, tc := range []struct {
		name string
		img  func(t *testing.T) *Image
		want bool
	}{
		{"no brokers", func(*testing.T) *Image { return NewImage() }, false},
		{"none recorded", baseImage, false},
		{"every broker", func(t *testing.T) *Image { return mustApply(t, baseImage(t), all...) }, true},
		{"one broker lacks it", func(t *testing.T) *Image { return mustApply(t, baseImage(t), all[:2]...) }, false},
		{"one at a lower level", func(t *testing.T) *Image {
			return mustApply(t, baseImage(t), owedMarkers(1, 1, 1), owedMarkers(2, 1, 0), owedMarkers(3, 1, 1))
		}, false},
		{"other features only", func(t *testing.T) *Image {
			return mustApply(t, baseImage(t), all[0], all[1], &BrokerFeaturesRecord{BrokerID: 3, Epoch: 1, Features: map[string]int32{"strata.other": 1}})
		}, false},
		{"a broker registered again", func(t *testing.T) *Image { return mustApply(t, baseImage(t), append(all, register(2, 5))...) }, false},
		{"registered again and recorded", func(t *testing.T) *Image {
			return mustApply(t, baseImage(t), append(all, register(2, 5), owedMarkers(2, 5, 1))...)
		}, true},
		{"a fenced broker keeps them", func(t *testing.T) *Image {
			return mustApply(t, baseImage(t), append(all, &FenceBrokerRecord{BrokerID: 3, Epoch: 1})...)
		}, true},
		{"the broker lacking it unregistered", func(t *testing.T) *Image {
			return mustApply(t, baseImage(t), all[0], all[1], &FenceBrokerRecord{BrokerID: 3, Epoch: 1}, &UnregisterBrokerRecord{BrokerID: 3, Epoch: 1})
		}, true},
		{"through a snapshot", func(t *testing.T) *Image {
			img, err := DecodeSnapshot(EncodeSnapshot(mustApply(t, baseImage(t), all...)))
			if err != nil {
				t.Fatal(err)
			}
			return img
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.img(t).BrokersSupport(FeatureOwedMarkers, 1); got != tc.want {
				t.Fatalf("BrokersSupport = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBrokerFeaturesRefused: features of an unknown broker, of another
// registration than the current one, or with an empty name or a negative
// level are refused, the image unchanged.
func TestBrokerFeaturesRefused(t *testing.T) {
	img := baseImage(t)
	for _, tc := range []struct {
		name string
		rec  *BrokerFeaturesRecord
		want error
	}{
		{"unknown broker", owedMarkers(9, 1, 1), ErrUnknownBroker},
		{"older registration", owedMarkers(1, 0, 1), ErrStaleBrokerEpoch},
		{"newer registration", owedMarkers(1, 2, 1), ErrStaleBrokerEpoch},
		{"empty name", &BrokerFeaturesRecord{BrokerID: 1, Epoch: 1, Features: map[string]int32{"": 1}}, ErrInvalidRequest},
		{"negative level", owedMarkers(1, 1, -1), ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ApplyAll(img, []Record{tc.rec}); !errors.Is(err, tc.want) {
				t.Fatalf("applying %+v: %v, want %v", tc.rec, err, tc.want)
			}
		})
	}
	if img.Broker(1).Features != nil {
		t.Fatal("a refused record changed the image")
	}
}
