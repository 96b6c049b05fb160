package telemetry

import (
	"slices"
	"strings"
	"time"
)

// Kind is how a series is exposed.
type Kind uint8

// Series kinds: an OTLP gauge or non-monotonic sum is a gauge, a monotonic sum
// a counter.
const (
	Gauge Kind = iota
	Counter
)

// Series is one client metric: an OTLP metric's data point of one client,
// named and labelled for Prometheus.
type Series struct {
	// Name is the OTLP metric name with every character Prometheus does not
	// allow replaced by '_' (org.apache.kafka.producer.record.send.rate ->
	// org_apache_kafka_producer_record_send_rate).
	Name string
	Kind Kind
	// Labels are client_instance_id, client_id and the data point's
	// attributes (names sanitized like Name), sorted by name.
	Labels []Label
	Value  float64
	// Help is the metric's OTLP description.
	Help string

	updated time.Time // last pushed
}

// Label is one label of a Series.
type Label struct{ Name, Value string }

// Stats counts what the bounds cost.
type Stats struct {
	Clients int
	Series  int
	// DroppedSeries counts the series not kept because MaxSeries was reached.
	DroppedSeries uint64
}

// recordLocked keeps a push's points: a cumulative sum or a gauge replaces the
// series' value, a delta sum adds to it. A new series beyond MaxSeries is
// dropped.
func (m *Manager) recordLocked(in *instance, points []point, now time.Time) {
	if in.series == nil {
		in.series = make(map[string]*Series)
	}
	for _, pt := range points {
		labels := make([]Label, 0, 2+len(pt.attrs))
		labels = append(labels, Label{"client_id", in.attrs["client_id"]}, Label{"client_instance_id", in.attrs["client_instance_id"]})
		for _, a := range pt.attrs {
			name := sanitize(a.Name, false)
			// An empty value is no label to Prometheus: kept, it would
			// make a second series equal to the one without it.
			if a.Value == "" || name == "client_id" || name == "client_instance_id" || strings.HasPrefix(name, "__") ||
				slices.ContainsFunc(labels, func(l Label) bool { return l.Name == name }) {
				continue
			}
			labels = append(labels, Label{name, a.Value})
		}
		slices.SortFunc(labels, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
		name := sanitize(pt.name, true)
		key := seriesKey(name, labels)
		s := in.series[key]
		if s == nil {
			if m.mu.series >= m.cfg.MaxSeries {
				m.mu.dropped++
				continue
			}
			s = &Series{Name: name, Labels: labels}
			in.series[key] = s
			m.mu.series++
		}
		s.Kind, s.Help, s.updated = pt.kind, pt.help, now
		if pt.delta {
			s.Value += pt.value
		} else {
			s.Value = pt.value
		}
	}
}

func seriesKey(name string, labels []Label) string {
	var b strings.Builder
	b.WriteString(name)
	for _, l := range labels {
		b.WriteByte(0)
		b.WriteString(l.Name)
		b.WriteByte(0)
		b.WriteString(l.Value)
	}
	return b.String()
}

// sanitize maps an OTLP name to a Prometheus metric (colons allowed) or label
// name: every other character becomes '_', and a leading digit gets one too.
func sanitize(s string, metric bool) string {
	b := []byte(s)
	for i, c := range b {
		ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || metric && c == ':'
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] >= '0' && b[0] <= '9' {
		b = append([]byte{'_'}, b...)
	}
	return string(b)
}

// Stats counts the kept clients and series, after forgetting the clients
// silent too long.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.lastExpire = time.Time{} // a scrape always expires
	m.expireLocked(m.cfg.Now())
	return Stats{Clients: len(m.mu.clients), Series: m.mu.series, DroppedSeries: m.mu.dropped}
}

// Snapshot returns a copy of every kept series, sorted by name then labels,
// after forgetting the clients silent too long.
func (m *Manager) Snapshot() []Series {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.lastExpire = time.Time{} // a scrape always expires
	m.expireLocked(m.cfg.Now())
	out := make([]Series, 0, m.mu.series)
	for _, in := range m.mu.clients {
		for _, s := range in.series {
			c := *s
			c.Labels = slices.Clone(s.Labels)
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Series) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(seriesKey("", a.Labels), seriesKey("", b.Labels))
	})
	return out
}
