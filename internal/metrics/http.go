package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// httpRequests are the HTTP API's request metrics, by route ("POST /produce",
// "GET /groups/{group}": the pattern, so a topic or group name never becomes a
// label value).
type httpRequests struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
}

func newHTTPRequests() httpRequests {
	return httpRequests{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "http_requests_total",
			Help: "HTTP API requests answered, by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "http_request_duration_seconds",
			Help:    "Time to answer an HTTP API request (a poll's wait included), by route.",
			Buckets: latencyBuckets,
		}, []string{"route"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "http_requests_in_flight",
			Help: "HTTP API requests being served (long polls among them), by route.",
		}, []string{"route"}),
	}
}

func (h httpRequests) collectors() []prometheus.Collector {
	return []prometheus.Collector{h.total, h.duration, h.inFlight}
}

// HTTPRequestStarted counts a request of route in flight until done reports the
// status it was answered with (httpapi.RequestObserver).
func (m *Metrics) HTTPRequestStarted(route string) (done func(status int)) {
	start := time.Now()
	inFlight := m.http.inFlight.WithLabelValues(route)
	inFlight.Inc()
	return func(status int) {
		inFlight.Dec()
		m.http.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		m.http.total.WithLabelValues(route, strconv.Itoa(status)).Inc()
	}
}
