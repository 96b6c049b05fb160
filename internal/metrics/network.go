package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

// latencyBuckets span a cached metadata answer (well under a millisecond) to a
// Fetch long poll or a slow acks=all produce (seconds).
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// network holds the connection and request metrics fed by the protocol hooks.
type network struct {
	connections       prometheus.Gauge
	connectionsOpened prometheus.Counter
	inFlight          prometheus.Gauge
	requests          *prometheus.CounterVec
	requestErrors     *prometheus.CounterVec
	requestDuration   *prometheus.HistogramVec
	requestBytes      *prometheus.CounterVec
	responseBytes     *prometheus.CounterVec

	// perKey caches the per-API children so a hook does no label hashing.
	perKey [maxAPIKey + 1]atomic.Pointer[apiMetrics]
	// conns tracks each open connection's requests in flight: requests still
	// queued when a connection closes are never answered, so they leave then.
	conns sync.Map // uint64 -> *connState
}

// maxAPIKey bounds the cache; larger keys (none exist today) use the vectors.
const maxAPIKey = 127

type apiMetrics struct {
	requests, requestBytes, responseBytes prometheus.Counter
	duration                              prometheus.Observer
}

type connState struct {
	mu       sync.Mutex
	inFlight int
	closed   bool
}

func newNetwork() *network {
	return &network{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "connections",
			Help: "Open Kafka client connections.",
		}),
		connectionsOpened: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "connections_opened_total",
			Help: "Kafka client connections accepted.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "requests_in_flight",
			Help: "Kafka requests read and not yet answered, including delayed produces and fetches.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "requests_total",
			Help: "Kafka requests received, by API.",
		}, []string{"api"}),
		requestErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "request_errors_total",
			Help: "Non-zero error codes in Kafka responses (top-level and per topic, partition or member), by API and error.",
		}, []string{"api", "error"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "request_duration_seconds",
			Help:    "Time from a Kafka request being read to its response being written, by API.",
			Buckets: latencyBuckets,
		}, []string{"api"}),
		requestBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "request_bytes_total",
			Help: "Kafka request bytes received, size prefix included, by API.",
		}, []string{"api"}),
		responseBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "response_bytes_total",
			Help: "Kafka response bytes written, size prefix included, by API.",
		}, []string{"api"}),
	}
}

func (n *network) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range n.collectors() {
		c.Describe(ch)
	}
}

func (n *network) Collect(ch chan<- prometheus.Metric) {
	for _, c := range n.collectors() {
		c.Collect(ch)
	}
}

func (n *network) collectors() []prometheus.Collector {
	return []prometheus.Collector{n.connections, n.connectionsOpened, n.inFlight, n.requests,
		n.requestErrors, n.requestDuration, n.requestBytes, n.responseBytes}
}

// api returns the children for one API key.
func (n *network) api(key int16) *apiMetrics {
	if key >= 0 && key <= maxAPIKey {
		if a := n.perKey[key].Load(); a != nil {
			return a
		}
	}
	name := kmsg.NameForKey(key)
	a := &apiMetrics{
		requests:      n.requests.WithLabelValues(name),
		requestBytes:  n.requestBytes.WithLabelValues(name),
		responseBytes: n.responseBytes.WithLabelValues(name),
		duration:      n.requestDuration.WithLabelValues(name),
	}
	if key >= 0 && key <= maxAPIKey {
		n.perKey[key].Store(a)
	}
	return a
}

// OnConnOpen implements protocol.ConnOpenHook.
func (m *Metrics) OnConnOpen(c *protocol.ConnInfo) {
	m.net.conns.Store(c.ID, &connState{})
	m.net.connections.Inc()
	m.net.connectionsOpened.Inc()
}

// OnConnClose implements protocol.ConnCloseHook. Requests the connection read but
// never answered stop counting as in flight.
func (m *Metrics) OnConnClose(c *protocol.ConnInfo, _ error) {
	m.net.connections.Dec()
	v, ok := m.net.conns.LoadAndDelete(c.ID)
	if !ok {
		return
	}
	cs := v.(*connState)
	cs.mu.Lock()
	cs.closed = true
	left := cs.inFlight
	cs.inFlight = 0
	cs.mu.Unlock()
	m.net.inFlight.Sub(float64(left))
}

// OnRequest implements protocol.RequestHook.
func (m *Metrics) OnRequest(c *protocol.ConnInfo, r *protocol.Request) {
	a := m.net.api(r.Key)
	a.requests.Inc()
	a.requestBytes.Add(float64(r.Size))
	if v, ok := m.net.conns.Load(c.ID); ok {
		cs := v.(*connState)
		cs.mu.Lock()
		if !cs.closed {
			cs.inFlight++
			m.net.inFlight.Inc()
		}
		cs.mu.Unlock()
	}
}

// OnResponse implements protocol.ResponseHook.
func (m *Metrics) OnResponse(c *protocol.ConnInfo, r *protocol.Request, e protocol.ResponseEvent) {
	a := m.net.api(r.Key)
	a.duration.Observe(e.Total.Seconds())
	a.responseBytes.Add(float64(e.Bytes))
	if v, ok := m.net.conns.Load(c.ID); ok {
		cs := v.(*connState)
		cs.mu.Lock()
		if !cs.closed && cs.inFlight > 0 {
			cs.inFlight--
			m.net.inFlight.Dec()
		}
		cs.mu.Unlock()
	}
}
