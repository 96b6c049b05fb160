package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-stream/strata/internal/telemetry"
)

// ClientTelemetry is the source of the metrics clients push (KIP-714,
// *telemetry.Manager).
type ClientTelemetry interface {
	Snapshot() []telemetry.Series
	Stats() telemetry.Stats
}

var (
	telemetryClientsDesc = prometheus.NewDesc("strata_telemetry_clients",
		"Client instances this node keeps pushed metrics of (KIP-714), at most --telemetry-max-clients.", nil, nil)
	telemetrySeriesDesc = prometheus.NewDesc("strata_telemetry_series",
		"Series of pushed client metrics this node exposes, at most --telemetry-max-series.", nil, nil)
	telemetryDroppedDesc = prometheus.NewDesc("strata_telemetry_series_dropped_total",
		"Pushed client metric series not kept because the series bound was reached.", nil, nil)
)

// telemetryStats counts the kept clients and series and the dropped ones.
type telemetryStats struct{ src ClientTelemetry }

func (c telemetryStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- telemetryClientsDesc
	ch <- telemetrySeriesDesc
	ch <- telemetryDroppedDesc
}

func (c telemetryStats) Collect(ch chan<- prometheus.Metric) {
	stats := c.src.Stats()
	ch <- prometheus.MustNewConstMetric(telemetryClientsDesc, prometheus.GaugeValue, float64(stats.Clients))
	ch <- prometheus.MustNewConstMetric(telemetrySeriesDesc, prometheus.GaugeValue, float64(stats.Series))
	ch <- prometheus.MustNewConstMetric(telemetryDroppedDesc, prometheus.CounterValue, float64(stats.DroppedSeries))
}

// telemetryCollector exposes each pushed client metric as a strata_client_
// family labelled with the client's instance id and client id. A family's
// label names are the union of its series' (missing ones empty), as a
// Prometheus family needs one label set.
type telemetryCollector struct{ src ClientTelemetry }

// Describe sends nothing: the families depend on what clients push, so the
// collector is unchecked.
func (c telemetryCollector) Describe(chan<- *prometheus.Desc) {}

func (c telemetryCollector) Collect(ch chan<- prometheus.Metric) {
	series := c.src.Snapshot()
	for i := 0; i < len(series); {
		j := i + 1
		for j < len(series) && series[j].Name == series[i].Name {
			j++
		}
		c.family(ch, series[i:j])
		i = j
	}
}

// family sends the series of one name (Snapshot sorts by name). A family has
// one type: its first series' kind, which a series of the other kind (another
// client's, or a name that sanitized alike) is sent as too.
func (c telemetryCollector) family(ch chan<- prometheus.Metric, fam []telemetry.Series) {
	var names []string
	index := map[string]int{}
	for _, s := range fam {
		for _, l := range s.Labels {
			if _, ok := index[l.Name]; !ok {
				index[l.Name] = len(names)
				names = append(names, l.Name)
			}
		}
	}
	help := fam[0].Help
	if help == "" {
		help = "A metric pushed by clients (KIP-714)."
	}
	desc := prometheus.NewDesc("strata_client_"+fam[0].Name, help, names, nil)
	vt := prometheus.GaugeValue
	if fam[0].Kind == telemetry.Counter {
		vt = prometheus.CounterValue
	}
	for _, s := range fam {
		values := make([]string, len(names))
		for _, l := range s.Labels {
			values[index[l.Name]] = labelValue(l.Value)
		}
		m, err := prometheus.NewConstMetric(desc, vt, s.Value, values...)
		if err != nil {
			m = prometheus.NewInvalidMetric(desc, err)
		}
		ch <- m
	}
}
