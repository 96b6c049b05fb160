package interop

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/certs/certstest"
	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaToolsSASLSSL: Kafka 4.4's own tools (the Java client underneath) over
// SASL_SSL with SCRAM-SHA-512 and ACL authorization: kafka-configs creates,
// describes and deletes a SCRAM user and sets its producer and request quotas, kafka-acls
// grants it access, and the user works with kafka-topics and franz-go only as far
// as its ACLs allow.
func TestKafkaToolsSASLSSL(t *testing.T) {
	kafkatools.Require(t)
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "interop")
	leaf := ca.Issue(t, "node", "strata-1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n := startNodeInProcess(t, ctx, dir, func(cfg *config.Config) {
		cfg.TLSCertFile, cfg.TLSKeyFile = leaf.CertFile, leaf.KeyFile
		cfg.SASLMechanisms = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"
		cfg.AddScram = []string{"SCRAM-SHA-512=[name=admin,password=admin-secret]"}
		cfg.Authorizer, cfg.SuperUsers = "acl", "User:admin"
	})
	bs := []string{"--bootstrap-server", n.KafkaAddr()}

	properties := func(name, mech, module, user, password string) string {
		path := filepath.Join(dir, name+".properties")
		body := fmt.Sprintf("security.protocol=SASL_SSL\nsasl.mechanism=%s\n"+
			"sasl.jaas.config=%s required username=\"%s\" password=\"%s\";\n"+
			"ssl.truststore.type=PEM\nssl.truststore.location=%s\n", mech, module, user, password, ca.File)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const scramModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
	admin := properties("admin", "SCRAM-SHA-512", scramModule, "admin", "admin-secret")
	alice := properties("alice", "SCRAM-SHA-512", scramModule, "alice", "alice-secret")
	alicePlain := properties("alice-plain", "PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule", "alice", "alice-secret")
	wrong := properties("wrong", "SCRAM-SHA-512", scramModule, "alice", "guess")

	configs := func(args ...string) string {
		t.Helper()
		return kafkatools.MustRun(t, "kafka-configs", append(append([]string{"--command-config", admin}, args...), bs...)...)
	}
	start := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	configs("--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=alice-secret]", "--entity-type", "users", "--entity-name", "alice")
	configs("--alter", "--add-config", "producer_byte_rate=1048576,request_percentage=200", "--entity-type", "users", "--entity-name", "alice")
	described := configs("--describe", "--entity-type", "users", "--entity-name", "alice")
	expectContains(t, described, "SCRAM-SHA-512=iterations=8192")
	expectContains(t, described, "producer_byte_rate=1048576")
	expectContains(t, described, "request_percentage=200")

	step("user added")
	kafkatools.MustRun(t, "kafka-topics", append([]string{"--command-config", admin, "--create", "--topic", "orders", "--partitions", "1", "--replication-factor", "1"}, bs...)...)
	kafkatools.MustRun(t, "kafka-topics", append([]string{"--command-config", admin, "--create", "--topic", "secret", "--partitions", "1", "--replication-factor", "1"}, bs...)...)
	acls := func(args ...string) string {
		t.Helper()
		return kafkatools.MustRun(t, "kafka-acls", append(append([]string{"--command-config", admin}, args...), bs...)...)
	}
	acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe", "--topic", "orders")
	expectContains(t, acls("--list", "--topic", "orders"), "principal=User:alice, host=*, operation=READ, permissionType=ALLOW")
	for _, props := range []string{alice, alicePlain} {
		out := kafkatools.MustRun(t, "kafka-topics", append([]string{"--command-config", props, "--list"}, bs...)...)
		if !strings.Contains(out, "orders") || strings.Contains(out, "secret") {
			t.Fatalf("alice lists topics:\n%s\nwant orders and not secret", out)
		}
	}
	acls("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Describe", "--topic", "orders")
	if out := acls("--list", "--topic", "orders"); strings.Contains(out, "operation=DESCRIBE") || !strings.Contains(out, "operation=READ") {
		t.Fatalf("after removing DESCRIBE:\n%s", out)
	}
	step("ACLs and logins")
	res, err := kafkatools.Run(ctx, "kafka-topics", append([]string{"--command-config", wrong, "--list"}, bs...)...)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 {
		t.Fatalf("kafka-topics with a wrong password succeeded:\n%s", res.Stdout)
	}
	expectContains(t, res.Stdout+res.Stderr, "Authentication failed")

	step("wrong password")
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.DialTLSConfig(&tls.Config{RootCAs: roots}),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.ListTopics(ctx); err != nil {
		t.Fatalf("franz-go as alice: %v", err)
	}
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.DialTLSConfig(&tls.Config{RootCAs: roots}),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	scrams, err := kadm.NewClient(adminCl).DescribeUserSCRAMs(ctx, "alice")
	if err != nil || scrams.Error() != nil {
		t.Fatalf("describing alice: %v %v", err, scrams.Error())
	}
	if c := scrams["alice"].CredInfos; len(c) != 1 || c[0].Mechanism != kadm.ScramSha512 || c[0].Iterations != 8192 {
		t.Fatalf("alice's credentials as kafka-configs set them: %+v", c)
	}

	configs("--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users", "--entity-name", "alice")
	res, err = kafkatools.Run(ctx, "kafka-topics", append([]string{"--command-config", alice, "--list"}, bs...)...)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 {
		t.Fatal("a deleted user still logs in")
	}
}
