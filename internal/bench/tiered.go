package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TieredOptions are a Tiered run's settings beyond its Config.
type TieredOptions struct {
	Rounds              int   // produce rounds; each runs both topics
	SegmentBytes        int64 // segment.bytes of every topic
	LocalRetentionBytes int64 // local.retention.bytes of the tiered topics
	ReadRecords         int64 // records each read pass reads
	// SettleTimeout bounds each wait for the brokers' uploads and local
	// retention.
	SettleTimeout time.Duration
	// Step, if set, is told of each finished step, for people watching.
	Step func(msg string)
}

func (o TieredOptions) step(format string, args ...any) {
	if o.Step != nil {
		o.Step(fmt.Sprintf(format, args...))
	}
}

// settleQuiet is how long a tiered topic's uploaded end must stay put before
// its uploads count as caught up: longer than the brokers' upload interval.
var settleQuiet = 3 * time.Second

// TieredResult is what a Tiered run measured.
type TieredResult struct {
	Mode                string `json:"mode"` // "tiered"
	RecordSize          int    `json:"record_size"`
	SegmentBytes        int64  `json:"segment_bytes"`
	LocalRetentionBytes int64  `json:"local_retention_bytes"`

	// Produce rounds, in the order run within each round.
	Plain  []Result `json:"plain_produce"`
	Tiered []Result `json:"tiered_produce"`
	// Median records/s of each, and tiered / plain.
	PlainMedian  float64 `json:"plain_median_records_per_second"`
	TieredMedian float64 `json:"tiered_median_records_per_second"`
	ProduceRatio float64 `json:"produce_ratio"`

	// RemoteRecords are the tiered topic's records below its local start when
	// the reads began (served from the object store).
	RemoteRecords int64      `json:"remote_records"`
	Reads         []ReadPass `json:"reads"`
	// Remote read records/s over local, first pass (cold) and second (cached).
	ReadRatioCold   float64 `json:"read_ratio_cold"`
	ReadRatioCached float64 `json:"read_ratio_cached"`
}

// ReadPass is one read of a topic from its start.
type ReadPass struct {
	Source string `json:"source"` // "remote" (the tiered topic) or "local" (the plain one)
	Pass   int    `json:"pass"`   // 1: the first read of that topic, 2: the second
	Result Result `json:"result"`
}

// Validate checks the settings Tiered adds; its complaints wrap ErrInvalidConfig.
func (o TieredOptions) Validate() error {
	bad := invalidConfig
	switch {
	case o.Rounds < 1:
		return bad("rounds must be at least 1, got %d", o.Rounds)
	case o.SegmentBytes < 1:
		return bad("segment bytes must be positive, got %d", o.SegmentBytes)
	case o.LocalRetentionBytes < 0:
		return bad("local retention bytes must not be negative, got %d", o.LocalRetentionBytes)
	case o.ReadRecords < 1:
		return bad("read records must be at least 1, got %d", o.ReadRecords)
	case o.SettleTimeout <= 0:
		return bad("settle timeout must be positive, got %s", o.SettleTimeout)
	}
	return nil
}

// Tiered measures what tiered storage costs and how remote reads compare with
// local ones. The brokers must have remote storage (strata server
// --remote-storage URL); they upload and apply local retention on their own
// schedules (--remote-upload-interval, --log-cleanup-interval), which the run
// waits for.
//
//  1. Produce rounds, alternating: each round produces Config.Duration (or
//     Config.Count) to a fresh plain topic and to a fresh topic with
//     remote.storage.enable=true, both with segment.bytes SegmentBytes (the
//     tiered one with local.retention.bytes LocalRetentionBytes), the order
//     swapped every round. After each tiered run the brokers are left to
//     finish its uploads, so the next run does not pay for them.
//  2. Read passes over the last round's two topics from their start,
//     ReadRecords each (no more than the tiered topic holds only remotely):
//     the tiered topic, whose blocks nobody read before (a cold block cache),
//     then the plain one, then both again (the tiered one now from the
//     brokers' block cache if --remote-cache-size holds ReadRecords).
func Tiered(ctx context.Context, c Config, o TieredOptions) (TieredResult, error) {
	res := TieredResult{Mode: "tiered", RecordSize: c.RecordSize, SegmentBytes: o.SegmentBytes, LocalRetentionBytes: o.LocalRetentionBytes}
	if err := c.Validate("produce"); err != nil {
		return res, err
	}
	if err := o.Validate(); err != nil {
		return res, err
	}
	segment := strconv.FormatInt(o.SegmentBytes, 10)
	topic := func(kind string, round int) Config {
		t := c
		t.Topic = fmt.Sprintf("%s-%s-r%d", c.Topic, kind, round)
		t.TopicConfigs = map[string]string{"segment.bytes": segment}
		if kind == "tiered" {
			t.TopicConfigs["remote.storage.enable"] = "true"
			t.TopicConfigs["local.retention.bytes"] = strconv.FormatInt(o.LocalRetentionBytes, 10)
		}
		return t
	}
	var plain, tiered Config
	for round := 1; round <= o.Rounds; round++ {
		order := []string{"plain", "tiered"}
		if round%2 == 0 {
			order = []string{"tiered", "plain"}
		}
		for _, kind := range order {
			tc := topic(kind, round)
			r, err := Produce(ctx, tc)
			if err != nil {
				return res, fmt.Errorf("round %d, %s topic: %w", round, kind, err)
			}
			o.step("round %d, %s topic %s: %.0f records/s", round, kind, tc.Topic, r.RecordsPerSec)
			if kind == "plain" {
				res.Plain, plain = append(res.Plain, r), tc
				continue
			}
			res.Tiered, tiered = append(res.Tiered, r), tc
			began := time.Now()
			if _, err := settle(ctx, tc, o.SettleTimeout, false); err != nil {
				return res, fmt.Errorf("round %d: %w", round, err)
			}
			o.step("round %d: uploads of %s caught up in %s", round, tc.Topic, time.Since(began).Round(time.Millisecond))
		}
	}
	res.PlainMedian, res.TieredMedian = medianRate(res.Plain), medianRate(res.Tiered)
	res.ProduceRatio = ratio(res.TieredMedian, res.PlainMedian)

	remote, err := settle(ctx, tiered, o.SettleTimeout, true)
	if err != nil {
		return res, err
	}
	res.RemoteRecords = remote
	o.step("%s holds %d records only remotely", tiered.Topic, remote)
	n := min(o.ReadRecords, remote)
	for pass := 1; pass <= 2; pass++ {
		for _, src := range []struct {
			name string
			c    Config
		}{{"remote", tiered}, {"local", plain}} {
			rc := src.c
			rc.Count, rc.Duration = n, 0
			r, err := Consume(ctx, rc)
			if err != nil {
				return res, fmt.Errorf("read pass %d of the %s topic: %w", pass, src.name, err)
			}
			res.Reads = append(res.Reads, ReadPass{Source: src.name, Pass: pass, Result: r})
			o.step("read pass %d, %s topic %s: %.0f records/s", pass, src.name, rc.Topic, r.RecordsPerSec)
		}
	}
	res.ReadRatioCold = ratio(res.Reads[0].Result.RecordsPerSec, res.Reads[1].Result.RecordsPerSec)
	res.ReadRatioCached = ratio(res.Reads[2].Result.RecordsPerSec, res.Reads[3].Result.RecordsPerSec)
	return res, nil
}

func medianRate(rs []Result) float64 {
	if len(rs) == 0 {
		return 0
	}
	rates := make([]float64, len(rs))
	for i, r := range rs {
		rates[i] = r.RecordsPerSec
	}
	slices.Sort(rates)
	if len(rates)%2 == 1 {
		return rates[len(rates)/2]
	}
	return (rates[len(rates)/2-1] + rates[len(rates)/2]) / 2
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// tierOffsets are one partition's offsets as ListOffsets gives them.
type tierOffsets struct {
	earliest, earliestLocal, uploadedEnd int64
}

// ListOffsets special timestamps for a tiered partition (KIP-405, KIP-1005).
const (
	earliestTimestamp              = -2
	earliestLocalTimestamp         = -4
	earliestPendingUploadTimestamp = -5
)

// settle waits until the tiered topic's uploads have caught up: the uploaded
// end of every partition unchanged for settleQuiet. With needRemote it also
// waits until the brokers' local retention has moved the local start of some
// partition past its start, and until the local starts too stay put for
// settleQuiet. It returns how many records lie below the local starts.
func settle(ctx context.Context, c Config, timeout time.Duration, needRemote bool) (int64, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOpts...)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	var last map[int32]tierOffsets
	var since time.Time
	for {
		cur, err := listTierOffsets(ctx, cl, c.Topic)
		if err != nil && ctx.Err() != nil {
			return 0, err
		}
		var remote int64
		for _, o := range cur {
			remote += o.earliestLocal - o.earliest
		}
		switch {
		case err != nil || !maps.Equal(cur, last):
			last, since = cur, time.Now()
		case time.Since(since) >= settleQuiet && (!needRemote || remote > 0):
			return remote, nil
		}
		if time.Now().After(deadline) {
			why := "its uploads did not stop"
			if err != nil {
				why = err.Error()
			} else if needRemote && remote == 0 {
				why = "nothing left local storage (a shorter --log-cleanup-interval on the brokers helps)"
			}
			return 0, fmt.Errorf("tiered topic %q not settled after %s: %s", c.Topic, timeout, why)
		}
		if !sleepUntil(ctx, time.Now().Add(500*time.Millisecond)) {
			return 0, ctx.Err()
		}
	}
}

// listTierOffsets lists the earliest, earliest-local and earliest-pending-upload
// offsets of every partition of topic.
func listTierOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]tierOffsets, error) {
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(mresp.Topics) != 1 {
		return nil, fmt.Errorf("topic %q: metadata for %d topics", topic, len(mresp.Topics))
	}
	if err := kerr.ErrorForCode(mresp.Topics[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("topic %q: %w", topic, err)
	}
	out := map[int32]tierOffsets{}
	for _, ts := range []int64{earliestTimestamp, earliestLocalTimestamp, earliestPendingUploadTimestamp} {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for _, p := range mresp.Topics[0].Partitions {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p.Partition, ts, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, err
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("topic %q partition %d, timestamp %d: %w", topic, p.Partition, ts, err)
				}
				o := out[p.Partition]
				switch ts {
				case earliestTimestamp:
					o.earliest = p.Offset
				case earliestLocalTimestamp:
					o.earliestLocal = p.Offset
				default:
					o.uploadedEnd = p.Offset
				}
				out[p.Partition] = o
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no partitions listed")
	}
	return out, nil
}

// WriteTable prints r for people.
func (r TieredResult) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(name, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", name, fmt.Sprintf(format, args...))
	}
	rates := func(rs []Result) string {
		s := ""
		for i, x := range rs {
			if i > 0 {
				s += " / "
			}
			s += strconv.FormatFloat(x.RecordsPerSec, 'f', 0, 64)
		}
		return s
	}
	row("mode", "tiered: %d B records, segment.bytes %d, local.retention.bytes %d", r.RecordSize, r.SegmentBytes, r.LocalRetentionBytes)
	row("produce, plain", "%.0f records/s median (%s)", r.PlainMedian, rates(r.Plain))
	row("produce, tiered", "%.0f records/s median (%s)", r.TieredMedian, rates(r.Tiered))
	row("produce tiered / plain", "%.2f", r.ProduceRatio)
	row("remote records", "%d below the tiered topic's local start", r.RemoteRecords)
	for _, p := range r.Reads {
		row(fmt.Sprintf("read %s, pass %d", p.Source, p.Pass), "%.0f records/s, %.2f MB/s (%d records)", p.Result.RecordsPerSec, p.Result.MBPerSec, p.Result.Records)
	}
	row("read remote / local", "%.2f first pass (cold cache), %.2f second (cached)", r.ReadRatioCold, r.ReadRatioCached)
	return tw.Flush()
}
