package main

import (
	"encoding/json"
	"testing"

	"github.com/strata-stream/strata/internal/cli"
	"github.com/strata-stream/strata/internal/config"
)

// TestACLCommands: the admin creates, lists and deletes ACLs with strata acl
// against a node with --authorizer acl; a user without rights is refused.
func TestACLCommands(t *testing.T) {
	n := startOwnNode(t, func(cfg *config.Config) {
		cfg.SASLMechanisms = "SCRAM-SHA-512"
		cfg.AddScram = []string{"SCRAM-SHA-512=[name=admin,password=admin-secret]", "SCRAM-SHA-512=[name=bob,password=bob-secret]"}
		cfg.Authorizer, cfg.SuperUsers = "acl", "User:admin"
	})
	as := func(user, password string, args ...string) result {
		t.Helper()
		env := map[string]string{cli.BrokersEnv: n.KafkaAddr(), cli.SASLPasswordEnv: password}
		return invocation{env: env}.run(t, append(args, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", user, "--timeout", "5s")...)
	}
	if r := as("admin", "admin-secret", "acl", "create", "--principal", "User:alice", "--operation", "read", "--operation", "write", "--topic", "ord", "--prefixed"); r.code != 0 {
		t.Fatalf("acl create: %s", r)
	}
	if r := as("admin", "admin-secret", "acl", "create", "--principal", "User:alice", "--operation", "read", "--group", "app", "--deny"); r.code != 0 {
		t.Fatalf("acl create --deny: %s", r)
	}
	list := func(args ...string) []aclJSON {
		t.Helper()
		r := as("admin", "admin-secret", append([]string{"acl", "list", "-o", "json"}, args...)...)
		var out []aclJSON
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 {
			t.Fatalf("acl list: %v\n%s", err, r)
		}
		return out
	}
	if got := list(); len(got) != 3 {
		t.Fatalf("all ACLs: %+v", got)
	}
	if got := list("--group", "app"); len(got) != 1 || got[0].Permission != "DENY" || got[0].Operation != "READ" {
		t.Fatalf("group ACLs: %+v", got)
	}
	if r := as("bob", "bob-secret", "acl", "list"); r.code == 0 {
		t.Fatalf("bob listed ACLs: %s", r)
	}
	if r := as("admin", "admin-secret", "acl", "delete", "--principal", "User:alice", "--topic", "ord", "--prefixed", "--operation", "write"); r.code != 0 {
		t.Fatalf("acl delete: %s", r)
	}
	if got := list("--topic", "ord", "--prefixed"); len(got) != 1 || got[0].Operation != "READ" {
		t.Fatalf("after deleting WRITE: %+v", got)
	}
	for _, args := range [][]string{
		{"acl", "create", "--principal", "User:a", "--operation", "read"},                // no resource
		{"acl", "create", "--principal", "User:a", "--operation", "fly", "--topic", "t"}, // bad operation
		{"acl", "create", "--operation", "read", "--topic", "t"},                         // no principal
		{"acl", "delete"}, // everything
		{"acl", "list", "--topic", "t", "--group", "g"}, // two resources
	} {
		if r := as("admin", "admin-secret", args...); r.code != 2 {
			t.Errorf("strata %v: exit %d, want 2", args, r.code)
		}
	}
}
