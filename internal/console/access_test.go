package console

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/httpauth"
	"github.com/strata-stream/strata/internal/sasl"
)

// accessSamples is a request for every page; a new page needs one here and a
// rule in access.
var accessSamples = map[string]struct{ path, form string }{
	"GET /console/{$}":                     {"/console/", ""},
	"GET /console/topics":                  {"/console/topics", ""},
	"GET /console/new-topic":               {"/console/new-topic", ""},
	"POST /console/topics":                 {"/console/topics", "name=t&partitions=1&replication_factor=1"},
	"GET /console/topics/{topic}":          {"/console/topics/t", ""},
	"GET /console/topics/{topic}/records":  {"/console/topics/t/records", ""},
	"GET /console/groups":                  {"/console/groups", ""},
	"GET /console/groups/{group}":          {"/console/groups/g", ""},
	"POST /console/groups/{group}/offsets": {"/console/groups/g/offsets", "topic=t&to=earliest"},
	"GET /console/api/topics/{topic}":      {"/console/api/topics/t", ""},
	"GET /console/api/groups/{group}/lag":  {"/console/api/groups/g/lag", ""},
	"GET /console/static/":                 {"/console/static/console.css", ""},
	"/console/":                            {"/console/nowhere", ""},
}

// signedInOnly are the pages any signed-in principal may see: they hold nothing
// of the cluster's.
var signedInOnly = map[string]bool{"GET /console/new-topic": true, "GET /console/static/": true, "/console/": true}

// TestEveryPageGuarded walks the console's route table: every page has an
// access rule; without credentials every page answers 401; a principal without
// any ACL gets 403 from every page that shows or changes the cluster, before the
// page touches it (this console has no cluster behind it).
func TestEveryPageGuarded(t *testing.T) {
	cred, err := sasl.NewCredential(sasl.ScramSHA256, "pw", 4096)
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(user string, m sasl.Mechanism) (sasl.Credential, bool) {
		return cred, user == "nobody" && m == sasl.ScramSHA256
	}
	authz := acl.New(acl.Config{}, nil)
	c := New(Config{Guard: httpauth.New(httpauth.Config{Basic: sasl.NewAuthenticator(lookup), Lookup: lookup,
		Authorizer: func() *acl.Authorizer { return authz }})})
	for key := range access {
		found := false
		for _, rt := range c.routes() {
			found = found || rt.pattern == key
		}
		if !found {
			t.Errorf("access has a rule for %q, which is not a page", key)
		}
	}
	for _, rt := range c.routes() {
		key := rt.pattern
		rule := access[key]
		if !rule.IsSet() || rule.IsOpen() {
			t.Errorf("page %q has rule %s: every console page needs a signed-in principal", key, rule)
			continue
		}
		sample, ok := accessSamples[key]
		if !ok {
			t.Errorf("page %q has no sample request in accessSamples", key)
			continue
		}
		method := "GET"
		if m, _, ok := strings.Cut(key, " "); ok {
			method = m
		}
		serve := func(user string) *httptest.ResponseRecorder {
			r := httptest.NewRequest(method, sample.path, strings.NewReader(sample.form))
			if sample.form != "" {
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			r.TLS = &tls.ConnectionState{}
			if user != "" {
				r.SetBasicAuth(user, "pw")
			}
			w := httptest.NewRecorder()
			c.Handler().ServeHTTP(w, r)
			return w
		}
		if w := serve(""); w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s without credentials: %d %q, want 401 with a challenge", key, w.Code, w.Header().Get("WWW-Authenticate"))
		}
		if signedInOnly[key] {
			continue
		}
		if w := serve("nobody"); w.Code != http.StatusForbidden {
			t.Errorf("%s (%s) as a principal without ACLs: %d, want 403", key, rule, w.Code)
		}
	}
}
