package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Result is what one run measured.
type Result struct {
	Mode        string  `json:"mode"` // produce, consume, e2e, share or connect
	Topic       string  `json:"topic"`
	Partitions  int32   `json:"partitions"`
	RecordSize  int     `json:"record_size"` // consume: the mean value size read
	Acks        string  `json:"acks,omitempty"`
	Compression string  `json:"compression,omitempty"`
	Payload     string  `json:"payload,omitempty"` // what produced values hold: letters or text
	Producers   int     `json:"producers,omitempty"`
	Consumers   int     `json:"consumers,omitempty"`
	TargetRate  int     `json:"target_rate,omitempty"` // records/s; 0 = unthrottled
	LingerMS    float64 `json:"linger_ms"`             // producer linger
	// BatchMaxBytes is the producers' batch bound; 0: the client's default.
	BatchMaxBytes int32 `json:"batch_max_bytes,omitempty"`

	// Connectors are a connect run's workers.
	Connectors int `json:"connectors,omitempty"`

	// Records are the records that counted: delivered (produce), read (consume) or
	// arrived (e2e); in a connect run, the connections set up (RecordsPerSec is
	// then connections/s). Bytes are their value bytes.
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	// Produced are the records delivered in an e2e run (Records arrived of them).
	Produced int64 `json:"produced,omitempty"`
	// Prefilled are records a consume run produced, untimed, before reading.
	Prefilled int64 `json:"prefilled,omitempty"`
	// Failed are records not delivered, or (e2e) delivered but never seen.
	Failed int64 `json:"failed"`

	ElapsedSeconds float64 `json:"elapsed_seconds"`
	RecordsPerSec  float64 `json:"records_per_second"`
	MBPerSec       float64 `json:"mb_per_second"`
	Latency        Latency `json:"latency"`
	// Transactional produce runs: records per transaction and commit latency.
	TransactionRecords int      `json:"transaction_records,omitempty"`
	CommitLatency      *Latency `json:"commit_latency,omitempty"`
	// Produce runs with fan-out readers: how many, whether raw (reading the
	// answers' bytes without decoding records: Config.FanoutRaw), the fewest
	// records any of them read (every delivered record, unless the run failed),
	// and the Fetch responses they received in all and those responses' bytes.
	Fanout           int   `json:"fanout_readers,omitempty"`
	FanoutRaw        bool  `json:"fanout_raw,omitempty"`
	FanoutFewestRead int64 `json:"fanout_fewest_read,omitempty"`
	FanoutFetches    int64 `json:"fanout_fetches,omitempty"`
	FanoutFetchBytes int64 `json:"fanout_fetch_bytes,omitempty"`
	// Share runs: the group, how its members acknowledged, records delivered
	// again after their first delivery, seconds from the members' start to the
	// start of the measured window, and records written to the dead-letter topic.
	Group        string  `json:"group,omitempty"`
	ShareAck     string  `json:"share_ack,omitempty"`
	Redelivered  int64   `json:"redelivered,omitempty"`
	JoinSeconds  float64 `json:"join_seconds,omitempty"`
	DeadLettered int64   `json:"dead_lettered,omitempty"`
	// ProduceLatency is, in an e2e run, each record's time from due to
	// acknowledged, and ProducedPerSec the records acknowledged per second of
	// sending (first send to last acknowledgement).
	ProduceLatency *Latency `json:"produce_latency,omitempty"`
	ProducedPerSec float64  `json:"produced_per_second,omitempty"`
	// Timeline is a Produce run's latency per Config.Timeline window.
	Timeline []Window `json:"timeline,omitempty"`
}

// finish fills in the rates from the counts and the elapsed time.
func (r *Result) finish(elapsed time.Duration) {
	r.ElapsedSeconds = elapsed.Seconds()
	if elapsed > 0 {
		r.RecordsPerSec = float64(r.Records) / elapsed.Seconds()
		r.MBPerSec = float64(r.Bytes) / 1e6 / elapsed.Seconds()
	}
}

// WriteTable prints r for people: one "name value" row per figure.
func (r Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(name, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", name, fmt.Sprintf(format, args...))
	}
	row("mode", "%s", r.Mode)
	if r.Mode == "connect" {
		row("connectors", "%d", r.Connectors)
		row("connections", "%d in %.2f s", r.Records, r.ElapsedSeconds)
		if r.Failed > 0 {
			row("failed", "%d", r.Failed)
		}
		row("rate", "%.1f connections/s", r.RecordsPerSec)
		r.writeLatency(row)
		return tw.Flush()
	}
	row("topic", "%s (%d partitions)", r.Topic, r.Partitions)
	if r.Payload != "" {
		row("record size", "%d B (%s)", r.RecordSize, r.Payload)
	} else {
		row("record size", "%d B", r.RecordSize)
	}
	if r.Producers > 0 {
		rate := "unthrottled"
		if r.TargetRate > 0 {
			rate = fmt.Sprintf("%d records/s", r.TargetRate)
		}
		batches := ""
		if r.BatchMaxBytes > 0 {
			batches = fmt.Sprintf(", batches <= %d B", r.BatchMaxBytes)
		}
		row("producers", "%d, acks=%s, compression=%s, linger %gms%s, %s", r.Producers, r.Acks, r.Compression, r.LingerMS, batches, rate)
	}
	if r.Consumers > 0 {
		row("consumers", "%d", r.Consumers)
	}
	if r.Group != "" {
		row("group", "%s, members %s", r.Group, r.ShareAck)
		row("window starts", "%.2f s after the members started", r.JoinSeconds)
		if r.Redelivered > 0 {
			row("redelivered", "%d records", r.Redelivered)
		}
		if r.DeadLettered > 0 {
			row("dead-lettered", "%d records", r.DeadLettered)
		}
	}
	if r.Fanout > 0 {
		kind := "consumers decoding every record"
		if r.FanoutRaw {
			kind = "raw: every byte read, batch headers decoded"
		}
		row("fan-out", "%d readers (%s), each read at least %d records", r.Fanout, kind, r.FanoutFewestRead)
		if r.FanoutFetches > 0 {
			row("fan-out fetches", "%d responses, %.0f B each on average", r.FanoutFetches, float64(r.FanoutFetchBytes)/float64(r.FanoutFetches))
		}
	}
	if r.Prefilled > 0 {
		row("prefilled", "%d records (untimed)", r.Prefilled)
	}
	if r.Mode == "e2e" {
		row("produced", "%d records, %.0f records/s", r.Produced, r.ProducedPerSec)
	}
	row("records", "%d in %.2f s", r.Records, r.ElapsedSeconds)
	if r.Failed > 0 {
		row("failed", "%d", r.Failed)
	}
	row("throughput", "%.0f records/s, %.2f MB/s", r.RecordsPerSec, r.MBPerSec)
	r.writeLatency(row)
	if p := r.ProduceLatency; p != nil {
		row("produce latency", "%s (%d samples)", p.Of, p.Count)
		row("  p50 / p99 / p99.9", "%.3f / %.3f / %.3f ms", p.P50, p.P99, p.P999)
	}
	if c := r.CommitLatency; c != nil {
		row("transactions", "%d of %d records", c.Count, r.TransactionRecords)
		row("commit latency", "%s", c.Of)
		row("  p50 / p99 / p99.9", "%.3f / %.3f / %.3f ms", c.P50, c.P99, c.P999)
		row("  min / mean / max", "%.3f / %.3f / %.3f ms", c.Min, c.Mean, c.Max)
	}
	return tw.Flush()
}

// writeLatency prints the latency rows of a table.
func (r Result) writeLatency(row func(name, format string, args ...any)) {
	l := r.Latency
	row("latency", "%s (%d samples)", l.Of, l.Count)
	row("  p50 / p99 / p99.9", "%.3f / %.3f / %.3f ms", l.P50, l.P99, l.P999)
	row("  min / mean / max", "%.3f / %.3f / %.3f ms", l.Min, l.Mean, l.Max)
}
