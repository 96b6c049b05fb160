package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/cli"
	"github.com/strata-stream/strata/internal/config"
)

// TestTokenCommands: against a node with SCRAM, ACLs and a token secret key,
// alice creates a token with `strata token create`, describes, renews and
// expires it; while it lives a client logs in with it over Kafka (the client
// commands' --sasl-token) and over HTTP ("Bearer <id>.<hmac>") as alice,
// held to her ACLs and barred from making tokens; after the expiry both
// logins are refused at once.
func TestTokenCommands(t *testing.T) {
	n := startOwnNode(t, func(cfg *config.Config) {
		cfg.SASLMechanisms = "SCRAM-SHA-512"
		cfg.AddScram = []string{"SCRAM-SHA-512=[name=admin,password=admin-secret]", "SCRAM-SHA-512=[name=alice,password=alice-secret]"}
		cfg.InterBrokerSASL = "SCRAM-SHA-512=[name=broker,password=broker-secret]"
		cfg.Authorizer, cfg.SuperUsers = "acl", "User:admin"
		cfg.DelegationTokenSecretKey = "token-test-key"
		cfg.SASLPlainWithoutTLS = true // HTTP credentials over plaintext, for the test
	})
	as := func(user, password string, args ...string) result {
		t.Helper()
		env := map[string]string{cli.BrokersEnv: n.KafkaAddr(), cli.SASLPasswordEnv: password}
		return invocation{env: env}.run(t, append(args, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", user, "--timeout", "10s")...)
	}
	must := func(r result) result {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s", r)
		}
		return r
	}
	must(as("admin", "admin-secret", "topic", "create", "orders", "-p", "1"))
	must(as("admin", "admin-secret", "topic", "create", "payments", "-p", "1"))
	must(as("admin", "admin-secret", "acl", "create", "--principal", "User:alice", "--operation", "write", "--operation", "describe", "--topic", "orders"))

	before := time.Now()
	r := must(as("alice", "alice-secret", "token", "create", "--renewer", "User:spark", "--max-lifetime", "48h", "-o", "json"))
	var tok tokenJSON
	if err := json.Unmarshal([]byte(r.stdout), &tok); err != nil {
		t.Fatalf("create -o json: %v\n%s", err, r)
	}
	if tok.TokenID == "" || tok.HMAC == "" || tok.Owner != "User:alice" || tok.Requester != "User:alice" ||
		len(tok.Renewers) != 1 || tok.Renewers[0] != "User:spark" ||
		tok.ExpiryTimestamp-tok.IssueTimestamp != (24*time.Hour).Milliseconds() || tok.MaxTimestamp-tok.IssueTimestamp != (48*time.Hour).Milliseconds() {
		t.Fatalf("created %+v", tok)
	}

	// A second token, printed for people: the HMAC once, with a warning.
	r = must(as("alice", "alice-secret", "token", "create"))
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "TOKEN") || !strings.Contains(lines[0], "HMAC") || !strings.Contains(r.stderr, "no command shows it again") {
		t.Fatalf("create for people:\n%s", r)
	}
	second := strings.Fields(lines[1]) // token id, HMAC, ...

	r = must(as("alice", "alice-secret", "token", "describe", "-o", "json"))
	var described []tokenJSON
	if err := json.Unmarshal([]byte(r.stdout), &described); err != nil || len(described) != 2 ||
		described[0].TokenID != tok.TokenID || described[1].TokenID != second[0] || described[0].HMAC != "" {
		t.Fatalf("alice describes: %v %+v\n%s", err, described, r)
	}
	r = must(as("admin", "admin-secret", "token", "describe", "--owner", "User:alice"))
	if strings.Count(r.stdout, "User:alice") != 4 || strings.Contains(r.stdout, tok.HMAC) {
		t.Fatalf("admin describes alice's tokens (owner and requester of two, no HMAC):\n%s", r)
	}
	r = must(as("admin", "admin-secret", "token", "describe", "--owner", "bob", "-o", "json"))
	if strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("bob's tokens: %s", r)
	}

	// The token logs in over Kafka as alice: her WRITE on orders, not on
	// payments, and no token requests from a token session.
	asToken := func(args ...string) result {
		t.Helper()
		return as(tok.TokenID, tok.HMAC, append(args, "--sasl-token")...)
	}
	r = invocation{stdin: "by-token\n", env: map[string]string{cli.BrokersEnv: n.KafkaAddr(), cli.SASLPasswordEnv: tok.HMAC}}.run(t,
		"produce", "orders", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", tok.TokenID, "--sasl-token", "--timeout", "10s")
	must(r)
	if r := asToken("token", "create"); r.code != 1 || !strings.Contains(r.err.Error(), "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED") || !strings.Contains(r.err.Error(), "not with a delegation token") {
		t.Fatalf("a token session creates a token: %s", r)
	}
	if r := asToken("token", "describe"); r.code != 1 || !strings.Contains(r.err.Error(), "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED") {
		t.Fatalf("a token session describes tokens: %s", r)
	}

	// Over HTTP, as alice too.
	post := func(topic, auth string) int {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+n.HTTPAddr()+"/topics/"+topic+"/records", strings.NewReader(`{"records":[{"value":"over-http"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	bearer := "Bearer " + tok.TokenID + "." + tok.HMAC
	for _, c := range []struct {
		name, topic, auth string
		want              int
	}{
		{"the token", "orders", bearer, 200},
		{"the token, alice's ACLs", "payments", bearer, 403},
		{"no credentials", "orders", "", 401},
		{"another token's HMAC", "orders", "Bearer " + tok.TokenID + "." + second[1], 401},
		{"the other token", "orders", "Bearer " + second[0] + "." + second[1], 200},
	} {
		if got := post(c.topic, c.auth); got != c.want {
			t.Errorf("POST as %s: %d, want %d", c.name, got, c.want)
		}
	}

	env := map[string]string{cli.BrokersEnv: n.KafkaAddr(), cli.SASLPasswordEnv: "alice-secret", TokenHMACEnv: tok.HMAC}
	alice := func(args ...string) result {
		t.Helper()
		return invocation{env: env}.run(t, append(args, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "alice", "--timeout", "10s")...)
	}
	r = must(alice("token", "renew", "--period", "1h", "-o", "json"))
	var renewed tokenExpiryJSON
	if err := json.Unmarshal([]byte(r.stdout), &renewed); err != nil ||
		renewed.ExpiryTimestamp < before.Add(time.Hour).UnixMilli() || renewed.ExpiryTimestamp > time.Now().Add(time.Hour).UnixMilli() {
		t.Fatalf("renew --period 1h: %v %+v", err, renewed)
	}
	if r := must(alice("token", "expire")); !strings.Contains(r.stdout, "expired") {
		t.Fatalf("expire: %s", r)
	}
	if got := post("orders", bearer); got != 401 {
		t.Errorf("POST with the expired token: %d, want 401", got)
	}
	if r := asToken("topic", "list"); r.code != 1 || !strings.Contains(r.err.Error(), "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("Kafka login with the expired token: %s", r)
	}
	if r := alice("token", "renew"); r.code != 1 || !strings.Contains(r.err.Error(), "DELEGATION_TOKEN_NOT_FOUND") {
		t.Errorf("renew after expire: %s", r)
	}
	if r := alice("token", "expire", "--hmac", "not-base64!"); r.code != 2 {
		t.Errorf("an HMAC that is not base64: %s, want exit 2", r)
	}

	for _, args := range [][]string{
		{"token", "create", "--renewer", ":spark"},
		{"token", "create", "--max-lifetime", "-1h"},
		{"token", "renew", "--hmac", ""},
		{"token", "expire", "--period", "1us"},
	} {
		if r := as("alice", "alice-secret", args...); r.code != 2 {
			t.Errorf("strata %s: %s, want exit 2 (usage)", strings.Join(args, " "), r)
		}
	}
	if r := runAt(t, n.KafkaAddr(), "", "token", "describe", "--sasl-mechanism", "PLAIN", "--sasl-user", "x", "--sasl-token"); r.code != 2 {
		t.Errorf("--sasl-token with PLAIN: %s, want exit 2", r)
	}
}

// TestTokenCommandsWithoutTokens: a node without a token secret key answers
// DELEGATION_TOKEN_AUTH_DISABLED, and the command says how to turn tokens on;
// a client without SASL is told what a token request needs.
func TestTokenCommandsWithoutTokens(t *testing.T) {
	n := startOwnNode(t, func(cfg *config.Config) {
		cfg.SASLMechanisms = "SCRAM-SHA-512"
		cfg.AddScram = []string{"SCRAM-SHA-512=[name=admin,password=admin-secret]"}
	})
	env := map[string]string{cli.BrokersEnv: n.KafkaAddr(), cli.SASLPasswordEnv: "admin-secret"}
	for _, args := range [][]string{{"token", "create"}, {"token", "describe"}} {
		r := invocation{env: env}.run(t, append(args, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "admin", "--timeout", "10s")...)
		if r.code != 1 || !strings.Contains(r.err.Error(), "DELEGATION_TOKEN_AUTH_DISABLED") || !strings.Contains(r.err.Error(), "--delegation-token-secret-key") {
			t.Errorf("strata %s without tokens: %s", strings.Join(args, " "), r)
		}
	}
	if r := run(t, "token", "create", "--timeout", "10s"); r.code != 1 || !strings.Contains(r.err.Error(), "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED") {
		t.Errorf("token create without SASL: %s", r)
	}
}
