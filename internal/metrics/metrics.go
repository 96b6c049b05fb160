package metrics

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
)

// namespace prefixes every Strata metric.
const namespace = "strata"

// Cluster is the metadata side of the node: the latest applied image and whether
// this node is the active controller (*controller.Controller).
type Cluster interface {
	Image() *metadata.Image
	IsLeader() bool
}

// Partitions lists the partitions this node hosts (*replica.Manager).
type Partitions interface {
	Partitions() []*replica.Partition
}

// LagSource reports consumer group lag (*group.Coordinator): the committed offset
// of every group this node coordinates, against hwm.
type LagSource interface {
	Lag(hwm group.HighWatermarkFunc, groups ...string) ([]group.PartitionLag, error)
}

// Config names the snapshot sources. Each may be nil: its metrics are then absent.
type Config struct {
	NodeID     int32
	Cluster    Cluster
	Partitions Partitions
	// Groups is the group coordinator, for strata_consumer_group_lag.
	Groups LagSource
	Logger *slog.Logger
	// GoCollectors adds the Go runtime and process collectors (go_*, process_*).
	GoCollectors bool
	// Telemetry, when set, exposes the metrics clients push (telemetry.go).
	Telemetry ClientTelemetry
}

// Metrics holds one node's metrics. Its zero value is not usable: call New.
type Metrics struct {
	cfg Config
	reg *prometheus.Registry
	net *network
	dat *data
	isr isrCounters
	// auth counts SASL authentications, httpAuth the HTTP listener's credential
	// checks (security.go).
	auth, httpAuth *prometheus.CounterVec
	disk           *disk
	fetches        replicaFetches
	http           httpRequests
}

// New builds the metrics of one node on a fresh registry.
func New(cfg Config) *Metrics {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{cfg: cfg, reg: prometheus.NewRegistry()}
	m.net = newNetwork()
	m.dat = newData(cfg.Cluster)
	m.isr = newISRCounters()
	m.auth, m.httpAuth = newAuthentications(), newHTTPAuthentications()
	m.disk = newDisk()
	m.fetches = newReplicaFetches()
	m.http = newHTTPRequests()
	m.reg.MustRegister(m.net, m.dat, m.isr.shrinks, m.isr.expands, m.auth, m.httpAuth, m.disk.fsync, m.disk.roll, m.disk.fsyncErrors)
	m.reg.MustRegister(m.fetches.collectors()...)
	m.reg.MustRegister(m.http.collectors()...)
	if cfg.Partitions != nil {
		m.reg.MustRegister(partitionCollector{cfg.Partitions})
	}
	if cfg.Cluster != nil {
		m.reg.MustRegister(clusterCollector{nodeID: cfg.NodeID, cluster: cfg.Cluster})
	}
	if cfg.Groups != nil {
		m.reg.MustRegister(lagCollector{groups: cfg.Groups, partitions: cfg.Partitions, log: cfg.Logger})
	}
	if cfg.Telemetry != nil {
		m.reg.MustRegister(telemetryStats{cfg.Telemetry}, telemetryCollector{cfg.Telemetry})
	}
	if cfg.GoCollectors {
		m.reg.MustRegister(collectors.NewGoCollector(
			// go_sched_latencies_seconds (time goroutines wait to run) and
			// go_sched_pauses_*_seconds (stop-the-world pauses, GC among
			// them) explain latency stalls that are not the broker's own.
			collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler),
		), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Registry is the node's registry, for tests and for adding collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// HTTPHandler serves the registry in the Prometheus text format (not OpenMetrics,
// even when a scraper asks for it).
// A collector that fails is logged and skipped; the rest is still served.
func (m *Metrics) HTTPHandler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slogPrinter{m.cfg.Logger},
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// slogPrinter adapts a slog.Logger to promhttp's error log.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics: scrape", "err", v) }

// labelValue is s as a Prometheus label value, which must be UTF-8. A name a
// client chose (a group id, a client id) reaches the broker as bytes that may
// not be: each run of bytes that are not is shown as U+FFFD, as a Java broker
// decodes them.
func labelValue(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
