package httpapi

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestCrossOriginRequestsRefused: a page of another site a browser shows must not
// be able to act through the API of a node the browser reaches (a developer's
// 127.0.0.1:8080, a node inside a network): the body's Content-Type is not
// checked, so a form or a fetch without preflight could otherwise create topics,
// produce, commit, or poll a group's records away (GET /poll moves the member's
// position). Every route that changes something refuses a cross-origin browser
// request with 403, as the console does; reads stay open (without CORS the page
// cannot read the answer), and so do same-origin and non-browser requests.
func TestCrossOriginRequestsRefused(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	a, err := New(Config{KafkaAddr: dead.Addr().String(), Cluster: emptyCluster{}, TopicWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	mux := http.NewServeMux()
	a.Register(mux)
	readOnly := map[string]bool{"GET /openapi.json": true, "GET /groups": true, "GET /groups/{group}": true,
		"GET /topics": true, "GET /topics/{topic}": true}
	for _, key := range Routes() {
		sample := accessSamples[key]
		method, _, _ := strings.Cut(key, " ")
		for _, tc := range []struct {
			name    string
			headers map[string]string
			refused bool
		}{
			{"cross-site", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, !readOnly[key]},
			{"old browser, other origin", map[string]string{"Origin": "https://evil.example"}, !readOnly[key]},
			{"same origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://example.com"}, false},
			{"not a browser", nil, false},
		} {
			r := httptest.NewRequest(method, sample.path, strings.NewReader(sample.body))
			r.Header.Set("Content-Type", "text/plain")
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			ctx, cancel := context.WithTimeout(r.Context(), 300*time.Millisecond)
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, r.WithContext(ctx))
			cancel()
			refused := w.Code == http.StatusForbidden && strings.Contains(w.Body.String(), `"code":"`+codeCrossOrigin+`"`)
			if refused != tc.refused {
				t.Errorf("%s, %s: %d %s, want refused=%t", key, tc.name, w.Code, strings.TrimSpace(w.Body.String()), tc.refused)
			}
		}
	}
}

// TestWrongMethodAnswersJSON: a method a path does not serve is a 405 in the
// API's error format, with Allow, not net/http's plain text.
func TestWrongMethodAnswersJSON(t *testing.T) {
	a, err := New(Config{KafkaAddr: "127.0.0.1:1", Cluster: emptyCluster{}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	mux := http.NewServeMux()
	a.Register(mux)
	for _, tc := range []struct{ path, allow string }{
		{"/produce", "POST"},
		{"/poll", "GET, HEAD, POST"},
		{"/topics/t", "DELETE, GET, HEAD"},
		{"/groups/g/seek", "POST"},
	} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("PUT", tc.path, strings.NewReader("{}")))
		if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != tc.allow ||
			!strings.Contains(w.Body.String(), `"code":"`+codeMethodNotAllowed+`"`) {
			t.Errorf("PUT %s: %d, Allow %q: %s; want 405, Allow %q, a JSON error", tc.path, w.Code, w.Header().Get("Allow"), w.Body, tc.allow)
		}
	}
}
