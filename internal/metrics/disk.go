package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// diskBuckets span a page-cache-only fsync (tens of microseconds) to a disk
// that stalls for seconds.
var diskBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// disk holds the per-log-directory latency histograms fed by the storage hooks
// (storage.Config.OnSync and OnRoll, through replica.Options).
type disk struct {
	fsync, roll *prometheus.HistogramVec
	fsyncErrors *prometheus.CounterVec
}

func newDisk() *disk {
	return &disk{
		fsync: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "log_dir_fsync_seconds",
			Help:    "Fsyncs of segment files in the log directory (group commit, roll, close) and how long each took; with --log-dir-sync=filesystem, each log's wait for a shared syncfs that covered it.",
			Buckets: diskBuckets,
		}, []string{"dir"}),
		roll: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "log_dir_roll_seconds",
			Help:    "Segment rolls in the log directory and how long each held its partition's appends (old segment and indexes sealed and fsynced, new files created).",
			Buckets: diskBuckets,
		}, []string{"dir"}),
		fsyncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "log_dir_fsync_errors_total",
			Help: "Failed fsyncs of segment files in the log directory (each makes its log fail-stop).",
		}, []string{"dir"}),
	}
}

// LogDirHooks returns the hooks that feed the log directory dir's fsync and
// roll histograms, for replica.Options.OnSync and OnRoll.
func (m *Metrics) LogDirHooks(dir string) (onSync func(time.Duration, error), onRoll func(time.Duration)) {
	fsync, roll, errs := m.disk.fsync.WithLabelValues(dir), m.disk.roll.WithLabelValues(dir), m.disk.fsyncErrors.WithLabelValues(dir)
	onSync = func(took time.Duration, err error) {
		if err != nil {
			errs.Inc()
			return
		}
		fsync.Observe(took.Seconds())
	}
	onRoll = func(took time.Duration) { roll.Observe(took.Seconds()) }
	return onSync, onRoll
}
