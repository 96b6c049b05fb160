package interop

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/certs/certstest"
)

// TestSASLClients: confluent-kafka for Python (librdkafka), kafkajs and kcat
// (Debian's librdkafka 2.0.2, which needs SaslHandshake v0 listed) log in to
// Strata the way they log in to Kafka, over SASL_PLAINTEXT and SASL_SSL with
// SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN:
//
//  1. Start two strata servers with --sasl-mechanisms SCRAM-SHA-256,SCRAM-SHA-512,PLAIN,
//     --add-scram users (admin, a super user, and alice) and --authorizer acl: one
//     with TLS (SASL_SSL), one without (SASL_PLAINTEXT, PLAIN allowed by
//     --sasl-plain-without-tls).
//  2. As admin (franz-go), create a topic per run and grant alice WRITE, READ and
//     DESCRIBE on the topics prefixed sasl- and READ on every group.
//  3. Each client, as alice, runs three times, once per mechanism, the listeners
//     alternating so that every client and every mechanism uses both: it writes 200
//     records and reads them back, checked like TestInterop's runs (report.Check).
//  4. ACL denial: confluent-kafka, as alice over SASL_SSL, writes to a topic alice has
//     no ACL on and fails with Kafka's TOPIC_AUTHORIZATION_FAILED.
//  5. Authentication failure: kcat, as alice with a wrong password, on each listener
//     and mechanism, cannot list the metadata and reports the broker's
//     authentication error.
func TestSASLClients(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("runs against Strata's SASL listeners; not with STRATA_INTEROP_TARGET=kfake")
	}
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "interop")
	leaf := ca.Issue(t, "node", "strata-1")
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	tlsConfig := &tls.Config{RootCAs: roots}
	admin := kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())

	saslFlags := []string{
		"--sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
		"--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
		"--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]",
		"--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]",
		"--authorizer", "acl", "--super-users", "User:admin",
	}
	type listener struct {
		protocol string
		tgt      *target
		admin    *kadm.Client
	}
	listeners := map[string]*listener{}
	for _, l := range []struct {
		protocol string
		probe    []kgo.Opt
		flags    []string
	}{
		{"SASL_SSL", []kgo.Opt{admin, kgo.DialTLSConfig(tlsConfig)}, []string{"--tls-cert-file", leaf.CertFile, "--tls-key-file", leaf.KeyFile}},
		{"SASL_PLAINTEXT", []kgo.Opt{admin}, []string{"--sasl-plain-without-tls=true"}},
	} {
		tgt := startStrataWith(t, l.probe, append(append([]string(nil), saslFlags...), l.flags...)...)
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tgt.bootstrap)}, l.probe...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		listeners[l.protocol] = &listener{protocol: l.protocol, tgt: tgt, admin: kadm.NewClient(cl)}
	}

	type run struct {
		c         client
		mechanism string
		l         *listener
		topic     string
	}
	var runs []run
	mechanisms := []string{"SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"}
	clients := []string{"python", "node", "kcat"}
	for i, name := range clients {
		c := clientNamed(t, name)
		for j, mech := range mechanisms {
			l := listeners["SASL_PLAINTEXT"]
			if (i+j)%2 == 0 {
				l = listeners["SASL_SSL"]
			}
			topic := strings.ToLower(fmt.Sprintf("sasl-%s-%s-%s", name, mech, l.protocol))
			runs = append(runs, run{c, mech, l, topic})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, l := range listeners {
		var topics []string
		for _, r := range runs {
			if r.l == l {
				topics = append(topics, r.topic)
			}
		}
		if l.protocol == "SASL_SSL" {
			topics = append(topics, "secret")
		}
		created, err := l.admin.CreateTopics(ctx, partitions, 1, nil, topics...)
		if err == nil {
			err = created.Error()
		}
		if err != nil {
			t.Fatalf("creating topics on the %s listener: %v", l.protocol, err)
		}
		acls := []*kadm.ACLBuilder{
			kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("sasl-").ResourcePatternType(kadm.ACLPatternPrefixed).
				Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe),
			kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("*").ResourcePatternType(kadm.ACLPatternLiteral).
				Operations(kadm.OpRead),
		}
		for _, b := range acls {
			res, err := l.admin.CreateACLs(ctx, b)
			if err != nil {
				t.Fatalf("creating ACLs on the %s listener: %v", l.protocol, err)
			}
			for _, r := range res {
				if r.Err != nil {
					t.Fatalf("creating ACL %+v on the %s listener: %v", r, l.protocol, r.Err)
				}
			}
		}
	}
	configs := func(l *listener, mechanism, user, password string) []string {
		args := []string{
			"--config", "security.protocol=" + l.protocol,
			"--config", "sasl.mechanism=" + mechanism,
			"--config", "sasl.username=" + user,
			"--config", "sasl.password=" + password,
		}
		if l.protocol == "SASL_SSL" {
			args = append(args, "--config", "ssl.ca.location="+ca.File)
		}
		return args
	}

	t.Run("clients", func(t *testing.T) {
		for _, name := range clients {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				for _, r := range runs {
					if r.c.name != name {
						continue
					}
					t.Run(r.mechanism+"-"+r.l.protocol, func(t *testing.T) {
						requireClient(t, r.c)
						s := runClient(t, r.c, job{bootstrap: r.l.tgt.bootstrap, topic: r.topic, mode: "both",
							args: configs(r.l, r.mechanism, "alice", "alice-secret")})
						if len(s.Produced) != records {
							t.Fatalf("%d records acknowledged, want %d", len(s.Produced), records)
						}
						expectClean(t, s.Produced, s.Consumed)
					})
				}
			})
		}
	})

	t.Run("acl-denied", func(t *testing.T) {
		c := clientNamed(t, "python")
		requireClient(t, c)
		l := listeners["SASL_SSL"]
		r := startClient(t, c, job{bootstrap: l.tgt.bootstrap, topic: "secret", mode: "produce", timeout: 20 * time.Second,
			args: configs(l, "SCRAM-SHA-512", "alice", "alice-secret")})
		<-r.exited
		if r.err == nil {
			t.Fatalf("alice wrote to a topic she has no ACL on:\n%s", r.stdout.String())
		}
		if msg := r.stderr.String(); !strings.Contains(msg, "TOPIC_AUTHORIZATION_FAILED") {
			t.Fatalf("the denied write failed otherwise than with TOPIC_AUTHORIZATION_FAILED:\n%s", lastLines(r.stderr.Bytes()))
		}
		t.Logf("confluent-kafka: %s", lastLines(r.stderr.Bytes()))
		end, err := l.admin.ListEndOffsets(context.Background(), "secret")
		if err != nil {
			t.Fatal(err)
		}
		end.Each(func(o kadm.ListedOffset) {
			if o.Err != nil || o.Offset != 0 {
				t.Errorf("secret/%d: end offset %d (%v) after a denied write, want 0", o.Partition, o.Offset, o.Err)
			}
		})
	})

	t.Run("kcat-wrong-password", func(t *testing.T) {
		requireClient(t, clientNamed(t, "kcat"))
		for _, protocol := range []string{"SASL_PLAINTEXT", "SASL_SSL"} {
			l := listeners[protocol]
			for _, mech := range mechanisms {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				args := append([]string{"-L", "-b", l.tgt.bootstrap, "-m", "5"}, kcatX(configs(l, mech, "alice", "wrong-secret"))...)
				out, err := exec.CommandContext(ctx, "kcat", args...).CombinedOutput()
				cancel()
				if err == nil {
					t.Fatalf("%s over %s: kcat listed the metadata with a wrong password:\n%s", mech, protocol, out)
				}
				if !strings.Contains(string(out), "Authentication failed") {
					t.Fatalf("%s over %s: kcat failed otherwise than with an authentication error:\n%s", mech, protocol, lastLines(out))
				}
			}
		}
	})

	for _, l := range listeners {
		if err := l.tgt.stop(); err != nil {
			t.Errorf("stopping the %s server: %v", l.protocol, err)
		}
	}
}

// kcatX turns the clients' --config key=value arguments into kcat's -X ones.
func kcatX(configs []string) []string {
	args := slices.Clone(configs)
	for i, a := range args {
		if a == "--config" {
			args[i] = "-X"
		}
	}
	return args
}
