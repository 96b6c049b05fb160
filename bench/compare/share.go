package main

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/bench"
)

// The share-group rows (issue 17's figures), franz-go's share consumer against
// both brokers:
//
//   - records/s read by a new share group of 1, 4 and 16 members (-share-members)
//     on one partition of -share-records 1 KiB records, accepting every record;
//     timed from when every member holds its assignment (bench.Share);
//   - the same records read by a classic consumer group of one member (one
//     partition gives a classic group one reader);
//   - acknowledgement latency: one member accepts each poll's records and waits
//     for the broker to confirm them (FlushAcks, Java's commitSync), over
//     -share-small-records records: p50 and p99 of that wait, and records/s;
//   - dead-lettering: one member rejects every record of -share-small-records,
//     the group's errors.deadletterqueue.topic.name is a fresh dlq.* topic:
//     records/s from the first delivery to the last record written there.
//
// Both topics are filled once per system before the rows, untimed; each run
// reads them from the start with a new group.

// shareRunBound bounds one share run (both brokers must read the topic within it).
const shareRunBound = 3 * time.Minute

// shareTopics are the two topics the share rows read.
const (
	shareTopic      = "share-src"
	shareSmallTopic = "share-small"
)

func runShare(ctx context.Context, o options, p *pairing, brokers map[string]*system) error {
	t := &extraTable{
		Title: "Share groups (KIP-932), one partition, 1 KiB records, franz-go " + moduleVersion("github.com/twmb/franz-go"),
		Note: fmt.Sprintf("Each run is a new group reading %d records (%d for the acknowledgement and dead-letter rows) "+
			"from the start; share-group records/s count from when every member holds its assignment; the "+
			"classic group's from its assignment. Broker defaults on both sides: at most 2000 records in flight "+
			"per share partition, 30 s locks. Dead-letter records carry the origin headers only "+
			"(errors.deadletterqueue.copy.record.enable is false by default).", o.extras.shareRecords, o.extras.shareSmallRecords),
	}
	p.Extras = append(p.Extras, t)
	for _, sys := range []string{"strata", "kafka"} {
		for _, fill := range []struct {
			topic string
			n     int64
		}{{shareTopic, o.extras.shareRecords}, {shareSmallTopic, o.extras.shareSmallRecords}} {
			c := shareConfig(o, brokers[sys].seeds, fill.topic, fill.n)
			fillCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			n, err := bench.Prefill(fillCtx, c)
			cancel()
			if err != nil {
				return fmt.Errorf("%s: filling %s: %w", sys, fill.topic, err)
			}
			logf("[%s] %s: filled %s with %d records (untimed)", p.Name, sys, fill.topic, n)
		}
	}

	for _, members := range o.extras.shareMembers {
		row := fmt.Sprintf("share group, %d member%s, accept", members, plural(members))
		err := alternate(ctx, o, p, brokers, t, row, func(ctx context.Context, sys string, seeds []string, round int) ([]measure, any, error) {
			c := shareConfig(o, seeds, shareTopic, o.extras.shareRecords)
			c.Consumers, c.ShareAck = members, bench.ShareAccept
			c.Group = fmt.Sprintf("share-%d-r%d", members, round)
			res, err := bench.Share(ctx, c)
			return []measure{{metric: "records/s", value: res.RecordsPerSec}}, res, err
		})
		if err != nil {
			return err
		}
	}
	err := alternate(ctx, o, p, brokers, t, "classic group, 1 member", func(ctx context.Context, sys string, seeds []string, round int) ([]measure, any, error) {
		c := shareConfig(o, seeds, shareTopic, o.extras.shareRecords)
		c.ShareAck, c.Group = bench.ShareClassic, fmt.Sprintf("classic-r%d", round)
		res, err := bench.Share(ctx, c)
		return []measure{{metric: "records/s", value: res.RecordsPerSec}}, res, err
	})
	if err != nil {
		return err
	}
	err = alternate(ctx, o, p, brokers, t, "share group, 1 member, accept and wait after each poll", func(ctx context.Context, sys string, seeds []string, round int) ([]measure, any, error) {
		c := shareConfig(o, seeds, shareSmallTopic, o.extras.shareSmallRecords)
		c.ShareAck, c.Group = bench.ShareAckEach, fmt.Sprintf("ack-each-r%d", round)
		res, err := bench.Share(ctx, c)
		return []measure{
			{metric: "records/s", value: res.RecordsPerSec},
			{metric: "ack p50 ms", value: res.Latency.P50, lowerIsBetter: true},
			{metric: "ack p99 ms", value: res.Latency.P99, lowerIsBetter: true},
		}, res, err
	})
	if err != nil {
		return err
	}
	return alternate(ctx, o, p, brokers, t, "share group, 1 member, reject all to a dead-letter topic", func(ctx context.Context, sys string, seeds []string, round int) ([]measure, any, error) {
		c := shareConfig(o, seeds, shareSmallTopic, o.extras.shareSmallRecords)
		c.ShareAck, c.Group = bench.ShareReject, fmt.Sprintf("reject-r%d", round)
		c.DeadLetterTopic = fmt.Sprintf("dlq.share-r%d", round)
		res, err := bench.Share(ctx, c)
		return []measure{{metric: "records/s dead-lettered", value: res.RecordsPerSec}}, res, err
	})
}

// shareConfig is a share run over topic, filled to n 1 KiB records if it holds fewer.
func shareConfig(o options, seeds []string, topic string, n int64) bench.Config {
	return bench.Config{
		Brokers: seeds, Topic: topic, Partitions: 1, ReplicationFactor: int16(o.nodes),
		RecordSize: 1024, Count: n, Duration: shareRunBound,
		Acks: bench.AcksAll, Compression: "none", Producers: 1, Consumers: 1, Linger: bench.DefaultLinger,
		ClientOpts: []kgo.Opt{kgo.ClientID("strata-vs-kafka")},
	}
}

// moduleVersion is the version of a module this binary was built with.
func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return "(version unknown)"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
