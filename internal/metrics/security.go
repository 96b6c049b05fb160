package metrics

import "github.com/prometheus/client_golang/prometheus"

// newAuthentications counts SASL authentication attempts by mechanism and
// result, so failed logins (a guessed password, a wrong user) show up.
func newAuthentications() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "sasl_authentications_total",
		Help: "SASL authentication attempts on the Kafka listener, by mechanism and result (success or failure).",
	}, []string{"mechanism", "result"})
}

// OnAuthentication counts one SASL authentication attempt.
func (m *Metrics) OnAuthentication(mechanism string, ok bool) {
	result := "failure"
	if ok {
		result = "success"
	}
	m.auth.WithLabelValues(mechanism, result).Inc()
}
