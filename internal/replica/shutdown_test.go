package replica

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-stream/strata/internal/batch/batchtest"
)

// TestFollowerInControlledShutdownHoldsNoAcks: a follower in controlled
// shutdown neither holds the leader's high-water mark nor is proposed back
// into the ISR (Kafka's Partition.isReplicaIsrEligible reads the broker's
// in-controlled-shutdown state from the metadata image, KIP-841). Three
// replicas, min.insync.replicas 2: follower 3 asks for a controlled shutdown,
// the controller takes it out of the ISR, and it then stalls before it
// stops. An acks=all write is acknowledged by 1 and 2 at once. The old code
// could not tell a shutting-down follower from a live one: the caught-up
// follower outside the ISR held the high-water mark until
// replica.lag.time.max.ms after its last fetch, and the leader proposed it
// back into the ISR, to be refused (INELIGIBLE_REPLICA).
func TestFollowerInControlledShutdownHoldsNoAcks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemCluster(t, 3, 2)
		if _, err := c.produce(1, 5); err != nil {
			t.Fatal(err)
		}
		c.controlledShutdown(3)
		if isr := c.partition().ISR; !slices.Equal(isr, []int32{1, 2}) {
			t.Fatalf("ISR %v after 3's controlled shutdown began, want [1 2]", isr)
		}
		c.mu.Lock()
		proposedBefore := len(c.isrChanges)
		c.mu.Unlock()
		// 3 keeps fetching while it hands off what it holds elsewhere.
		if _, err := c.produce(1, 5); err != nil {
			t.Fatal(err)
		}
		time.Sleep(c.lagMax / 10)
		synctest.Wait()

		c.isolate(3, true) // it stalls before it stops
		start := time.Now()
		res, err := c.replica(1).Append(batchtest.Build(batchtest.Options{}), -1)
		if err == nil {
			err = c.replica(1).WaitCommitted(context.Background(), res, 3*c.lagMax)
		}
		if err != nil {
			t.Fatalf("acks=all with 3 stalled in controlled shutdown: %v", err)
		}
		if waited := time.Since(start); waited > c.lagMax/10 {
			t.Errorf("acks=all took %v with 3 stalled in controlled shutdown, want no wait for 3 (replica.lag.time.max.ms %v)", waited, c.lagMax)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, ch := range c.isrChanges[proposedBefore:] {
			if slices.Contains(ch.ISR, 3) {
				t.Fatalf("the leader proposed ISR %v, with 3 in controlled shutdown", ch.ISR)
			}
		}
	})
}
