package replica

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
)

// TestManyPartitionsRejoinInFewRequests: the ISR changes of many partitions
// a leader makes at once go to the controller in one AlterPartition request
// (one controller proposal) behind the one in flight, not one request each.
// The old leader sent a request per partition, and the controller committed
// each on its own: after a broker's restart, 10,000 partitions took minutes to
// rejoin (docs/benchmarks.md, session 8). Counted with the controller's
// answers held, so that every change is queued before the first is answered:
// at most two requests (the first change or few, then all the rest) for the
// shrink of every partition, and as many for the expansion; none while the
// returning broker is still fenced.
func TestManyPartitionsRejoinInFewRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 100
		c := newMemCluster(t, 3, 1)
		id := metadata.UUID{2}
		// Small indexes: the default preallocates 10 MiB per log.
		recs := []metadata.Record{&metadata.TopicRecord{Name: "many", ID: id, Configs: map[string]string{"segment.index.bytes": "4096"}}}
		for i := range int32(n) {
			recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: i, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1})
		}
		c.applyRecords(recs...)
		synctest.Wait()

		inISR := func() (in int) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, p := range c.img.Topic("many").Partitions {
				if slices.Contains(p.ISR, 3) {
					in++
				}
			}
			return in
		}
		requests := func(step func()) int {
			_, release := c.holdISR()
			step()
			synctest.Wait()
			c.mu.Lock()
			before := c.isrRequests
			c.mu.Unlock()
			release()
			synctest.Wait()
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.isrRequests - before
		}

		shrinks := requests(func() {
			c.isolate(3, true)
			time.Sleep(2 * c.lagMax)
		})
		if in := inISR(); in != 0 {
			t.Fatalf("broker 3 cut off is still in %d of %d ISRs", in, n)
		}
		// Back, but fenced (a restarted broker fetches before the controller
		// unfences it): the leader proposes nothing the controller would refuse.
		c.applyRecords(&metadata.FenceBrokerRecord{BrokerID: 3, Epoch: 1})
		if fenced := requests(func() {
			c.isolate(3, false)
			time.Sleep(time.Second)
		}); fenced != 0 {
			t.Errorf("%d AlterPartition requests adding a fenced broker, want none", fenced)
		}
		expands := requests(func() {
			c.applyRecords(&metadata.UnfenceBrokerRecord{BrokerID: 3, Epoch: 1})
			time.Sleep(time.Second)
		})
		if in := inISR(); in != n {
			t.Fatalf("broker 3 rejoined %d of %d ISRs", in, n)
		}
		if shrinks > 2 || expands > 2 {
			t.Errorf("AlterPartition requests for %d partitions: %d to shrink, %d to expand; want at most 2 each", n, shrinks, expands)
		}
	})
}
