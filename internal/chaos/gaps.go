package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// offsetGap is a range [From, To) of a partition's offsets that a read of
// every offset did not return.
type offsetGap struct{ From, To int64 }

// findGaps returns the ranges of [start, end) that offsets (every offset a
// read returned, in any order, repeats allowed) leave out.
func findGaps(start, end int64, offsets []int64) []offsetGap {
	offs := slices.Sorted(slices.Values(offsets))
	var gaps []offsetGap
	next := start
	for _, o := range offs {
		if o < next {
			continue
		}
		if o >= end {
			break
		}
		if o > next {
			gaps = append(gaps, offsetGap{next, o})
		}
		next = o + 1
	}
	if next < end {
		gaps = append(gaps, offsetGap{next, end})
	}
	return gaps
}

// checkEveryOffset reads every partition of topic from its log start up to
// end (its sentinel, exclusive) with read_uncommitted, control records
// included, and returns a finding for every range of offsets the read did not
// return. A log that is never compacted has dense offsets, so such a range is
// data no reader can see, and a read_committed reader skips it silently: a
// fetch answered with batches from past the offset asked for looks like
// compaction to a client. Each finding says where the range lies against the
// partition's earliest-local offset (below it the object store serves reads)
// and the end of its uploaded part.
func checkEveryOffset(seeds brokers, topic string, partitions int32, end map[int32]int64, timeout time.Duration) []string {
	cl, err := kgo.NewClient(append(clientOpts(seeds, "chaos-every-offset"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: everyPartitionAtStart(partitions)}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond),
	)...)
	if err != nil {
		return []string{fmt.Sprintf("reading every offset of %s: %v", topic, err)}
	}
	defer cl.Close()
	start, err := listOffsets(cl, topic, partitions, -2)
	if err != nil {
		return []string{fmt.Sprintf("the log start offsets of %s: %v", topic, err)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	seen := map[int32][]int64{}
	reached := map[int32]bool{}
	for p := range partitions {
		if end[p] <= start[p] {
			reached[p] = true
		}
	}
	var findings []string
	for len(reached) < int(partitions) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			findings = append(findings, fmt.Sprintf("reading every offset of %s: read %d of %d partitions up to their sentinels in %v", topic, len(reached), partitions, timeout))
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end[r.Partition] {
				reached[r.Partition] = true
				return
			}
			seen[r.Partition] = append(seen[r.Partition], r.Offset)
		})
	}
	local, errLocal := listOffsets(cl, topic, partitions, -4)
	uploaded, errUploaded := listOffsets(cl, topic, partitions, -5)
	for p := range partitions {
		for _, g := range findGaps(start[p], end[p], seen[p]) {
			where := "local offsets unknown"
			switch {
			case errLocal != nil || errUploaded != nil:
			case g.To <= local[p]:
				where = "below the earliest-local offset: the remote part"
			case g.From >= local[p]:
				where = "at or above the earliest-local offset: the local log"
			default:
				where = "across the earliest-local offset: remote and local"
			}
			findings = append(findings, fmt.Sprintf("%s-%d: offsets [%d, %d) are missing from a read of every offset from the log start %d (%s; earliest-local %d, uploaded up to %d)",
				topic, p, g.From, g.To, start[p], where, local[p], uploaded[p]))
		}
	}
	return findings
}

// everyPartitionAtStart is partitions 0..n-1, each consumed from its start.
func everyPartitionAtStart(n int32) map[int32]kgo.Offset {
	out := map[int32]kgo.Offset{}
	for p := range n {
		out[p] = kgo.NewOffset().AtStart()
	}
	return out
}
