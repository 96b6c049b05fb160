package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/cli"
	"github.com/strata-stream/strata/internal/config"
)

// TestUserCommands: against a SASL node, the admin from --add-scram creates a
// user, lists it, the user logs in with the client flags, and deletion locks it
// out again.
func TestUserCommands(t *testing.T) {
	n := startOwnNode(t, func(cfg *config.Config) {
		cfg.SASLMechanisms = "SCRAM-SHA-256,SCRAM-SHA-512"
		cfg.AddScram = []string{"SCRAM-SHA-512=[name=admin,password=admin-secret]"}
	})
	as := func(user, password string, args ...string) result {
		t.Helper()
		env := map[string]string{cli.BrokersEnv: n.KafkaAddr(), cli.SASLPasswordEnv: password, UserPasswordEnv: "alice-secret"}
		return invocation{env: env}.run(t, append(args, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", user, "--timeout", "5s")...)
	}
	if r := as("admin", "admin-secret", "user", "create", "alice"); r.code != 0 {
		t.Fatalf("user create: %s", r)
	}
	r := as("admin", "admin-secret", "user", "list", "-o", "json")
	var users []userJSON
	if err := json.Unmarshal([]byte(r.stdout), &users); err != nil || r.code != 0 {
		t.Fatalf("user list: %v\n%s", err, r)
	}
	if len(users) != 2 || users[1].User != "alice" || users[1].Credentials[0].Mechanism != "SCRAM-SHA-512" {
		t.Fatalf("users %+v", users)
	}
	if r := as("alice", "alice-secret", "topic", "list"); r.code != 0 {
		t.Fatalf("alice cannot log in: %s", r)
	}
	if r := as("alice", "wrong", "topic", "list"); r.code == 0 || r.err == nil || !strings.Contains(r.err.Error(), "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("wrong password: %s", r)
	}
	// A second mechanism: delete removes both, one request each (a request
	// naming a user twice is refused, as Kafka refuses it).
	if r := as("admin", "admin-secret", "user", "create", "alice", "--mechanism", "SCRAM-SHA-256"); r.code != 0 {
		t.Fatalf("user create SCRAM-SHA-256: %s", r)
	}
	if r := as("admin", "admin-secret", "user", "delete", "alice"); r.code != 0 || !strings.Contains(r.stdout, "deleted 2 credential(s)") {
		t.Fatalf("user delete: %s", r)
	}
	if r := as("alice", "alice-secret", "topic", "list"); r.code == 0 {
		t.Fatalf("deleted user logged in: %s", r)
	}
	if r := as("admin", "admin-secret", "user", "create", "bob", "--mechanism", "MD5"); r.code != 2 {
		t.Fatalf("bad mechanism: exit %d, want 2", r.code)
	}
}
