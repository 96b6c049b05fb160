package server

import (
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestIdleLongPollReadsOnce: a Fetch of many idle partitions that waits out
// its max wait reads them once: the read made after its watchers are set
// and the one when the wait ends are skipped while no partition shows
// anything new. A follower's fetch session names thousands of partitions, so
// these reads were most of an idle cluster's CPU (docs/benchmarks.md,
// session 10). Counted as allocations per request: each read allocates
// about one per partition.
func TestIdleLongPollReadsOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	const topic, partitions = "idle", 200
	n := startBenchNode(t)
	createBenchTopic(t, n, topic, partitions)
	c := dialRaw(t, n.KafkaAddr())

	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 5, 1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for i := range int32(partitions) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.LogStartOffset, rp.CurrentLeaderEpoch = i, 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	frame := requestFrame(req, 12)
	allocs := math.Inf(1)
	for range 3 {
		allocs = min(allocs, testing.AllocsPerRun(20, func() { c.roundTrip(t, frame) }))
	}
	// Measured: 236 (a read, about one allocation per partition, and the
	// wait); 825 before (three reads, and one deferred unwatch per
	// partition).
	if allocs > 1.5*partitions {
		t.Errorf("idle fetch of %d partitions: %v allocations per request, want at most %v (one read)", partitions, allocs, 1.5*partitions)
	} else {
		t.Logf("idle fetch of %d partitions: %v allocations per request", partitions, allocs)
	}
}
