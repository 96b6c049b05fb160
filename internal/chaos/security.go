package chaos

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/certs/certstest"
	"github.com/strata-stream/strata/internal/config"
)

// brokers is how clients reach a cluster: the nodes' Kafka addresses (their
// proxies) and, on a secured cluster, the TLS and SASL options of the
// principal they act as.
type brokers struct {
	addrs []string
	auth  []kgo.Opt
}

// security is a secured cluster's set-up (a run with variant.secure): every
// listener (Kafka, controller, HTTP) uses TLS with one node certificate from a
// test CA; the Kafka listener asks for SASL/SCRAM-SHA-512, also of the nodes'
// own clients (the inter-broker user, a super user); --authorizer acl, with
// the harness acting as the super user admin and the workload as
// workloadUser, which grant gives exactly what the workload needs.
//
// The nodes make their own Kafka connections (follower fetches, transaction
// markers) from their own loopback addresses (--kafka-source-host), so the
// Kafka proxies, which cannot read a client id through TLS, tell them apart by
// address (clusterNet, netfault.Net.KafkaByAddr): isolations and data cuts cut
// the same connections as on a plaintext cluster.
type security struct {
	ca        *certstest.CA
	cert, key string      // the nodes' certificate and key files
	client    *tls.Config // the clients' TLS: the CA's certificate as the root
}

// The secured cluster's users (SCRAM-SHA-512).
const (
	adminUser      = "admin"
	workloadUser   = "chaos"
	brokerUser     = "broker"
	securePassword = "chaos-secret"
)

// maxSecureNodes bounds the node ids whose loopback addresses (127.0.0.10+id)
// the node certificate names.
const maxSecureNodes = 9

// newSecurity makes the CA and the node certificate, valid for 127.0.0.1 (an
// in-process cluster's nodes and proxies) and every node's own loopback
// address (a process cluster's).
func newSecurity(t *testing.T) *security {
	t.Helper()
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "chaos")
	var ips []net.IP
	for id := int32(1); id <= maxSecureNodes; id++ {
		ips = append(ips, net.ParseIP(sourceHost(id)))
	}
	leaf := ca.IssueFor(t, "node", "node", ips...)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	client := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return &security{ca: ca, cert: leaf.CertFile, key: leaf.KeyFile, client: client}
}

// sasl is the SASL option of a client logging in as user.
func (s *security) sasl(user string) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user, Pass: securePassword}.AsSha512Mechanism())
}

// scramSpec is a user's --add-scram (and --inter-broker-sasl) value.
func scramSpec(user string) string {
	return fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", user, securePassword)
}

// flags are every node's server flags for s (--kafka-source-host, which is
// per node, is in clusterNet.flags).
func (s *security) flags() []string {
	return []string{
		"--tls-cert-file", s.cert, "--tls-key-file", s.key, "--tls-ca-file", s.ca.File,
		"--sasl-mechanisms", "SCRAM-SHA-512",
		"--inter-broker-sasl", scramSpec(brokerUser),
		"--add-scram", scramSpec(adminUser), "--add-scram", scramSpec(workloadUser),
		"--authorizer", "acl", "--super-users", "User:" + adminUser,
	}
}

// configure is flags for an in-process node (KafkaSourceHost: see
// startMemCluster).
func (s *security) configure(cfg *config.Config) {
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCAFile = s.cert, s.key, s.ca.File
	cfg.SASLMechanisms = "SCRAM-SHA-512"
	cfg.InterBrokerSASL = scramSpec(brokerUser)
	cfg.AddScram = []string{scramSpec(adminUser), scramSpec(workloadUser)}
	cfg.Authorizer, cfg.SuperUsers = "acl", "User:"+adminUser
}

// harness is how the harness's clients reach addrs: as the super user on a
// secured cluster (s non-nil).
func (s *security) harness(addrs []string) brokers {
	if s == nil {
		return brokers{addrs: addrs}
	}
	return brokers{addrs: addrs, auth: []kgo.Opt{kgo.DialTLSConfig(s.client), s.sasl(adminUser)}}
}

// workload is how the workload's clients reach addrs: as workloadUser on a
// secured cluster.
func (s *security) workload(addrs []string) brokers {
	if s == nil {
		return brokers{addrs: addrs}
	}
	return brokers{addrs: addrs, auth: []kgo.Opt{kgo.DialTLSConfig(s.client), s.sasl(workloadUser)}}
}

// grant gives workloadUser exactly what the workload on topic needs (adm is
// the super user's): the plain workload writes idempotently (WRITE on the
// topic is enough, KIP-679) and reads the topic, and its group commits; the
// transactional workload also writes to topic-out under its transactional
// ids and commits its copy stage's group in its transactions. DESCRIBE is
// implied by READ and WRITE. The harness itself (topic creation, probes, the
// final reads) acts as the super user.
func grant(adm *kadm.Client, topic string, txn bool) error {
	allow := func() *kadm.ACLBuilder {
		return kadm.NewACLs().Allow("User:" + workloadUser).AllowHosts("*").ResourcePatternType(kadm.ACLPatternLiteral)
	}
	acls := []*kadm.ACLBuilder{allow().Topics(topic).Operations(kadm.OpRead, kadm.OpWrite)}
	if !txn {
		acls = append(acls, allow().Groups(workloadConfig{topic: topic}.withDefaults().group).Operations(kadm.OpRead))
	} else {
		cfg := txnConfig{topic: topic}.withDefaults()
		var ids []string
		for i := range cfg.producers {
			ids = append(ids, txnID(i))
		}
		for i := range cfg.copiers {
			ids = append(ids, copyID(i))
		}
		acls = append(acls,
			allow().Topics(cfg.output).Operations(kadm.OpWrite),
			allow().Groups(cfg.group).Operations(kadm.OpRead),
			allow().TransactionalIDs(ids...).Operations(kadm.OpWrite),
		)
	}
	return waitFor(healthyTimeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, b := range acls {
			res, err := adm.CreateACLs(ctx, b)
			if err != nil {
				return err
			}
			for _, r := range res {
				if r.Err != nil {
					return fmt.Errorf("creating an ACL on %s for %v: %w", r.Name, r.Operation, r.Err)
				}
			}
		}
		return nil
	})
}
