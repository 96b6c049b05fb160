package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-stream/strata/internal/metadata"
)

var (
	underReplicatedDesc = prometheus.NewDesc("strata_partitions_under_replicated",
		"Partitions this node leads whose ISR is smaller than their replica set (from the metadata image).", nil, nil)
	offlineDesc = prometheus.NewDesc("strata_partitions_offline",
		"Partitions with no live leader; reported by the active controller only (0 elsewhere), so sum() over nodes is the cluster's count.", nil, nil)
	leaderCountDesc = prometheus.NewDesc("strata_partitions_led",
		"Partitions this node leads according to the metadata image.", nil, nil)
	activeControllerDesc = prometheus.NewDesc("strata_controller_active",
		"1 on the active controller (the Raft leader of the metadata quorum), else 0.", nil, nil)
	metadataOffsetDesc = prometheus.NewDesc("strata_metadata_offset",
		"Offset of the last metadata log entry applied to this node's image.", nil, nil)
)

// clusterCollector derives partition health from the metadata image at scrape time.
type clusterCollector struct {
	nodeID  int32
	cluster Cluster
}

func (c clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{underReplicatedDesc, offlineDesc, leaderCountDesc, activeControllerDesc, metadataOffsetDesc} {
		ch <- d
	}
}

func (c clusterCollector) Collect(ch chan<- prometheus.Metric) {
	img := c.cluster.Image()
	active := c.cluster.IsLeader()
	h := partitionHealth(img, c.nodeID)
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(underReplicatedDesc, float64(h.underReplicatedLed))
	offline := 0
	activeGauge := 0.0
	if active {
		offline = h.offline
		activeGauge = 1
	}
	gauge(offlineDesc, float64(offline))
	gauge(leaderCountDesc, float64(h.led))
	gauge(activeControllerDesc, activeGauge)
	gauge(metadataOffsetDesc, float64(img.Offset()))
}

// health counts partitions by state in one image.
type health struct {
	led                int // led by the node asked about
	underReplicatedLed int // of those, ISR < replicas
	offline            int // no leader, or a leader that is not live
}

func partitionHealth(img *metadata.Image, nodeID int32) health {
	var h health
	for _, t := range img.Topics() {
		for _, p := range t.Partitions {
			switch {
			case p.Leader == metadata.NoLeader || !img.IsLive(p.Leader):
				h.offline++
			case p.Leader == nodeID:
				h.led++
				if len(p.ISR) < len(p.Replicas) {
					h.underReplicatedLed++
				}
			}
		}
	}
	return h
}
