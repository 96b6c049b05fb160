package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/httpauth"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/sasl"
)

// loadTLS reads the TLS files when TLS is configured; n.certs stays nil otherwise.
func (n *Node) loadTLS() error {
	if n.cfg.TLSCertFile == "" {
		return nil
	}
	r, err := certs.New(certs.Files{
		CertFile: n.cfg.TLSCertFile, KeyFile: n.cfg.TLSKeyFile,
		ClientCAFile: n.cfg.TLSClientCAFile, CAFile: n.cfg.TLSCAFile,
	}, 0, n.log.With("component", "tls"))
	if err != nil {
		return err
	}
	n.certs = r
	if rules := n.cfg.SSLPrincipalMappingRules; rules != "" {
		if n.principals, err = certs.ParsePrincipalMappingRules(rules); err != nil {
			return err
		}
	}
	return nil
}

// listen opens a TCP listener on addr, a TLS one when TLS is on, and
// registers its close with the node's lifecycle. The Kafka listener's TLS
// connections coalesce each response's TLS records into few socket writes
// (protocol.NewTLSListener).
func (n *Node) listen(what, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", what, err)
	}
	n.lc.onStop(what+" listener", func(stopping) error { ln.Close(); return nil })
	if n.certs != nil {
		wrap := tls.NewListener
		if what == "kafka" {
			wrap = protocol.NewTLSListener
		}
		ln = wrap(ln, n.certs.ServerConfig())
	}
	return ln, nil
}

// dialTLS gives the TLS configuration for dialling another node's controller
// listener, or nil when TLS is off.
func (n *Node) dialTLS() func(addr string) *tls.Config {
	if n.certs == nil {
		return nil
	}
	return n.certs.DialConfig
}

// httpForwardTLS is the client TLS configuration for forwarding HTTP requests to
// other nodes' HTTP listeners, or nil when TLS is off.
func (n *Node) httpForwardTLS() *tls.Config {
	if n.certs == nil {
		return nil
	}
	return n.certs.ClientConfig()
}

// kafkaDialTimeout bounds a dial of this node's own Kafka clients, TLS
// handshake included (kgo's default dial timeout).
const kafkaDialTimeout = 10 * time.Second

// kafkaClientOpts are the options this node's own Kafka clients (the replica
// fetchers) need to reach other brokers' Kafka listeners: TLS, reading large
// Fetch responses ahead (protocol.TLSDialer), SASL with the inter-broker
// credential, and the source address (--kafka-source-host).
func (n *Node) kafkaClientOpts() []kgo.Opt {
	opts := n.interBrokerOpts()
	d := net.Dialer{Timeout: kafkaDialTimeout}
	if n.cfg.KafkaSourceHost != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(n.cfg.KafkaSourceHost)}
	}
	switch {
	case n.certs != nil:
		opts = append(opts, kgo.Dialer(protocol.TLSDialer(n.certs.ClientConfig(), d)))
	case d.LocalAddr != nil:
		opts = append(opts, kgo.Dialer(d.DialContext))
	}
	return opts
}

// security builds the Kafka listener's SASL setup (nil when SASL is off) and
// the HTTP listener's guard (nil when neither SASL nor an authorizer is on), over
// one authenticator: the same users, tokens and ACLs on both front doors.
func (n *Node) security() (*protocol.SASLConfig, *httpauth.Guard, error) {
	mechs, _ := n.cfg.SASLMechanismList() // validated by config.Validate
	authz := n.authorizerFunc()
	if len(mechs) == 0 {
		if authz == nil {
			return nil, nil, nil
		}
		return nil, n.httpGuard(httpauth.Config{Authorizer: authz}), nil
	}
	authn := sasl.NewAuthenticator(n.scramCredential)
	if key := n.cfg.DelegationTokenSecretKey; key != "" {
		authn.WithDelegationTokens(key, n.delegationToken)
	}
	guardCfg := httpauth.Config{Authorizer: authz, BasicWithoutTLS: n.cfg.SASLPlainWithoutTLS}
	if slices.ContainsFunc(mechs, func(m sasl.Mechanism) bool { return m != sasl.OAuthBearer }) {
		guardCfg.Basic, guardCfg.Lookup = authn, n.scramCredential
	}
	if n.cfg.DelegationTokenSecretKey != "" && slices.ContainsFunc(mechs, func(m sasl.Mechanism) bool { return slices.Contains(sasl.ScramMechanisms, m) }) {
		// A token authenticates HTTP requests where it logs in on the Kafka
		// listener: with a SCRAM mechanism on.
		guardCfg.Token = authn.VerifyToken
	}
	if slices.Contains(mechs, sasl.OAuthBearer) {
		v, err := sasl.NewOAuthValidator(sasl.OAuthConfig{JWKS: n.cfg.OAuthJWKS, Issuer: n.cfg.OAuthIssuer,
			Audience: n.cfg.OAuthAudience, PrincipalClaim: n.cfg.OAuthPrincipalClaim})
		if err != nil {
			return nil, nil, err
		}
		authn.WithOAuthBearer(v)
		guardCfg.Bearer = v
	}
	if n.cfg.InterBrokerSASL == "" {
		n.log.Warn("SASL is on without --inter-broker-sasl: this node's own Kafka clients cannot log in, so replica fetches from other brokers, the HTTP API's calls to other brokers and share groups fail; set --inter-broker-sasl 'SCRAM-SHA-512=[name=broker,password=...]'")
	}
	if slices.Contains(mechs, sasl.Plain) && n.certs == nil {
		n.log.Warn("SASL PLAIN is enabled without TLS: passwords travel in the clear (--sasl-plain-without-tls)")
	}
	audit := n.auditLog()
	return &protocol.SASLConfig{
		Mechanisms:      mechs,
		Authenticator:   authn,
		SessionLifetime: n.cfg.SASLSessionLifetime,
		OnAuthenticate: func(c *protocol.ConnInfo, mech sasl.Mechanism, user string, reauth bool, err error) {
			result := "success"
			if err != nil {
				result = "failure"
			}
			n.metrics.OnAuthentication(string(mech), err == nil)
			audit.Info("authentication", "event", "authentication", "result", result, "listener", "kafka", "mechanism", string(mech),
				"user", user, "reauthentication", reauth, "remote", c.RemoteAddr.String(), "conn", c.ID)
		},
	}, n.httpGuard(guardCfg), nil
}

// httpGuard completes cfg with the node's audit log and metrics.
func (n *Node) httpGuard(cfg httpauth.Config) *httpauth.Guard {
	cfg.Audit, cfg.OnAuthentication = n.auditLog(), n.metrics.OnHTTPAuthentication
	cfg.Principals = n.principals
	return httpauth.New(cfg)
}

// auditLog is the logger of audit lines: every one carries audit=true, so a log
// pipeline can route them with one stable attribute.
func (n *Node) auditLog() *slog.Logger {
	return n.log.With("component", "audit", "audit", true)
}

// metricsRule is the access rule of /metrics: open unless --metrics-auth.
func (n *Node) metricsRule() httpauth.Rule {
	if n.cfg.MetricsAuth {
		return httpauth.Needs(httpauth.OnCluster(kmsg.ACLOperationDescribe))
	}
	return httpauth.Open()
}

// scramCredential looks a user's credential up in the latest metadata image.
func (n *Node) scramCredential(user string, mech sasl.Mechanism) (sasl.Credential, bool) {
	m, ok := scramMechanismOf(mech)
	if !ok {
		return sasl.Credential{}, false
	}
	c, ok := n.ctrl.Image().ScramCredential(user, m)
	if !ok {
		return sasl.Credential{}, false
	}
	return sasl.Credential{Mechanism: mech, Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}, true
}

// delegationToken looks a delegation token up in the latest metadata image.
func (n *Node) delegationToken(id string) (sasl.Token, bool) {
	t, ok := n.ctrl.Image().DelegationToken(id)
	if !ok {
		return sasl.Token{}, false
	}
	return sasl.Token{Owner: t.Owner, Expiry: time.UnixMilli(t.ExpiryTimestamp)}, true
}

func scramMechanismOf(m sasl.Mechanism) (metadata.ScramMechanism, bool) {
	switch m {
	case sasl.ScramSHA256:
		return metadata.ScramSHA256, true
	case sasl.ScramSHA512:
		return metadata.ScramSHA512, true
	}
	return 0, false
}

// addScramCredentials creates the --add-scram and --inter-broker-sasl
// credentials that do not exist yet, retrying until the controller takes them.
func (n *Node) addScramCredentials(ctx context.Context) error {
	specs := slices.Clone(n.cfg.AddScram)
	if n.cfg.InterBrokerSASL != "" {
		specs = append(specs, n.cfg.InterBrokerSASL)
	}
	for _, s := range specs {
		spec, err := sasl.ParseScramSpec(s) // validated by config.Validate
		if err != nil {
			return err
		}
		if err := n.retry(ctx, "adding SCRAM credential", func() error { return n.addScram(ctx, spec) }); err != nil {
			return err
		}
	}
	return nil
}

// addScram creates one credential unless the user has one for the mechanism, as
// an AlterUserScramCredentials upsertion sent to the active controller (salted
// here; the password does not travel).
func (n *Node) addScram(ctx context.Context, spec sasl.ScramSpec) error {
	mech, _ := scramMechanismOf(spec.Mechanism)
	if _, ok := n.ctrl.Image().ScramCredential(spec.Name, mech); ok {
		return nil
	}
	salt, salted, err := sasl.SaltPassword(spec.Mechanism, spec.Password, spec.Iterations)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = spec.Name, int8(mech), spec.Iterations, salt, salted
	req.Upsertions = append(req.Upsertions, up)
	resp, err := n.toController.Request(ctx, req)
	if err != nil {
		return err
	}
	for _, r := range resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return err
		}
	}
	n.auditLog().Info("SCRAM credential created", "event", "user_change", "user", spec.Name, "mechanism", string(spec.Mechanism), "by", "--add-scram")
	return nil
}

// interBrokerOpts authenticate this node's replica fetchers when SASL is on.
func (n *Node) interBrokerOpts() []kgo.Opt {
	if n.cfg.InterBrokerSASL == "" {
		return nil
	}
	spec, err := sasl.ParseScramSpec(n.cfg.InterBrokerSASL)
	if err != nil {
		return nil // validated by config.Validate
	}
	a := scram.Auth{User: spec.Name, Pass: spec.Password}
	if spec.Mechanism == sasl.ScramSHA512 {
		return []kgo.Opt{kgo.SASL(a.AsSha512Mechanism())}
	}
	return []kgo.Opt{kgo.SASL(a.AsSha256Mechanism())}
}

// authorizerFunc returns the handlers' authorizer source with --authorizer acl,
// else nil. The Authorizer is rebuilt when the metadata image changes; the
// inter-broker user is a super user (replica fetches need CLUSTER_ACTION).
func (n *Node) authorizerFunc() func() *acl.Authorizer {
	if n.cfg.Authorizer != "acl" {
		return nil
	}
	cfg := acl.Config{SuperUsers: n.cfg.SuperUserList(), AllowEveryoneIfNoACL: n.cfg.AllowEveryoneIfNoACL}
	if n.cfg.InterBrokerSASL != "" {
		if spec, err := sasl.ParseScramSpec(n.cfg.InterBrokerSASL); err == nil {
			cfg.SuperUsers = append(cfg.SuperUsers, "User:"+spec.Name)
		}
	}
	type built struct {
		img *metadata.Image
		a   *acl.Authorizer
	}
	var cache atomic.Pointer[built]
	return func() *acl.Authorizer {
		img := n.ctrl.Image()
		if b := cache.Load(); b != nil && b.img == img {
			return b.a
		}
		b := &built{img: img, a: acl.New(cfg, img.ACLs())}
		cache.Store(b)
		return b.a
	}
}

// writeGuardError answers a refused /metrics request in plain text.
func writeGuardError(w http.ResponseWriter, _ *http.Request, status int, code, message string) {
	http.Error(w, code+": "+message, status)
}
