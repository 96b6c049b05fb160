package metrics

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-stream/strata/internal/share"
)

var (
	deadLetteredDesc = prometheus.NewDesc("strata_share_dead_lettered_records_total",
		"Records of a share group written to its dead-letter topic by this node (KIP-1191).", []string{"group"}, nil)
	deadLetterFailedDesc = prometheus.NewDesc("strata_share_dead_letter_failures_total",
		"Records of a share group whose dead-letter write failed on this node; they stay acquirable.", []string{"group"}, nil)
)

// ShareSource reports the dead-letter writes of share groups (*share.Manager).
type ShareSource interface {
	DeadLetterStats() map[string]share.DeadLetterStats
}

// RegisterShares adds the share-group metrics read from src at scrape time.
func (m *Metrics) RegisterShares(src ShareSource) {
	m.reg.MustRegister(shareCollector{src})
}

type shareCollector struct{ src ShareSource }

func (c shareCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- deadLetteredDesc
	ch <- deadLetterFailedDesc
}

func (c shareCollector) Collect(ch chan<- prometheus.Metric) {
	stats := c.src.DeadLetterStats()
	groups := make([]string, 0, len(stats))
	for g := range stats {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		s := stats[g]
		ch <- prometheus.MustNewConstMetric(deadLetteredDesc, prometheus.CounterValue, float64(s.Written), labelValue(g))
		ch <- prometheus.MustNewConstMetric(deadLetterFailedDesc, prometheus.CounterValue, float64(s.Failed), labelValue(g))
	}
}
