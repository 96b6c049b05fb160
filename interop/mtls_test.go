package interop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/certs/certstest"
	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaClientsMutualTLS: Kafka 4.4's console producer and consumer (the
// Java client) authenticate with client certificates from PKCS12 keystores
// (security.protocol=SSL), the principals mapped by --ssl-principal-mapping-rules
// (User:alice from "CN=Alice,O=strata-test"). kafka-acls (--producer --consumer),
// run over mTLS as the super user, lets alice write and read one topic: she does, mallory gets
// TOPIC_AUTHORIZATION_FAILED, and a certificate no rule maps is not let in.
func TestKafkaClientsMutualTLS(t *testing.T) {
	kafkatools.Require(t)
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not on PATH (it writes the PKCS12 keystores)")
	}
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "interop")
	node := ca.Issue(t, "node", "strata-1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n := startNodeInProcess(t, ctx, dir, func(cfg *config.Config) {
		cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile = node.CertFile, node.KeyFile, ca.File
		cfg.SSLPrincipalMappingRules = "RULE:^CN=(Admin|Alice|Mallory|strata-1),O=strata-test$/$1/L"
		cfg.Authorizer, cfg.SuperUsers = "acl", "User:admin,User:strata-1"
	})
	bs := []string{"--bootstrap-server", n.KafkaAddr()}

	// properties writes a client configuration whose keystore holds cn's
	// certificate and key (PKCS12, as keytool or openssl make them).
	properties := func(cn string) string {
		leaf := ca.Issue(t, strings.ToLower(cn), cn)
		keystore := filepath.Join(dir, strings.ToLower(cn)+".p12")
		out, err := exec.CommandContext(ctx, "openssl", "pkcs12", "-export", "-in", leaf.CertFile, "-inkey", leaf.KeyFile,
			"-name", cn, "-out", keystore, "-passout", "pass:keystore-secret").CombinedOutput()
		if err != nil {
			t.Fatalf("openssl pkcs12: %v\n%s", err, out)
		}
		path := filepath.Join(dir, strings.ToLower(cn)+".properties")
		body := fmt.Sprintf("security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\n"+
			"ssl.keystore.type=PKCS12\nssl.keystore.location=%s\nssl.keystore.password=keystore-secret\n", ca.File, keystore)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	admin, alice, mallory, eve := properties("Admin"), properties("Alice"), properties("Mallory"), properties("Eve")

	kafkatools.MustRun(t, "kafka-topics", append([]string{"--command-config", admin, "--create", "--topic", "orders",
		"--partitions", "1", "--replication-factor", "1"}, bs...)...)
	kafkatools.MustRun(t, "kafka-acls", append([]string{"--command-config", admin, "--add", "--allow-principal", "User:alice",
		"--producer", "--consumer", "--topic", "orders", "--group", "alice-readers"}, bs...)...)

	kafkatools.MustRunInput(t, "order-1\norder-2\n", "kafka-console-producer", append(bs, "--topic", "orders", "--command-config", alice)...)
	out := kafkatools.MustRun(t, "kafka-console-consumer", append(bs, "--topic", "orders", "--from-beginning", "--max-messages", "2",
		"--group", "alice-readers", "--command-config", alice, "--timeout-ms", "60000")...)
	expectContains(t, out, "order-1")
	expectContains(t, out, "order-2")

	res, err := kafkatools.RunInput(ctx, "stolen\n", "kafka-console-producer", append(bs, "--topic", "orders", "--command-config", mallory)...)
	if err != nil {
		t.Fatal(err)
	}
	expectContains(t, res.Stdout+res.Stderr, "TopicAuthorizationException: Not authorized to access topics: [orders]")

	res, err = kafkatools.Run(ctx, "kafka-topics", append([]string{"--command-config", eve, "--list"}, bs...)...)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 {
		t.Fatalf("kafka-topics with a certificate no rule maps succeeded:\n%s", res.Stdout)
	}

	// What alice wrote is all the topic holds.
	out = kafkatools.MustRun(t, "kafka-get-offsets", append(bs, "--topic", "orders", "--command-config", admin)...)
	expectContains(t, out, "orders:0:2")
}
