package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
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
	// BrokerPIDs, if set, are the brokers' processes on this machine: each
	// produce run is then charged their CPU time and the bytes they wrote to
	// disk (/proc/PID/stat, /proc/PID/io) from its start until they were done
	// with it, per GB produced (BrokerCost).
	BrokerPIDs []int
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
	// RoundRatios are each round's tiered / plain records/s: its two runs ran
	// back to back, each starting with the brokers done with the run before,
	// so a ratio compares them under the same machine state, which the rates
	// of different rounds on a loaded machine do not share.
	RoundRatios      []float64 `json:"round_ratios"`
	RoundRatioMedian float64   `json:"round_ratio_median"`
	// With BrokerPIDs: what each run cost the brokers (in the order of Plain
	// and Tiered), and the medians' tiered / plain.
	PlainCost         []BrokerCost `json:"plain_broker_cost,omitempty"`
	TieredCost        []BrokerCost `json:"tiered_broker_cost,omitempty"`
	CPUPerGBRatio     float64      `json:"cpu_per_gb_ratio,omitempty"`
	WrittenPerGBRatio float64      `json:"written_per_gb_ratio,omitempty"`
	// LoadBefore and LoadAfter are the machine's load averages (1, 5, 15
	// minutes) before the first produce run and after the last.
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`

	// RemoteRecords are the tiered topic's records below its local start when
	// the reads began (served from the object store).
	RemoteRecords int64      `json:"remote_records"`
	Reads         []ReadPass `json:"reads"`
	// Remote read records/s over local, first pass (cold) and second (cached).
	ReadRatioCold   float64 `json:"read_ratio_cold"`
	ReadRatioCached float64 `json:"read_ratio_cached"`
}

// BrokerCost is what the brokers spent on one produce run, from its start until
// they were done with it (a tiered run's uploads caught up; a plain run's
// brokers quiet for as long), also per GB of record values produced: counts
// that the machine's load changes far less than it changes rates.
type BrokerCost struct {
	CPUSeconds float64 `json:"cpu_seconds"`
	WriteBytes int64   `json:"write_bytes"`
	// CPUPerGB is broker CPU seconds per GB produced; WrittenPerGB the GB the
	// brokers wrote to disk per GB produced.
	CPUPerGB     float64 `json:"cpu_seconds_per_gb"`
	WrittenPerGB float64 `json:"written_gb_per_gb"`
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
	for _, pid := range o.BrokerPIDs {
		if pid <= 0 {
			return bad("broker pid must be positive, got %d", pid)
		}
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
//     finish its uploads, and after each plain run to be quiet as long
//     (settleQuiet), so that every run starts with the brokers done with the
//     one before. With BrokerPIDs, each run is charged the brokers' CPU time
//     and disk writes until then (BrokerCost).
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
	res.LoadBefore = LoadAverage()
	for round := 1; round <= o.Rounds; round++ {
		order := []string{"plain", "tiered"}
		if round%2 == 0 {
			order = []string{"tiered", "plain"}
		}
		for _, kind := range order {
			tc := topic(kind, round)
			before, err := readCounters(o.BrokerPIDs)
			if err != nil {
				return res, err
			}
			r, err := Produce(ctx, tc)
			if err != nil {
				return res, fmt.Errorf("round %d, %s topic: %w", round, kind, err)
			}
			o.step("round %d, %s topic %s: %.0f records/s", round, kind, tc.Topic, r.RecordsPerSec)
			if kind == "plain" {
				res.Plain, plain = append(res.Plain, r), tc
				if !sleepUntil(ctx, time.Now().Add(settleQuiet)) {
					return res, ctx.Err()
				}
			} else {
				res.Tiered, tiered = append(res.Tiered, r), tc
				began := time.Now()
				if _, err := settle(ctx, tc, o.SettleTimeout, false); err != nil {
					return res, fmt.Errorf("round %d: %w", round, err)
				}
				o.step("round %d: uploads of %s caught up in %s", round, tc.Topic, time.Since(began).Round(time.Millisecond))
			}
			if len(o.BrokerPIDs) == 0 {
				continue
			}
			after, err := readCounters(o.BrokerPIDs)
			if err != nil {
				return res, err
			}
			cost := brokerCost(before, after, r.Bytes)
			o.step("round %d, %s topic: brokers %.2f CPU s/GB, wrote %.3f GB/GB", round, kind, cost.CPUPerGB, cost.WrittenPerGB)
			if kind == "plain" {
				res.PlainCost = append(res.PlainCost, cost)
			} else {
				res.TieredCost = append(res.TieredCost, cost)
			}
		}
		res.RoundRatios = append(res.RoundRatios, ratio(res.Tiered[round-1].RecordsPerSec, res.Plain[round-1].RecordsPerSec))
	}
	res.LoadAfter = LoadAverage()
	res.PlainMedian, res.TieredMedian = medianRate(res.Plain), medianRate(res.Tiered)
	res.ProduceRatio = ratio(res.TieredMedian, res.PlainMedian)
	res.RoundRatioMedian = median(res.RoundRatios)
	if len(o.BrokerPIDs) > 0 {
		cpu := func(c BrokerCost) float64 { return c.CPUPerGB }
		written := func(c BrokerCost) float64 { return c.WrittenPerGB }
		res.CPUPerGBRatio = ratio(medianOf(res.TieredCost, cpu), medianOf(res.PlainCost, cpu))
		res.WrittenPerGBRatio = ratio(medianOf(res.TieredCost, written), medianOf(res.PlainCost, written))
	}

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
	return medianOf(rs, func(r Result) float64 { return r.RecordsPerSec })
}

// medianOf is the median of f over xs, 0 for none.
func medianOf[T any](xs []T, f func(T) float64) float64 { return median(mapSlice(xs, f)) }

// median is the median of vs, 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	vs = slices.Sorted(slices.Values(vs))
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

// brokerCost is what the brokers spent between two readings of their counters
// on a run that produced bytes of record values.
func brokerCost(before, after processCounters, bytes int64) BrokerCost {
	c := BrokerCost{CPUSeconds: after.cpu - before.cpu, WriteBytes: after.write - before.write}
	if bytes > 0 {
		gb := float64(bytes) / 1e9
		c.CPUPerGB = c.CPUSeconds / gb
		c.WrittenPerGB = float64(c.WriteBytes) / 1e9 / gb
	}
	return c
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
		return floats(mapSlice(rs, func(r Result) float64 { return r.RecordsPerSec }), 0)
	}
	row("mode", "tiered: %d B records, segment.bytes %d, local.retention.bytes %d", r.RecordSize, r.SegmentBytes, r.LocalRetentionBytes)
	row("produce, plain", "%.0f records/s median (%s)", r.PlainMedian, rates(r.Plain))
	row("produce, tiered", "%.0f records/s median (%s)", r.TieredMedian, rates(r.Tiered))
	row("produce tiered / plain", "%.2f of the medians; by round %s (median %.2f)", r.ProduceRatio, floats(r.RoundRatios, 2), r.RoundRatioMedian)
	if len(r.PlainCost) > 0 {
		cpu := func(c BrokerCost) float64 { return c.CPUPerGB }
		written := func(c BrokerCost) float64 { return c.WrittenPerGB }
		row("broker CPU per GB, plain", "%.2f s median (%s)", medianOf(r.PlainCost, cpu), floats(mapSlice(r.PlainCost, cpu), 2))
		row("broker CPU per GB, tiered", "%.2f s median (%s)", medianOf(r.TieredCost, cpu), floats(mapSlice(r.TieredCost, cpu), 2))
		row("broker disk writes per GB, plain", "%.3f GB median (%s)", medianOf(r.PlainCost, written), floats(mapSlice(r.PlainCost, written), 3))
		row("broker disk writes per GB, tiered", "%.3f GB median (%s)", medianOf(r.TieredCost, written), floats(mapSlice(r.TieredCost, written), 3))
		row("broker cost tiered / plain", "CPU %.2f, disk writes %.2f (medians)", r.CPUPerGBRatio, r.WrittenPerGBRatio)
	}
	row("load average", "%s before, %s after the produce rounds", r.LoadBefore, r.LoadAfter)
	row("remote records", "%d below the tiered topic's local start", r.RemoteRecords)
	for _, p := range r.Reads {
		row(fmt.Sprintf("read %s, pass %d", p.Source, p.Pass), "%.0f records/s, %.2f MB/s (%d records)", p.Result.RecordsPerSec, p.Result.MBPerSec, p.Result.Records)
	}
	row("read remote / local", "%.2f first pass (cold cache), %.2f second (cached)", r.ReadRatioCold, r.ReadRatioCached)
	return tw.Flush()
}

// floats prints vs separated by " / ".
func floats(vs []float64, prec int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.FormatFloat(v, 'f', prec, 64)
	}
	return strings.Join(s, " / ")
}

func mapSlice[T any](xs []T, f func(T) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}
