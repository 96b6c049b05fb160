package controller

import (
	"errors"
	"maps"
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

// TestRegisterBrokerFeatures: a registration's Strata-internal features are
// recorded after it; a registration without them (a build that predates
// them, or one a controller that predates them registered) leaves none, and
// sending it again with them records them at the same epoch; a new
// incarnation starts without them until its own are recorded.
func TestRegisterBrokerFeatures(t *testing.T) {
	c := start(t, singleConfig(t.TempDir()))
	if _, err := c.RegisterBroker(ctxT(t), RegisterBroker{ID: 2, Host: "127.0.0.1", Port: 9092, Features: metadata.SupportedFeatures}); err != nil {
		t.Fatal(err)
	}
	reg := RegisterBroker{ID: 1, Incarnation: metadata.UUID{1}, Host: "127.0.0.1", Port: 9091}
	register := func(r RegisterBroker) int64 { t.Helper(); return mustRegister(t, c, r) }

	epoch := register(reg)
	if f := c.Image().Broker(1).Features; f != nil {
		t.Fatalf("registered without features: %v recorded", f)
	}
	if c.Image().BrokersSupport(metadata.FeatureOwedMarkers, 1) {
		t.Fatal("the cluster supports owed markers with a broker that did not say so")
	}
	reg.Features = metadata.SupportedFeatures
	if again := register(reg); again != epoch || !maps.Equal(c.Image().Broker(1).Features, metadata.SupportedFeatures) {
		t.Fatalf("sent again with features: epoch %d (was %d), features %v", again, epoch, c.Image().Broker(1).Features)
	}
	if !c.Image().BrokersSupport(metadata.FeatureOwedMarkers, 1) {
		t.Fatal("every broker recorded owed markers, the cluster does not support them")
	}

	// A restart of a build without them: a new incarnation and epoch, none.
	if _, err := c.BrokerHeartbeat(ctxT(t), HeartbeatRequest{BrokerID: 1, BrokerEpoch: epoch, WantShutdown: true}); err != nil {
		t.Fatal(err)
	}
	reg.Incarnation, reg.Features = metadata.UUID{2}, nil
	if newEpoch := register(reg); newEpoch == epoch || c.Image().Broker(1).Features != nil || c.Image().BrokersSupport(metadata.FeatureOwedMarkers, 1) {
		t.Fatalf("new incarnation without features: epoch %d (was %d), features %v", newEpoch, epoch, c.Image().Broker(1).Features)
	}
}

func TestPlanBrokerFeatures(t *testing.T) {
	img := clusterImage(t, 2)
	epoch := img.Broker(1).Epoch
	recorded := apply(t, img, &metadata.BrokerFeaturesRecord{BrokerID: 1, Epoch: epoch, Features: metadata.SupportedFeatures})
	for _, tc := range []struct {
		name     string
		img      *metadata.Image
		id       int32
		epoch    int64
		features map[string]int32
		records  int
		err      error
	}{
		{"new", img, 1, epoch, metadata.SupportedFeatures, 1, nil},
		{"recorded already", recorded, 1, epoch, metadata.SupportedFeatures, 0, nil},
		{"a higher level", recorded, 1, epoch, map[string]int32{metadata.FeatureOwedMarkers: 2}, 1, nil},
		{"unknown broker", img, 9, 1, metadata.SupportedFeatures, 0, metadata.ErrUnknownBroker},
		{"stale epoch", img, 1, epoch - 1, metadata.SupportedFeatures, 0, metadata.ErrStaleBrokerEpoch},
		{"negative level", img, 1, epoch, map[string]int32{metadata.FeatureOwedMarkers: -1}, 0, metadata.ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := PlanBrokerFeatures(tc.img, tc.id, tc.epoch, tc.features)
			if !errors.Is(err, tc.err) || len(recs) != tc.records {
				t.Fatalf("PlanBrokerFeatures: %d records, %v; want %d, %v", len(recs), err, tc.records, tc.err)
			}
			if len(recs) > 0 {
				apply(t, tc.img, recs...)
			}
		})
	}
}

// TestRegisterBrokerDirectory: a registration's data directory id is recorded
// after it; a registration without one (a controller that predates directory
// ids registered it) leaves none, and sending it again with one records it at
// the same epoch; a new incarnation with another directory has that one
// recorded.
func TestRegisterBrokerDirectory(t *testing.T) {
	c := start(t, singleConfig(t.TempDir()))
	reg := RegisterBroker{ID: 1, Incarnation: metadata.UUID{1}, Host: "127.0.0.1", Port: 9091}
	register := func(r RegisterBroker) int64 { t.Helper(); return mustRegister(t, c, r) }

	epoch := register(reg)
	if d := c.Image().Broker(1).DirectoryID; !d.IsZero() {
		t.Fatalf("registered without a directory: %v recorded", d)
	}
	reg.DirectoryID = metadata.UUID{0xd}
	if again := register(reg); again != epoch || c.Image().Broker(1).DirectoryID != reg.DirectoryID {
		t.Fatalf("sent again with a directory: epoch %d (was %d), directory %v", again, epoch, c.Image().Broker(1).DirectoryID)
	}

	if _, err := c.BrokerHeartbeat(ctxT(t), HeartbeatRequest{BrokerID: 1, BrokerEpoch: epoch, WantShutdown: true}); err != nil {
		t.Fatal(err)
	}
	reg.Incarnation, reg.DirectoryID = metadata.UUID{2}, metadata.UUID{0xe}
	if newEpoch := register(reg); newEpoch == epoch || c.Image().Broker(1).DirectoryID != reg.DirectoryID {
		t.Fatalf("new incarnation with another directory: epoch %d (was %d), directory %v", newEpoch, epoch, c.Image().Broker(1).DirectoryID)
	}
}

func mustRegister(t *testing.T, c *Controller, r RegisterBroker) int64 {
	t.Helper()
	epoch, err := c.RegisterBroker(ctxT(t), r)
	if err != nil {
		t.Fatalf("RegisterBroker: %v", err)
	}
	return epoch
}
