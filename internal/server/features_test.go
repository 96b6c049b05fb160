package server

import (
	"maps"
	"testing"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/wait"
)

// TestRegistrationRecordsFeatures: a node's registration carries its
// Strata-internal features to the controller, which records them, so the
// transaction coordinator's overlap gate (every registered broker reads owed
// markers) is open on a cluster of this build; a registered broker without
// them closes it. A registration whose features the metadata lacks (as a
// controller that predates them leaves it) is sent again by the node's
// heartbeat loop until they are recorded.
func TestRegistrationRecordsFeatures(t *testing.T) {
	n := startNode(t, nodeConfig(t.TempDir()))
	id := n.cfg.NodeID
	overlap := func() bool { return n.ctrl.Image().BrokersSupport(metadata.FeatureOwedMarkers, 1) }
	if got := n.ctrl.Image().Broker(id).Features; !maps.Equal(got, metadata.SupportedFeatures) || !overlap() {
		t.Fatalf("the node's recorded features: %v, want %v (overlap %v)", got, metadata.SupportedFeatures, overlap())
	}

	reg := n.registration
	reg.Features = map[string]int32{"strata.other": 1}
	if _, err := n.ctrl.RegisterBroker(t.Context(), reg); err != nil {
		t.Fatal(err)
	}
	if overlap() {
		t.Fatal("the overlap is allowed while this node's registration lacks owed markers")
	}
	wait.For(t, "the node's features recorded again", func() bool {
		return maps.Equal(n.ctrl.Image().Broker(id).Features, metadata.SupportedFeatures)
	})

	if _, err := n.ctrl.RegisterBroker(t.Context(), controller.RegisterBroker{ID: id + 1, Host: "127.0.0.1", Port: 1}); err != nil {
		t.Fatal(err)
	}
	if overlap() {
		t.Fatal("the overlap is allowed with a registered broker that did not say it reads owed markers")
	}
}

// TestRegistrationRecordsDirectory: a node's registration carries its data
// directory id, which the controller records; while the metadata holds
// another one for this registration (or none, as a controller that predates
// directory ids leaves it), the heartbeat loop sends the registration again
// until its own is recorded.
func TestRegistrationRecordsDirectory(t *testing.T) {
	n := startNode(t, nodeConfig(t.TempDir()))
	id := n.cfg.NodeID
	if got := n.ctrl.Image().Broker(id).DirectoryID; got.IsZero() || got != n.directoryID {
		t.Fatalf("the node's recorded directory: %v, want %v", got, n.directoryID)
	}
	reg := n.registration
	reg.DirectoryID = metadata.UUID{0xe}
	if _, err := n.ctrl.RegisterBroker(t.Context(), reg); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the node's directory recorded again", func() bool {
		return n.ctrl.Image().Broker(id).DirectoryID == n.directoryID
	})
}
