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

// newHTTPAuthentications counts the HTTP listener's credential checks by scheme
// (basic, bearer) and result.
func newHTTPAuthentications() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "http_authentications_total",
		Help: "Credential checks on the HTTP API and console, by scheme (basic or bearer) and result (success or failure).",
	}, []string{"scheme", "result"})
}

// OnAuthentication counts one SASL authentication attempt.
func (m *Metrics) OnAuthentication(mechanism string, ok bool) {
	m.auth.WithLabelValues(mechanism, resultLabel(ok)).Inc()
}

// OnHTTPAuthentication counts one credential check on the HTTP listener.
func (m *Metrics) OnHTTPAuthentication(scheme string, ok bool) {
	m.httpAuth.WithLabelValues(scheme, resultLabel(ok)).Inc()
}

func resultLabel(ok bool) string {
	if ok {
		return "success"
	}
	return "failure"
}
