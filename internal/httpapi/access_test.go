package httpapi

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/httpauth"
	"github.com/strata-stream/strata/internal/sasl"
)

// accessSamples is a well-formed request for every route, so the walk below
// reaches each handler's own checks. A new route needs one here and a rule in
// access.
var accessSamples = map[string]struct{ path, body string }{
	"GET /openapi.json":            {"/openapi.json", ""},
	"POST /produce":                {"/produce", `{"topic":"t","value":1}`},
	"POST /topics/{topic}/records": {"/topics/t/records", `{"records":[{"value":1}]}`},
	"GET /poll":                    {"/poll?topic=t&group=g", ""},
	"POST /poll":                   {"/poll", `{"topic":"t","group":"g"}`},
	"POST /commit":                 {"/commit", `{"group":"g","topic":"t","partition":0,"offset":1}`},
	"POST /ack":                    {"/ack", `{"group":"g","topic":"t","partition":0,"offset":1,"result":"accept"}`},
	"POST /groups/{group}/configs": {"/groups/g/configs", `{"configs":{"share.delivery.count.limit":"3"}}`},
	"POST /groups/{group}/seek":    {"/groups/g/seek", `{"topic":"t","to":"earliest"}`},
	"DELETE /groups/{group}/consumers/{consumer}": {"/groups/g/consumers/c", ""},
	"GET /groups":            {"/groups", ""},
	"GET /groups/{group}":    {"/groups/g", ""},
	"POST /topics":           {"/topics", `{"topic":"t"}`},
	"GET /topics":            {"/topics", ""},
	"GET /topics/{topic}":    {"/topics/t", ""},
	"DELETE /topics/{topic}": {"/topics/t", ""},
}

// listings are the Authenticated routes that filter what they list instead of
// refusing (internal/server TestHTTPAuth checks what they show).
var listings = map[string]bool{"GET /groups": true, "GET /topics": true}

// TestEveryRouteGuarded walks the route table: every route has an access rule;
// without credentials each route but the open ones answers 401; a principal
// without any ACL gets 403 from each route that is not open or a listing, before
// the handler calls on the cluster (the API's Kafka address here accepts and
// answers nothing).
func TestEveryRouteGuarded(t *testing.T) {
	for key := range access {
		if !slices.Contains(Routes(), key) {
			t.Errorf("access has a rule for %q, which is not a route", key)
		}
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	cred, err := sasl.NewCredential(sasl.ScramSHA256, "pw", 4096)
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(user string, m sasl.Mechanism) (sasl.Credential, bool) {
		return cred, user == "nobody" && m == sasl.ScramSHA256
	}
	authz := acl.New(acl.Config{}, nil)
	guard := httpauth.New(httpauth.Config{Basic: sasl.NewAuthenticator(lookup), Lookup: lookup,
		Authorizer: func() *acl.Authorizer { return authz }})
	a, err := New(Config{KafkaAddr: dead.Addr().String(), Cluster: emptyCluster{}, Guard: guard, TopicWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	mux := http.NewServeMux()
	a.Register(mux)
	for _, key := range Routes() {
		rule := access[key]
		if !rule.IsSet() {
			t.Errorf("route %q has no access rule: add one to access (access.go)", key)
			continue
		}
		sample, ok := accessSamples[key]
		if !ok {
			t.Errorf("route %q has no sample request in accessSamples", key)
			continue
		}
		method, _, _ := strings.Cut(key, " ")
		serve := func(user string) *httptest.ResponseRecorder {
			r := httptest.NewRequest(method, sample.path, strings.NewReader(sample.body))
			r.TLS = &tls.ConnectionState{}
			if user != "" {
				r.SetBasicAuth(user, "pw")
			}
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, r.WithContext(ctx))
			return w
		}
		w := serve("")
		switch {
		case rule.IsOpen() && w.Code == http.StatusUnauthorized:
			t.Errorf("%s (open) without credentials: 401", key)
		case !rule.IsOpen() && w.Code != http.StatusUnauthorized:
			t.Errorf("%s (%s) without credentials: %d, want 401: %s", key, rule, w.Code, w.Body)
		}
		if rule.IsOpen() || listings[key] {
			continue
		}
		if w := serve("nobody"); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "AUTHORIZATION_FAILED") {
			t.Errorf("%s (%s) as a principal without ACLs: %d, want 403: %s", key, rule, w.Code, w.Body)
		}
	}
}
