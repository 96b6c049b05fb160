package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/certs/certstest"
	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/sasl"
	"github.com/strata-stream/strata/internal/wait"
)

// TestDelegationTokens runs a node with SCRAM, ACLs and a token secret key:
// alice creates a token, a client logs in with it (franz-go's
// scram.Auth.IsToken) and acts as alice, may not create or renew tokens from
// that session, bob may neither see nor renew alice's token, and after alice
// expires it the token no longer logs in.
func TestDelegationTokens(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.SASLMechanisms = "SCRAM-SHA-256,SCRAM-SHA-512"
	cfg.AddScram = []string{"SCRAM-SHA-512=[name=admin,password=a]", "SCRAM-SHA-512=[name=alice,password=al]", "SCRAM-SHA-512=[name=bob,password=b]"}
	cfg.Authorizer, cfg.SuperUsers = "acl", "User:admin"
	cfg.DelegationTokenSecretKey = "cluster-token-key"
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	login := func(a scram.Auth) *kgo.Client {
		cl, _ := n.client(t, kgo.SASL(a.AsSha512Mechanism()), kgo.RequestRetries(0))
		return cl
	}
	admin, alice, bob := login(scram.Auth{User: "admin", Pass: "a"}), login(scram.Auth{User: "alice", Pass: "al"}), login(scram.Auth{User: "bob", Pass: "b"})

	// alice may describe the cluster's topics; nothing else.
	acl := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "*", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow
	acl.Creations = append(acl.Creations, c)
	if _, err := acl.RequestWith(ctx, admin); err != nil {
		t.Fatal(err)
	}

	create := kmsg.NewPtrCreateDelegationTokenRequest()
	renewer := kmsg.NewCreateDelegationTokenRequestRenewer()
	renewer.PrincipalType, renewer.PrincipalName = "User", "carol"
	create.Renewers, create.MaxLifetimeMillis = append(create.Renewers, renewer), -1
	created, err := create.RequestWith(ctx, alice)
	if err != nil || created.ErrorCode != 0 {
		t.Fatalf("alice creates a token: %v %+v", err, created)
	}
	if created.PrincipalName != "alice" || created.TokenRequesterPrincipalName != "alice" ||
		string(created.HMAC) != string(sasl.TokenHMAC(cfg.DelegationTokenSecretKey, created.TokenID)) ||
		created.ExpiryTimestamp-created.IssueTimestamp != (24*time.Hour).Milliseconds() ||
		created.MaxTimestamp-created.IssueTimestamp != (7*24*time.Hour).Milliseconds() {
		t.Fatalf("created %+v", created)
	}

	// Owner other than the requester: CREATE_TOKENS on User:carol needed.
	forCarol := kmsg.NewPtrCreateDelegationTokenRequest()
	forCarol.OwnerPrincipalType, forCarol.OwnerPrincipalName = kmsg.StringPtr("User"), kmsg.StringPtr("carol")
	if r, err := forCarol.RequestWith(ctx, bob); err != nil || r.ErrorCode != kerr.DelegationTokenAuthorizationFailed.Code {
		t.Errorf("bob creates for carol: %v %+v, want DELEGATION_TOKEN_AUTHORIZATION_FAILED", err, r)
	}
	if r, err := forCarol.RequestWith(ctx, admin); err != nil || r.ErrorCode != 0 || r.PrincipalName != "carol" || r.TokenRequesterPrincipalName != "admin" {
		t.Errorf("admin creates for carol: %v %+v", err, r)
	}

	tokenAuth := scram.Auth{User: created.TokenID, Pass: sasl.TokenPassword(created.HMAC), IsToken: true}
	tok := login(tokenAuth)
	// Served as alice: DESCRIBE on topics allowed, CREATE not.
	mk := kmsg.NewPtrCreateTopicsRequest()
	mt := kmsg.NewCreateTopicsRequestTopic()
	mt.Topic, mt.NumPartitions, mt.ReplicationFactor = "by-token", 1, 1
	mk.Topics = append(mk.Topics, mt)
	if r, err := mk.RequestWith(ctx, tok); err != nil || r.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("CreateTopics over the token: %v %+v, want alice's TOPIC_AUTHORIZATION_FAILED", err, r)
	}
	if r, err := create.RequestWith(ctx, tok); err != nil || r.ErrorCode != kerr.DelegationTokenRequestNotAllowed.Code {
		t.Errorf("token session creates a token: %v %+v, want DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", err, r)
	}
	renew := kmsg.NewPtrRenewDelegationTokenRequest()
	renew.HMAC, renew.RenewTimeMillis = created.HMAC, -1
	if r, err := renew.RequestWith(ctx, tok); err != nil || r.ErrorCode != kerr.DelegationTokenRequestNotAllowed.Code {
		t.Errorf("token session renews: %v %+v, want DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", err, r)
	}
	if r, err := renew.RequestWith(ctx, bob); err != nil || r.ErrorCode != kerr.DelegationTokenOwnerMismatch.Code {
		t.Errorf("bob renews alice's token: %v %+v, want DELEGATION_TOKEN_OWNER_MISMATCH", err, r)
	}
	if r, err := renew.RequestWith(ctx, alice); err != nil || r.ErrorCode != 0 || r.ExpiryTimestamp < created.ExpiryTimestamp {
		t.Errorf("alice renews: %v %+v", err, r)
	}

	describe := func(cl *kgo.Client) []string {
		r, err := kmsg.NewPtrDescribeDelegationTokenRequest().RequestWith(ctx, cl)
		if err != nil || r.ErrorCode != 0 {
			t.Fatalf("describe: %v %+v", err, r)
		}
		var owners []string
		for _, d := range r.TokenDetails {
			owners = append(owners, d.PrincipalName)
		}
		return owners
	}
	if got := describe(alice); len(got) != 1 || got[0] != "alice" {
		t.Errorf("alice describes %v, want her token", got)
	}
	if got := describe(bob); len(got) != 0 {
		t.Errorf("bob describes %v, want none", got)
	}
	if got := describe(admin); len(got) != 2 {
		t.Errorf("admin describes %v, want both tokens", got)
	}

	expire := kmsg.NewPtrExpireDelegationTokenRequest()
	expire.HMAC, expire.ExpiryPeriodMillis = created.HMAC, -1
	if r, err := expire.RequestWith(ctx, alice); err != nil || r.ErrorCode != 0 {
		t.Fatalf("alice expires: %v %+v", err, r)
	}
	if r, err := renew.RequestWith(ctx, alice); err != nil || r.ErrorCode != kerr.DelegationTokenNotFound.Code {
		t.Errorf("renew after expiry: %v %+v, want DELEGATION_TOKEN_NOT_FOUND", err, r)
	}
	fresh, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.SASL(tokenAuth.AsSha512Mechanism()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, fresh); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("login with the expired token: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// TestClusterDelegationTokens: on three nodes, token requests sent to brokers
// that are not the active controller are forwarded to it over the controller
// link with the requester's principal (a renewal by someone else is refused,
// by the owner accepted), and the token logs in on every node, over Kafka and
// HTTP, until its expiry reaches that node.
func TestClusterDelegationTokens(t *testing.T) {
	c := startCluster(t, 3, func(i int, cfg *config.Config) {
		cfg.SASLMechanisms = "SCRAM-SHA-512"
		cfg.SASLPlainWithoutTLS = true // the HTTP API takes the token over plaintext
		cfg.InterBrokerSASL = "SCRAM-SHA-512=[name=broker,password=broker-secret]"
		cfg.AddScram = []string{"SCRAM-SHA-512=[name=alice,password=al]", "SCRAM-SHA-512=[name=bob,password=b]"}
		cfg.DelegationTokenSecretKey = "cluster-key"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var others []int32 // brokers whose controller is not the active one
	for _, n := range c.nodes {
		if !n.ctrl.IsLeader() {
			others = append(others, n.cfg.NodeID)
		}
	}
	if len(others) < 2 {
		t.Fatalf("followers %v: want two", others)
	}
	alice, _ := c.client(kgo.SASL(scram.Auth{User: "alice", Pass: "al"}.AsSha512Mechanism()), kgo.RequestRetries(0))
	bob, _ := c.client(kgo.SASL(scram.Auth{User: "bob", Pass: "b"}.AsSha512Mechanism()), kgo.RequestRetries(0))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, alice); err != nil { // learn the brokers
		t.Fatal(err)
	}
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, bob); err != nil {
		t.Fatal(err)
	}
	resp, err := alice.Broker(int(others[0])).Request(ctx, kmsg.NewPtrCreateDelegationTokenRequest())
	if err != nil {
		t.Fatal(err)
	}
	created := resp.(*kmsg.CreateDelegationTokenResponse)
	if created.ErrorCode != 0 || created.PrincipalName != "alice" || created.TokenRequesterPrincipalName != "alice" {
		t.Fatalf("create through node %d: %+v", others[0], created)
	}
	renew := kmsg.NewPtrRenewDelegationTokenRequest()
	renew.HMAC, renew.RenewTimeMillis = created.HMAC, -1
	if resp, err := bob.Broker(int(others[1])).Request(ctx, renew); err != nil || resp.(*kmsg.RenewDelegationTokenResponse).ErrorCode != kerr.DelegationTokenOwnerMismatch.Code {
		t.Errorf("bob renews through node %d: %v %+v, want DELEGATION_TOKEN_OWNER_MISMATCH", others[1], err, resp)
	}
	if resp, err := alice.Broker(int(others[1])).Request(ctx, renew); err != nil || resp.(*kmsg.RenewDelegationTokenResponse).ErrorCode != 0 {
		t.Errorf("alice renews through node %d: %v %+v", others[1], err, resp)
	}
	for _, n := range c.nodes {
		wait.For(t, "the token on every node", func() bool {
			_, ok := n.ctrl.Image().DelegationToken(created.TokenID)
			return ok
		})
		tok, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.RequestRetries(0),
			kgo.SASL(scram.Auth{User: created.TokenID, Pass: sasl.TokenPassword(created.HMAC), IsToken: true}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, tok)
		tok.Close()
		if err != nil {
			t.Errorf("token login on node %d: %v", n.cfg.NodeID, err)
		}
		if got := httpWithToken(t, n, created.TokenID, created.HMAC); got != http.StatusOK {
			t.Errorf("GET /topics with the token on node %d: %d, want 200", n.cfg.NodeID, got)
		}
	}

	expire := kmsg.NewPtrExpireDelegationTokenRequest()
	expire.HMAC, expire.ExpiryPeriodMillis = created.HMAC, -1
	if resp, err := alice.Broker(int(others[0])).Request(ctx, expire); err != nil || resp.(*kmsg.ExpireDelegationTokenResponse).ErrorCode != 0 {
		t.Fatalf("alice expires through node %d: %v %+v", others[0], err, resp)
	}
	for _, n := range c.nodes {
		wait.For(t, "the token's removal on every node", func() bool {
			_, ok := n.ctrl.Image().DelegationToken(created.TokenID)
			return !ok
		})
		if got := httpWithToken(t, n, created.TokenID, created.HMAC); got != http.StatusUnauthorized {
			t.Errorf("GET /topics with the expired token on node %d: %d, want 401", n.cfg.NodeID, got)
		}
	}
}

// httpWithToken is the status of GET /topics on n's HTTP listener with the
// delegation token as its bearer credential.
func httpWithToken(t *testing.T, n *Node, id string, hmac []byte) int {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+n.HTTPAddr()+"/topics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+id+"."+sasl.TokenPassword(hmac))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDelegationTokensOverMutualTLS: a connection authenticated by its TLS
// client certificate may create tokens (Kafka refuses only plaintext and
// one-way TLS), owned by the certificate's principal; one without a
// certificate on a one-way TLS listener may not.
func TestDelegationTokensOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "tokens")
	for _, mutual := range []bool{true, false} {
		cfg := nodeConfig(filepath.Join(dir, fmt.Sprint(mutual)))
		leaf := ca.Issue(t, fmt.Sprintf("node-%t", mutual), "broker-1")
		cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCAFile = leaf.CertFile, leaf.KeyFile, ca.File
		if mutual {
			cfg.TLSClientCAFile = ca.File
		}
		cfg.DelegationTokenSecretKey = "k"
		n := startNode(t, cfg)
		roots := x509.NewCertPool()
		roots.AddCert(ca.Cert)
		tlsCfg := &tls.Config{RootCAs: roots}
		if mutual {
			alice := ca.Issue(t, "alice", "alice")
			r, err := certs.New(certs.Files{CertFile: alice.CertFile, KeyFile: alice.KeyFile, CAFile: ca.File}, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			tlsCfg = r.ClientConfig()
		}
		cl, _ := n.client(t, kgo.DialTLSConfig(tlsCfg), kgo.RequestRetries(0))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := kmsg.NewPtrCreateDelegationTokenRequest().RequestWith(ctx, cl)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		want, owner := int16(0), "alice"
		if !mutual {
			want, owner = kerr.DelegationTokenRequestNotAllowed.Code, "ANONYMOUS"
		}
		if resp.ErrorCode != want || resp.PrincipalName != owner {
			t.Errorf("mutual TLS %t: %+v, want code %d owner %s", mutual, resp, want, owner)
		}
	}
}
