package controller

import (
	"errors"
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

// TestBrokerEpochsNeverReused registers a broker, unregisters it, registers
// it again, restarts the controller from a snapshot and registers it twice
// more: each epoch is above every earlier one, and requests carrying an
// earlier epoch are refused with STALE_BROKER_EPOCH. Before epochs came from
// the metadata offset, a registration after UnregisterBroker started again at
// epoch 1, so a heartbeat of the unregistered process was taken for the new
// one's (docs/reliability.md, finding 11).
func TestBrokerEpochsNeverReused(t *testing.T) {
	dir := t.TempDir()
	cfg := singleConfig(dir)
	cfg.TrailingLogs = 1
	c := start(t, cfg)
	registerAndCreate(t, c, 3, "orders")

	var seen []int64
	incarnation := byte(0)
	register := func(c *Controller, what string) int64 {
		t.Helper()
		incarnation++
		epoch, err := c.RegisterBroker(ctxT(t), RegisterBroker{ID: 4, Incarnation: metadata.UUID{incarnation}, Host: "127.0.0.1", Port: 9094})
		if err != nil {
			t.Fatalf("%s: RegisterBroker: %v", what, err)
		}
		for _, e := range seen {
			if epoch <= e {
				t.Fatalf("%s: epoch %d, not above the earlier %v", what, epoch, seen)
			}
		}
		if b := c.Image().Broker(4); b == nil || b.Epoch != epoch {
			t.Fatalf("%s: image holds %+v, want epoch %d", what, b, epoch)
		}
		seen = append(seen, epoch)
		return epoch
	}
	stale := func(c *Controller, what string, epoch int64) {
		t.Helper()
		if _, err := c.BrokerHeartbeat(ctxT(t), HeartbeatRequest{BrokerID: 4, BrokerEpoch: epoch}); !errors.Is(err, metadata.ErrStaleBrokerEpoch) {
			t.Errorf("%s: heartbeat with epoch %d: %v, want STALE_BROKER_EPOCH", what, epoch, err)
		}
		if _, err := c.AllocateProducerIDs(ctxT(t), 4, epoch); !errors.Is(err, metadata.ErrStaleBrokerEpoch) {
			t.Errorf("%s: AllocateProducerIDs with epoch %d: %v, want STALE_BROKER_EPOCH", what, epoch, err)
		}
	}
	unregister := func(c *Controller) {
		t.Helper()
		if err := c.UnregisterBroker(ctxT(t), 4); err != nil {
			t.Fatalf("UnregisterBroker: %v", err)
		}
	}

	first := register(c, "first registration")
	if _, err := c.BrokerHeartbeat(ctxT(t), HeartbeatRequest{BrokerID: 4, BrokerEpoch: first}); err != nil {
		t.Fatalf("heartbeat of the current epoch: %v", err)
	}
	unregister(c)
	second := register(c, "after UnregisterBroker")
	stale(c, "after UnregisterBroker", first)
	if _, err := c.BrokerHeartbeat(ctxT(t), HeartbeatRequest{BrokerID: 4, BrokerEpoch: second}); err != nil {
		t.Fatalf("heartbeat of the new epoch: %v", err)
	}

	if err := c.raft.Snapshot().Error(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = start(t, cfg)
	stale(c, "after a restart", first)
	register(c, "after a restart from a snapshot")
	unregister(c)
	register(c, "after a restart and UnregisterBroker")
	for _, e := range seen[:len(seen)-1] {
		stale(c, "at the end", e)
	}
}

// TestPlanRegisterBrokerEpochFromOffset: a registration's epoch is one above
// the offset of the image it is planned against, whatever the id held before.
func TestPlanRegisterBrokerEpochFromOffset(t *testing.T) {
	req := RegisterBroker{ID: 4, Incarnation: metadata.UUID{1}, Host: "h", Port: 9092}
	img := clusterImage(t, 3).WithOffset(41)
	recs, epoch, err := PlanRegisterBroker(img, req, false, nil)
	if err != nil || epoch != 42 {
		t.Fatalf("registration at offset 41 = %d, %v; want epoch 42", epoch, err)
	}
	img = apply(t, img, recs...).WithOffset(42)
	recs, err = PlanUnregisterBroker(img, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	img = apply(t, img, recs...).WithOffset(43)
	req.Incarnation = metadata.UUID{2}
	if _, epoch, err = PlanRegisterBroker(img, req, false, nil); err != nil || epoch != 44 {
		t.Fatalf("registration after UnregisterBroker at offset 43 = %d, %v; want epoch 44", epoch, err)
	}
}
