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

// Tiered partitions only (remote.storage.enable).
var (
	remoteSizeDesc = prometheus.NewDesc("strata_remote_log_size_bytes",
		"Bytes of the partition's segments in the object store, as its remote manifest lists them.", partitionLabels, nil)
	remoteSegmentsDesc = prometheus.NewDesc("strata_remote_log_segments",
		"Segments of the partition in the object store.", partitionLabels, nil)
	remoteLagDesc = prometheus.NewDesc("strata_remote_upload_lag_bytes",
		"Bytes of closed local segments not yet uploaded; local retention waits for them.", partitionLabels, nil)
	remoteUploadErrorsDesc = prometheus.NewDesc("strata_remote_upload_errors_total",
		"Failed upload attempts of the partition since its tier was created on this node.", partitionLabels, nil)
	remoteReadErrorsDesc = prometheus.NewDesc("strata_remote_read_errors_total",
		"Remote reads that failed (store unreachable, object missing or corrupt).", partitionLabels, nil)
	remoteCorruptDesc = prometheus.NewDesc("strata_remote_corrupt_objects_total",
		"Remote blocks or indexes that failed their checksum and were not served.", partitionLabels, nil)
)

// partitionCollector reads every hosted partition at scrape time.
type partitionCollector struct{ partitions Partitions }

func (c partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{logSizeDesc, logSegmentsDesc, logStartDesc, logEndDesc, highWatermarkDesc, lastStableDesc, openTxnsDesc, leaderDesc, fsyncDesc,
		remoteSizeDesc, remoteSegmentsDesc, remoteLagDesc, remoteUploadErrorsDesc, remoteReadErrorsDesc, remoteCorruptDesc} {
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
		if tier := p.Tier(); tier != nil {
			ts := tier.Stats()
			gauge(remoteSizeDesc, float64(ts.RemoteBytes))
			gauge(remoteSegmentsDesc, float64(ts.RemoteSegments))
			gauge(remoteLagDesc, float64(ts.UploadLagBytes))
			counter := func(d *prometheus.Desc, v int64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
			}
			counter(remoteUploadErrorsDesc, ts.UploadErrors)
			counter(remoteReadErrorsDesc, ts.RemoteReadErrs)
			counter(remoteCorruptDesc, ts.CorruptBlocks)
		}
	}
}
