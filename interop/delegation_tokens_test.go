package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaDelegationTokens: Kafka 4.4's kafka-delegation-tokens tool creates,
// describes, renews and expires a token of alice's over SASL_PLAINTEXT with
// SCRAM-SHA-512 and ACLs, and Kafka's console producer and consumer (the Java
// client) log in with the token (tokenauth=true) and act as alice. A token
// session may not create tokens; after the expiry the token no longer logs in.
func TestKafkaDelegationTokens(t *testing.T) {
	kafkatools.Require(t)
	admin := scram.Auth{User: "admin", Pass: "admin-secret"}
	srv := startStrataWith(t, []kgo.Opt{kgo.SASL(admin.AsSha512Mechanism())},
		"--sasl-mechanisms", "SCRAM-SHA-512", "--authorizer", "acl", "--super-users", "User:admin",
		"--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
		"--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]",
		"--inter-broker-sasl", "SCRAM-SHA-512=[name=broker,password=broker-secret]",
		"--delegation-token-secret-key", "interop-token-key")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.bootstrap), kgo.SASL(admin.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	acls := kadm.NewACLs().Allow("User:alice").Topics("orders").Groups("token-readers").
		Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := adm.CreateACLs(ctx, acls); err != nil || res[0].Err != nil {
		t.Fatalf("ACLs for alice: %v %+v", err, res)
	}

	dir := t.TempDir()
	properties := func(name, user, password, extra string) string {
		path := filepath.Join(dir, name+".properties")
		body := fmt.Sprintf("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
			"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"%s\" password=\"%s\"%s;\n", user, password, extra)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	alice := properties("alice", "alice", "alice-secret", "")
	bs := []string{"--bootstrap-server", srv.bootstrap}
	tokens := func(props string, args ...string) (kafkatools.Result, error) {
		return kafkatools.Run(ctx, "kafka-delegation-tokens", append(append([]string{"--command-config", props}, args...), bs...)...)
	}
	mustTokens := func(props string, args ...string) string {
		t.Helper()
		return kafkatools.MustRun(t, "kafka-delegation-tokens", append(append([]string{"--command-config", props}, args...), bs...)...)
	}

	out := mustTokens(alice, "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:bob")
	expectContains(t, out, "Created delegation token with tokenId : ")
	var id, hmac string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && strings.Contains(out, "tokenId : "+f[0]) {
			id, hmac = f[0], f[1]
			if f[2] != "User:alice" || f[3] != "User:alice" {
				t.Errorf("owner and requester %q %q, want User:alice", f[2], f[3])
			}
		}
	}
	if id == "" {
		t.Fatalf("no token in the output of --create:\n%s", out)
	}
	// Without --owner-principal the tool sends an empty owner list, which
	// Kafka 4.4 answers with no tokens too ("for current user": 0).
	expectContains(t, mustTokens(alice, "--describe"), "Total number of tokens : 0")
	out = mustTokens(alice, "--describe", "--owner-principal", "User:alice")
	expectContains(t, out, id)
	expectContains(t, out, "Total number of tokens : 1")
	expectContains(t, mustTokens(alice, "--describe", "--owner-principal", "User:bob"), "Total number of tokens : 1")
	expectContains(t, mustTokens(alice, "--renew", "--renew-time-period", "-1", "--hmac", hmac), "Completed renew operation")

	// The Java client logs in with the token and is alice.
	token := properties("token", id, hmac, " tokenauth=\"true\"")
	kafkatools.MustRunInput(t, "by-token-1\nby-token-2\n", "kafka-console-producer", append(bs, "--topic", "orders", "--command-config", token)...)
	out = kafkatools.MustRun(t, "kafka-console-consumer", append(bs, "--topic", "orders", "--from-beginning", "--max-messages", "2",
		"--group", "token-readers", "--command-config", token, "--timeout-ms", "60000")...)
	expectContains(t, out, "by-token-1")
	expectContains(t, out, "by-token-2")
	tokenAuth := scram.Auth{User: id, Pass: hmac, IsToken: true}
	tcl, err := kgo.NewClient(kgo.SeedBrokers(srv.bootstrap), kgo.SASL(tokenAuth.AsSha512Mechanism()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer tcl.Close()
	mk := kmsg.NewPtrCreateTopicsRequest()
	mt := kmsg.NewCreateTopicsRequestTopic()
	mt.Topic, mt.NumPartitions, mt.ReplicationFactor = "not-alices", 1, 1
	mk.Topics = append(mk.Topics, mt)
	if r, err := mk.RequestWith(ctx, tcl); err != nil || r.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("CreateTopics with alice's token: %v %+v, want TOPIC_AUTHORIZATION_FAILED", err, r)
	}

	// A token session may not create tokens.
	res, err := tokens(token, "--create", "--max-life-time-period", "-1")
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(res.Stdout+res.Stderr, "not allowed") {
		t.Errorf("--create over the token: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}

	expectContains(t, mustTokens(alice, "--expire", "--expiry-time-period", "-1", "--hmac", hmac), "Completed expire operation")
	expectContains(t, mustTokens(alice, "--describe", "--owner-principal", "User:alice"), "Total number of tokens : 0")
	res, err = tokens(token, "--describe")
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(res.Stdout+res.Stderr, "Authentication failed") {
		t.Errorf("--describe with the expired token: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
}
