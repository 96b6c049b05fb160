package interop

import (
	"testing"
	"time"
)

// TestSecurityWalkthrough runs the Walkthrough of docs/security.md (see
// walkthrough): TLS, SCRAM users, ACLs, quotas, the HTTP API and client
// certificates, on two nodes.
func TestSecurityWalkthrough(t *testing.T) {
	walkthrough{
		page:    "security.md",
		ports:   []string{"9092", "8080", "9093", "9192", "8180", "9193"},
		hosts:   []string{"127.0.0.1"},
		tools:   []string{"openssl", "curl"},
		timeout: 8 * time.Minute,
	}.run(t)
}
