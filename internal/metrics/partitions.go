package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Per-partition descriptions; every series has the labels topic and partition.
var (
	partitionLabels = []string{"topic", "partition"}

	logSizeDesc = prometheus.NewDesc("strata_log_size_bytes",
		"Bytes held in the partition's log segments.", partitionLabels, nil)
	logSegmentsDesc = prometheus.NewDesc("strata_log_segments",
		"Segments of the partition's log, the active one included.", partitionLabels, nil)
	logStartDesc = prometheus.NewDesc("strata_log_start_offset",
		"First offset still retained in the partition.", partitionLabels, nil)
	logEndDesc = prometheus.NewDesc("strata_log_end_offset",
		"Offset the partition's next appended record gets.", partitionLabels, nil)
	highWatermarkDesc = prometheus.NewDesc("strata_partition_high_watermark",
		"End (exclusive) of the partition's committed records, visible to consumers; only meaningful where strata_partition_leader is 1.", partitionLabels, nil)
	lastStableDesc = prometheus.NewDesc("strata_partition_last_stable_offset",
		"End (exclusive) of what read_committed consumers may read: the first offset of the oldest open transaction, or the high-water mark; the LSO lag is high watermark minus this. Only meaningful where strata_partition_leader is 1.", partitionLabels, nil)
	openTxnsDesc = prometheus.NewDesc("strata_partition_open_transactions",
		"Transactions with records on the partition and no marker yet.", partitionLabels, nil)
	leaderDesc = prometheus.NewDesc("strata_partition_leader",
		"1 when this node leads the partition, else 0.", partitionLabels, nil)
	fsyncDesc = prometheus.NewDesc("strata_log_fsync_seconds",
		"Fsyncs of the partition's segment files and the time they took, since the log was opened.", partitionLabels, nil)
)

// partitionCollector reads every hosted partition at scrape time.
type partitionCollector struct{ partitions Partitions }

func (c partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{logSizeDesc, logSegmentsDesc, logStartDesc, logEndDesc, highWatermarkDesc, lastStableDesc, openTxnsDesc, leaderDesc, fsyncDesc} {
		ch <- d
	}
}

func (c partitionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.partitions.Partitions() {
		labels := []string{p.Topic, strconv.Itoa(int(p.Index))}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		}
		l := p.Log()
		gauge(logSizeDesc, float64(l.Size()))
		gauge(logSegmentsDesc, float64(l.NumSegments()))
		gauge(logStartDesc, float64(p.LogStartOffset()))
		gauge(logEndDesc, float64(p.LogEndOffset()))
		gauge(highWatermarkDesc, float64(p.HighWatermark()))
		gauge(lastStableDesc, float64(p.LastStableOffset()))
		gauge(openTxnsDesc, float64(p.OpenTransactions()))
		leader := 0.0
		if p.IsLeader() {
			leader = 1
		}
		gauge(leaderDesc, leader)
		st := l.Stats()
		ch <- prometheus.MustNewConstSummary(fsyncDesc, uint64(st.Syncs), st.SyncTime.Seconds(), nil, labels...)
	}
}
