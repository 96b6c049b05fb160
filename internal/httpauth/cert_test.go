package httpauth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/certs/certstest"
)

// TestGuardClientCertificate: without SASL, the caller is its verified client
// certificate's principal, through the mapping rules when they are set; a
// certificate no rule applies to gets 401.
func TestGuardClientCertificate(t *testing.T) {
	dir := t.TempDir()
	leaf := certstest.NewCA(t, dir, "cluster").Issue(t, "alice", "Alice")
	b, err := os.ReadFile(leaf.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	state := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}
	for _, tc := range []struct {
		rules     string
		want      int
		principal string
	}{
		{"", http.StatusOK, "User:Alice"},
		{"RULE:^CN=([^,]+),O=strata-test$/$1/L", http.StatusOK, "User:alice"},
		{"DEFAULT", http.StatusOK, "User:CN=Alice,O=strata-test"},
		{"RULE:^CN=([^,]+),O=other$/$1/", http.StatusUnauthorized, ""},
	} {
		cfg := Config{Authorizer: authorizer}
		if tc.rules != "" {
			if cfg.Principals, err = certs.ParsePrincipalMappingRules(tc.rules); err != nil {
				t.Fatal(err)
			}
		}
		var seen string
		h := New(cfg).Wrap(Authenticated(), writeErr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = Principal(r)
		}))
		r := httptest.NewRequest("GET", "/", nil)
		r.TLS = state
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want || seen != tc.principal {
			t.Errorf("rules %q: status %d, principal %q; want %d, %q (%s)", tc.rules, w.Code, seen, tc.want, tc.principal, w.Body)
		}
	}
}
