package server

import (
	"context"
	"encoding/binary"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/wait"
)

// TestIdleLongPollReadsOnce: a Fetch of many idle partitions that waits out
// its max wait reads them once: the read made after its watchers are set
// and the one when the wait ends are skipped while no partition shows
// anything new. A follower's fetch session names thousands of partitions, so
// these reads were most of an idle cluster's CPU (docs/benchmarks.md,
// session 10). Counted as allocations per request: a read allocates
// nothing per partition that has no data.
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
	// Measured: 25 (a read that allocates nothing per partition, and the
	// wait); 233-236 before (each partition's empty chunk escaped to the
	// heap), 825 before session 10 (three reads, and one deferred unwatch
	// per partition).
	if allocs > partitions/4 {
		t.Errorf("idle fetch of %d partitions: %v allocations per request, want at most %v (one read, none per partition)", partitions, allocs, partitions/4)
	} else {
		t.Logf("idle fetch of %d partitions: %v allocations per request", partitions, allocs)
	}
}

// TestIdleFollowerSessionPoll: an incremental Fetch of a follower's session
// (KIP-227) that names nothing, on an idle leader, waits out its max wait at a
// cost that does not grow with the session's partitions: the session's
// request is not rebuilt, and nothing is allocated per partition. Node 1 of
// two leads half of 400 partitions; the test fetches them as follower 2 (as
// node 2's own fetcher does beside it). Counted as allocations per request,
// the whole process's: both nodes' background work is in the count, and is
// the same for 40 partitions as for 400.
func TestIdleFollowerSessionPoll(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	const topic, partitions = "idle", 400
	c := startCluster(t, 2)
	_, adm := c.client()
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, partitions, 2, nil, topic); err != nil {
		t.Fatal(err)
	}
	var led []int32 // by node 1
	wait.For(t, "a leader for every partition", func() bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil || len(md.Topics[topic].Partitions) != partitions {
			return false
		}
		led = led[:0]
		for _, p := range md.Topics[topic].Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
			if p.Leader == 1 {
				led = append(led, p.Partition)
			}
		}
		return true
	})
	conn := dialRaw(t, c.nodes[0].KafkaAddr())
	perRequest := func(n int) float64 {
		t.Helper()
		full := kmsg.NewPtrFetchRequest()
		full.ReplicaID, full.MaxWaitMillis, full.MinBytes, full.MaxBytes = 2, 1, 1, 1<<20
		full.SessionID, full.SessionEpoch = 0, 0 // open a session
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for _, p := range led[:n] {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes, rp.LogStartOffset, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = p, 1<<20, -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		full.Topics = append(full.Topics, rt)
		var resp *kmsg.FetchResponse
		// Until node 1 has applied the topic, some partitions answer
		// NOT_LEADER_OR_FOLLOWER: open sessions until one has them all.
		wait.For(t, "a session whose partitions are all served", func() bool {
			resp = kmsg.NewPtrFetchResponse()
			resp.SetVersion(12)
			if err := resp.ReadFrom(conn.roundTrip(t, requestFrame(full, 12))[1:]); err != nil {
				t.Fatal(err)
			}
			if resp.ErrorCode != 0 || resp.SessionID == 0 {
				t.Fatalf("full fetch: error %d, session %d", resp.ErrorCode, resp.SessionID)
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 {
						return false
					}
				}
			}
			return true
		})
		const runs = 20
		var frames [][]byte // built first: the encoding is the test's
		for epoch := int32(1); epoch <= 3*(runs+1); epoch++ {
			inc := kmsg.NewPtrFetchRequest()
			inc.ReplicaID, inc.MaxWaitMillis, inc.MinBytes, inc.MaxBytes = 2, 1, 1, 1<<20
			inc.SessionID, inc.SessionEpoch = resp.SessionID, epoch
			frames = append(frames, requestFrame(inc, 12))
		}
		allocs := math.Inf(1)
		for range 3 {
			allocs = min(allocs, testing.AllocsPerRun(runs, func() {
				body := conn.roundTrip(t, frames[0])
				frames = frames[1:]
				if code := int16(binary.BigEndian.Uint16(body[5:])); code != 0 {
					t.Fatalf("incremental fetch: error %d", code)
				}
			}))
		}
		return allocs
	}
	small, large := perRequest(len(led)/10), perRequest(len(led))
	// Measured: 24-28 for both; before, 56 for 20 partitions and 242 for
	// 200 (each partition's empty chunk escaped to the heap, the session's
	// request was built again and the watched list grown on every poll).
	t.Logf("idle incremental fetch: %v allocations per request for %d partitions, %v for %d", small, len(led)/10, large, len(led))
	if large > small+10 {
		t.Errorf("idle incremental fetch: %v allocations per request for %d partitions, %v for %d: want about the same", small, len(led)/10, large, len(led))
	}
}
