package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// data holds the per-topic traffic counters and the delayed-operation gauges fed
// by handlers.Observer. Counters of topics that left the metadata image are
// dropped at the next scrape.
type data struct {
	cluster Cluster // nil: never prune

	mu     sync.RWMutex
	topics map[string]*topicTraffic

	delayedProduce, delayedFetch atomic.Int64

	bytesIn, recordsIn, bytesOut, recordsOut, delayed *prometheus.Desc
}

type topicTraffic struct {
	bytesIn, recordsIn, bytesOut, recordsOut atomic.Int64
}

func newData(cluster Cluster) *data {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
	}
	return &data{
		cluster:    cluster,
		topics:     map[string]*topicTraffic{},
		bytesIn:    desc("topic_bytes_in_total", "Record batch bytes appended to the topic by Produce requests, as stored.", "topic"),
		recordsIn:  desc("topic_records_in_total", "Records appended to the topic by Produce requests.", "topic"),
		bytesOut:   desc("topic_bytes_out_total", "Record batch bytes of the topic sent to consumers by Fetch responses.", "topic"),
		recordsOut: desc("topic_records_out_total", "Records (offsets spanned by the batches) of the topic sent to consumers by Fetch responses.", "topic"),
		delayed:    desc("purgatory_size", "Delayed operations waiting now: produces for acks=all, fetches for min_bytes.", "operation"),
	}
}

func (d *data) topic(name string) *topicTraffic {
	d.mu.RLock()
	t := d.topics[name]
	d.mu.RUnlock()
	if t != nil {
		return t
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if t = d.topics[name]; t == nil {
		t = &topicTraffic{}
		d.topics[name] = t
	}
	return t
}

func (d *data) Describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{d.bytesIn, d.recordsIn, d.bytesOut, d.recordsOut, d.delayed} {
		ch <- desc
	}
}

func (d *data) Collect(ch chan<- prometheus.Metric) {
	d.prune()
	d.mu.RLock()
	for name, t := range d.topics {
		for _, c := range []struct {
			desc *prometheus.Desc
			v    *atomic.Int64
		}{{d.bytesIn, &t.bytesIn}, {d.recordsIn, &t.recordsIn}, {d.bytesOut, &t.bytesOut}, {d.recordsOut, &t.recordsOut}} {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.v.Load()), name)
		}
	}
	d.mu.RUnlock()
	ch <- prometheus.MustNewConstMetric(d.delayed, prometheus.GaugeValue, float64(d.delayedProduce.Load()), "produce")
	ch <- prometheus.MustNewConstMetric(d.delayed, prometheus.GaugeValue, float64(d.delayedFetch.Load()), "fetch")
}

// prune drops the counters of deleted topics.
func (d *data) prune() {
	if d.cluster == nil {
		return
	}
	img := d.cluster.Image()
	d.mu.Lock()
	defer d.mu.Unlock()
	for name := range d.topics {
		if img.Topic(name) == nil {
			delete(d.topics, name)
		}
	}
}

// Produced implements handlers.Observer.
func (m *Metrics) Produced(topic string, _ int32, bytes, records int64) {
	t := m.dat.topic(topic)
	t.bytesIn.Add(bytes)
	t.recordsIn.Add(records)
}

// Fetched implements handlers.Observer.
func (m *Metrics) Fetched(topic string, _ int32, bytes, records int64) {
	t := m.dat.topic(topic)
	t.bytesOut.Add(bytes)
	t.recordsOut.Add(records)
}

// DelayedProduce implements handlers.Observer.
func (m *Metrics) DelayedProduce(delta int) { m.dat.delayedProduce.Add(int64(delta)) }

// DelayedFetch implements handlers.Observer.
func (m *Metrics) DelayedFetch(delta int) { m.dat.delayedFetch.Add(int64(delta)) }
