package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// TestOAuthBearer: a node validates OAUTHBEARER JWTs against a JWKS file; a
// valid token logs in as its subject, an expired one or one for another audience
// or one without iat is refused with SASL_AUTHENTICATION_FAILED.
func TestOAuthBearer(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	raw, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "idp-1", Algorithm: string(jose.ES256)}}})
	if err := os.WriteFile(jwks, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "idp-1"))
	if err != nil {
		t.Fatal(err)
	}
	token := func(aud string, exp time.Time, drop ...string) string {
		claims := map[string]any{"sub": "svc-orders", "iss": "https://idp", "aud": aud, "exp": exp.Unix(), "iat": time.Now().Unix()}
		for _, c := range drop {
			delete(claims, c)
		}
		tok, err := jwt.Signed(signer).Claims(claims).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	cfg := nodeConfig(t.TempDir())
	cfg.SASLMechanisms = "OAUTHBEARER"
	cfg.OAuthJWKS, cfg.OAuthIssuer, cfg.OAuthAudience = jwks, "https://idp", "strata"
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	login := func(tok string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.SASL(oauth.Auth{Token: tok}.AsMechanism()), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		_, err = kadm.NewClient(cl).ListTopics(ctx)
		return err
	}
	if err := login(token("strata", time.Now().Add(time.Hour))); err != nil {
		t.Fatalf("valid token: %v", err)
	}
	for name, tok := range map[string]string{
		"expired":        token("strata", time.Now().Add(-time.Hour)),
		"other audience": token("billing", time.Now().Add(time.Hour)),
		"no iat":         token("strata", time.Now().Add(time.Hour), "iat"),
	} {
		// Kafka's exchange: the error challenge, the client's %x01, and the
		// failure with the challenge as its message.
		if err := login(tok); !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), `{"status":"invalid_token"}`) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED with invalid_token", name, err)
		}
	}
}
