package metrics

import "testing"

// TestHTTPRequests: a request is in flight from its start until done, then
// counted under its route and status.
func TestHTTPRequests(t *testing.T) {
	m := New(Config{})
	done := m.HTTPRequestStarted("POST /poll")
	expect(t, values(t, m.Registry()), map[string]float64{`strata_http_requests_in_flight{route=POST /poll}`: 1})
	done(503)
	expect(t, values(t, m.Registry()), map[string]float64{
		`strata_http_requests_in_flight{route=POST /poll}`:             0,
		`strata_http_requests_total{code=503,route=POST /poll}`:        1,
		`strata_http_request_duration_seconds_count{route=POST /poll}`: 1,
	})
}
