package replica

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
)

// TestStaleBrokerEpochFetchDoesNotJoinISR: a follower whose fetches carry a
// broker epoch other than its current registration's (an earlier process of
// the broker, KIP-903) is not proposed for the ISR however caught up it is;
// with the registration's epoch it is, and the AlterPartition names that
// epoch for the controller to check (PlanAlterPartition).
func TestStaleBrokerEpochFetchDoesNotJoinISR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemCluster(t, 3, 1)
		inISR := func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return slices.Contains(c.img.Topic(memTopic).Partitions[0].ISR, 3)
		}
		c.isolate(3, true)
		time.Sleep(2 * c.lagMax)
		if inISR() {
			t.Fatal("broker 3 cut off is still in the ISR")
		}
		// Broker 3 registered again (epoch 2) while a process of epoch 1
		// still fetches.
		c.applyRecords(&metadata.RegisterBrokerRecord{BrokerID: 3, Epoch: 2, Host: "127.0.0.1", Port: 9092})
		c.isolate(3, false)
		time.Sleep(time.Second)
		synctest.Wait()
		if inISR() {
			t.Fatal("broker 3 rejoined the ISR on fetches of its earlier registration (epoch 1, current 2)")
		}
		c.nodes[3].epoch.Store(2)
		time.Sleep(time.Second)
		synctest.Wait()
		if !inISR() {
			t.Fatal("broker 3 fetching at its current epoch did not rejoin the ISR")
		}
		// The expansion named each member's broker epoch for the controller
		// to check: the leader's own and broker 3's as its fetches carried it.
		c.mu.Lock()
		last := c.isrChanges[len(c.isrChanges)-1]
		c.mu.Unlock()
		want := map[int32]int64{1: 1, 3: 2}
		for i, id := range last.ISR {
			if e, ok := want[id]; ok && (i >= len(last.BrokerEpochs) || last.BrokerEpochs[i] != e) {
				t.Fatalf("expansion %v sent broker epochs %v, want %d for broker %d", last.ISR, last.BrokerEpochs, e, id)
			}
		}
	})
}
