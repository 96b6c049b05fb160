package metrics

import (
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

var lagDesc = prometheus.NewDesc("strata_consumer_group_lag",
	"High-water mark minus the group's committed offset, for groups this node coordinates and partitions it leads.",
	[]string{"group", "topic", "partition"}, nil)

// lagCollector asks the group coordinator for every group's lag at scrape time.
// Partitions this node does not lead have no known high-water mark here and are
// left out.
type lagCollector struct {
	groups     LagSource
	partitions Partitions
	log        *slog.Logger
}

func (c lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- lagDesc }

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	hwms := localHighWatermarks(c.partitions)
	lags, err := c.groups.Lag(hwms)
	if err != nil {
		c.log.Warn("metrics: consumer group lag", "err", err)
		return
	}
	for _, l := range lags {
		if l.Lag < 0 {
			continue
		}
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(l.Lag),
			labelValue(l.Group), l.Topic, strconv.Itoa(int(l.Partition)))
	}
}

// localHighWatermarks is a group.HighWatermarkFunc over the partitions this node
// leads, read once.
func localHighWatermarks(ps Partitions) func(topic string, partition int32) (int64, bool) {
	type tp struct {
		topic     string
		partition int32
	}
	hwm := map[tp]int64{}
	if ps != nil {
		for _, p := range ps.Partitions() {
			if p.IsLeader() {
				hwm[tp{p.Topic, p.Index}] = p.HighWatermark()
			}
		}
	}
	return func(topic string, partition int32) (int64, bool) {
		h, ok := hwm[tp{topic, partition}]
		return h, ok
	}
}
