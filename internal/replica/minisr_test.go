package replica

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
)

// TestMinISRCappedAtReplicationFactor: min.insync.replicas above the number of
// replicas asks for no more than all of them (Kafka's effectiveMinIsr): an
// acks=all write to a partition of one replica with min.insync.replicas 2 is
// accepted and acknowledged. The old code refused every such write with
// NOT_ENOUGH_REPLICAS, for good.
func TestMinISRCappedAtReplicationFactor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemClusterOn(t, 1, []int32{1}, 2)
		if _, err := c.produce(1, 3); err != nil {
			t.Fatalf("acks=all to one replica with min.insync.replicas 2: %v, want accepted", err)
		}
		if hwm := c.replica(1).HighWatermark(); hwm != 3 {
			t.Fatalf("HWM %d, want 3", hwm)
		}
	})
}

// TestHighWatermarkFrozenUnderMinISR: while the ISR is smaller than
// min.insync.replicas the leader's high-water mark does not move (Kafka's
// maybeIncrementLeaderHW since KAFKA-15583): a record only the leader holds
// is never shown to consumers nor acknowledged. An acks=all write appended
// before the ISR shrank then waits for its timeout (REQUEST_TIMED_OUT), and
// an acks=1 write stays invisible until the ISR is back to the minimum,
// which a follower rejoining or the minimum lowered (a dynamic config
// change) restores. The old code moved the HWM to the leader's log end as
// soon as the ISR was the leader alone: consumers read records held by one
// broker, and the acks=all write was answered NOT_ENOUGH_REPLICAS_AFTER_APPEND
// with its record already visible.
func TestHighWatermarkFrozenUnderMinISR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemCluster(t, 3, 2)
		if _, err := c.produce(1, 5); err != nil {
			t.Fatal(err)
		}
		leader := c.replica(1)
		c.isolate(2, true)
		c.isolate(3, true)
		res, err := leader.Append(batchtest.Build(batchtest.Options{}), -1)
		if err != nil {
			t.Fatalf("acks=all with the ISR whole: %v", err)
		}
		// The lag limit takes both followers out of the ISR during the wait.
		err = leader.WaitCommitted(context.Background(), res, 3*c.lagMax)
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("acks=all whose ISR shrank below the minimum: %v, want %v", err, ErrTimeout)
		}
		if isr := c.partition().ISR; !slices.Equal(isr, []int32{1}) {
			t.Fatalf("ISR %v, want [1]", isr)
		}
		if hwm := leader.HighWatermark(); hwm != 5 {
			t.Fatalf("HWM %d under the minimum ISR, want 5 (unchanged)", hwm)
		}
		if _, err := leader.Append(batchtest.Build(batchtest.Options{}), 1); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if hwm := leader.HighWatermark(); hwm != 5 {
			t.Fatalf("HWM %d after an acks=1 write under the minimum ISR, want 5", hwm)
		}

		// min.insync.replicas lowered to 1: the leader alone is enough.
		c.applyRecords(&metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: memTopic, Key: "min.insync.replicas", Value: "1"})
		synctest.Wait()
		if hwm := leader.HighWatermark(); hwm != 7 {
			t.Fatalf("HWM %d once min.insync.replicas is 1, want 7", hwm)
		}
	})
}

// TestHighWatermarkResumesWhenFollowerRejoins: a follower back in the ISR
// brings it to the minimum, and the high-water mark moves on over what the
// leader took meanwhile.
func TestHighWatermarkResumesWhenFollowerRejoins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemCluster(t, 3, 2)
		if _, err := c.produce(1, 5); err != nil {
			t.Fatal(err)
		}
		leader := c.replica(1)
		c.isolate(2, true)
		c.isolate(3, true)
		time.Sleep(3 * c.lagMax)
		synctest.Wait()
		if isr := c.partition().ISR; !slices.Equal(isr, []int32{1}) {
			t.Fatalf("ISR %v, want [1]", isr)
		}
		for range 3 {
			if _, err := leader.Append(batchtest.Build(batchtest.Options{}), 1); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if hwm := leader.HighWatermark(); hwm != 5 {
			t.Fatalf("HWM %d under the minimum ISR, want 5", hwm)
		}
		c.isolate(2, false)
		time.Sleep(3 * time.Second) // past the fetcher's backoff
		synctest.Wait()
		if isr := c.partition().ISR; !slices.Equal(isr, []int32{1, 2}) {
			t.Fatalf("ISR %v after 2 caught up, want [1 2]", isr)
		}
		if hwm := leader.HighWatermark(); hwm != 8 {
			t.Fatalf("HWM %d with the ISR at the minimum, want 8", hwm)
		}
		c.checkAgreement()
	})
}

// TestAcksAllChecksCommittedThenMaximalISR: acks=all checks
// min.insync.replicas twice, as Kafka's Partition does. Before the append
// (appendRecordsToLeader) it counts the committed ISR: NOT_ENOUGH_REPLICAS.
// When the write completes (checkEnoughReplicasReachOffset) it counts the
// maximal ISR, the committed one plus a follower whose expansion is in flight
// (KIP-497): NOT_ENOUGH_REPLICAS_AFTER_APPEND only if that is still too few.
// The old code counted the committed ISR for both, so a write committed
// before the ISR shrank, completing while a follower rejoined, was answered
// NOT_ENOUGH_REPLICAS_AFTER_APPEND where Kafka answers success.
func TestAcksAllChecksCommittedThenMaximalISR(t *testing.T) {
	p := newTestPartition(t, 1)
	cfg := metadata.DefaultTopicConfig()
	cfg.MinInsyncReplicas = 2
	p.setConfig(&cfg)
	now := time.Now()
	var proposed []isrChange
	p.isrProposer = func(c isrChange) { proposed = append(proposed, c) }
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1}, now); err != nil {
		t.Fatal(err)
	}
	var res AppendResult
	for range 5 {
		var err error
		if res, err = p.Append(batchtest.Build(batchtest.Options{}), -1); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(id int32, offset int64) {
		t.Helper()
		ff, err := p.ReadForFollower(followerFetch(id, offset, -1), now)
		if err != nil {
			t.Fatal(err)
		}
		ff.Chunk.Release()
	}
	fetch(2, 5)
	if hwm := p.HighWatermark(); hwm != 5 {
		t.Fatalf("HWM %d, want 5", hwm)
	}
	// The ISR shrinks to the leader alone, then 3 catches up and its
	// expansion is in flight: committed ISR [1], maximal ISR [1 3].
	if _, err := p.applyState(&metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: 1, PartitionEpoch: 1}, now); err != nil {
		t.Fatal(err)
	}
	fetch(3, 5)
	if len(proposed) != 1 || !slices.Equal(proposed[0].isr, []int32{1, 3}) {
		t.Fatalf("proposals %v, want one adding 3", proposed)
	}
	if _, err := p.Append(batchtest.Build(batchtest.Options{}), -1); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all append with the committed ISR [1]: %v, want %v", err, ErrNotEnoughReplicas)
	}
	if err := p.WaitCommitted(context.Background(), res, time.Second); err != nil {
		t.Fatalf("acks=all completion with the maximal ISR [1 3]: %v, want success", err)
	}
	// The controller refuses 3: the maximal ISR is the committed [1] again.
	p.isrChangeDone(proposed[0], nil, true, now)
	if err := p.WaitCommitted(context.Background(), res, time.Second); !errors.Is(err, ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("acks=all completion with the ISR [1]: %v, want %v", err, ErrNotEnoughReplicasAfterAppend)
	}
}
