package controller

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestQuorumForgetsSilentObservers: the active controller lists a non-voting
// member among the quorum's observers only while it has heard from it (its
// registration or a heartbeat) in its term within observerSessionTimeout, and
// forgets it once that much time has passed without a word, as Kafka 4.4's
// leader forgets an observer (LeaderState.clearInactiveObservers); a
// heartbeat lists it again. Voters are always listed. Before, every
// non-voting member was listed, silent or not.
func TestQuorumForgetsSilentObservers(t *testing.T) {
	clock := newFakeClock()
	cl := sessionCluster(t, clock, nil)
	obs, addr := cl.startObserver(4)
	cl.registerObserver(obs, addr)

	ids := func(ms []QuorumMember) []int32 {
		var out []int32
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	err := cl.call(func(c *Controller) error {
		term := c.raft.CurrentTerm()
		heartbeat := func() error {
			img := c.Image()
			_, err := c.BrokerHeartbeat(ctxT(t), HeartbeatRequest{BrokerID: 4, BrokerEpoch: img.Broker(4).Epoch, MetadataOffset: int64(img.Offset())})
			return err
		}
		advance := func(d time.Duration) func() error {
			return func() error { clock.Advance(d); return nil }
		}
		for _, step := range []struct {
			name      string
			before    func() error
			observers []int32
		}{
			{"registered", func() error { return nil }, []int32{4}},
			{"silent since its registration for just under the observer timeout", advance(observerSessionTimeout - time.Millisecond), []int32{4}},
			{"silent since its registration for the observer timeout", advance(time.Millisecond), nil},
			{"a heartbeat", heartbeat, []int32{4}},
			{"silent since its heartbeat for just under the observer timeout", advance(observerSessionTimeout - time.Millisecond), []int32{4}},
			{"silent since its heartbeat for the observer timeout", advance(time.Millisecond), nil},
		} {
			if err := step.before(); err != nil {
				return err
			}
			st, err := c.Quorum(ctxT(t))
			if err != nil {
				return err
			}
			if c.raft.CurrentTerm() != term {
				return fmt.Errorf("%w: a new term began (the observer's progress is per term)", ErrNotController)
			}
			if !slices.Equal(ids(st.Voters), []int32{1, 2, 3}) || !slices.Equal(ids(st.Observers), step.observers) {
				t.Fatalf("%s: voters %v, observers %v; want voters [1 2 3], observers %v", step.name, ids(st.Voters), ids(st.Observers), step.observers)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
