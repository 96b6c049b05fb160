// Command tokencompare sends the same delegation-token requests
// (CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken,
// DescribeDelegationToken, and a SCRAM login with a token) to a broker and
// prints each answer's error code and the fields that matter, one line per
// step, so that a Kafka broker's and Strata's answers can be compared with
// diff. The expected values of Strata's token tests were taken from its run
// against Kafka 4.4.0 (interop/README.md, "Delegation tokens against Kafka").
//
// The broker must listen with SASL SCRAM-SHA-512 (users admin, a super user,
// alice and bob, each with password <name>-secret), an ACL authorizer and a
// delegation token secret key, and have a PLAINTEXT listener too:
//
//	go run ./interop/cmd/tokencompare -sasl 127.0.0.1:9192 -plaintext 127.0.0.1:9191
package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func main() {
	saslAddr := flag.String("sasl", "", "the broker's SASL_PLAINTEXT address")
	plainAddr := flag.String("plaintext", "", "the broker's PLAINTEXT address")
	disabled := flag.Bool("disabled", false, "the broker has no token secret key: send each request once (-plaintext unused)")
	flag.Parse()
	if *disabled && *saslAddr != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := runDisabled(ctx, *saslAddr); err != nil {
			fmt.Fprintln(os.Stderr, "tokencompare:", err)
			os.Exit(1)
		}
		return
	}
	if *saslAddr == "" || *plainAddr == "" {
		fmt.Fprintln(os.Stderr, "tokencompare: -sasl and -plaintext are required")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, *saslAddr, *plainAddr); err != nil {
		fmt.Fprintln(os.Stderr, "tokencompare:", err)
		os.Exit(1)
	}
}

func client(addr string, a *scram.Auth) *kgo.Client {
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0)}
	if a != nil {
		opts = append(opts, kgo.SASL(a.AsSha512Mechanism()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		panic(err)
	}
	return cl
}

func user(name string) *scram.Auth { return &scram.Auth{User: name, Pass: name + "-secret"} }

func code(c int16) string {
	if c == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(c).(*kerr.Error).Message
}

type step struct {
	ctx context.Context
	n   int
}

func (s *step) print(name, format string, args ...any) {
	s.n++
	fmt.Printf("%02d %-44s %s\n", s.n, name, fmt.Sprintf(format, args...))
}

func create(ctx context.Context, cl *kgo.Client, ownerType, ownerName *string, maxLifetime int64, renewers ...[2]string) (*kmsg.CreateDelegationTokenResponse, error) {
	r := kmsg.NewPtrCreateDelegationTokenRequest()
	r.OwnerPrincipalType, r.OwnerPrincipalName, r.MaxLifetimeMillis = ownerType, ownerName, maxLifetime
	for _, rn := range renewers {
		x := kmsg.NewCreateDelegationTokenRequestRenewer()
		x.PrincipalType, x.PrincipalName = rn[0], rn[1]
		r.Renewers = append(r.Renewers, x)
	}
	return r.RequestWith(ctx, cl)
}

func renew(ctx context.Context, cl *kgo.Client, hmac []byte, period int64) (*kmsg.RenewDelegationTokenResponse, error) {
	r := kmsg.NewPtrRenewDelegationTokenRequest()
	r.HMAC, r.RenewTimeMillis = hmac, period
	return r.RequestWith(ctx, cl)
}

func expire(ctx context.Context, cl *kgo.Client, hmac []byte, period int64) (*kmsg.ExpireDelegationTokenResponse, error) {
	r := kmsg.NewPtrExpireDelegationTokenRequest()
	r.HMAC, r.ExpiryPeriodMillis = hmac, period
	return r.RequestWith(ctx, cl)
}

func describe(ctx context.Context, cl *kgo.Client, owners ...string) (*kmsg.DescribeDelegationTokenResponse, error) {
	r := kmsg.NewPtrDescribeDelegationTokenRequest()
	if owners != nil {
		r.Owners = []kmsg.DescribeDelegationTokenRequestOwner{}
		for i := 0; i+1 < len(owners); i += 2 {
			o := kmsg.NewDescribeDelegationTokenRequestOwner()
			o.PrincipalType, o.PrincipalName = owners[i], owners[i+1]
			r.Owners = append(r.Owners, o)
		}
	}
	return r.RequestWith(ctx, cl)
}

func str(s string) *string { return &s }

// createdLine is what a CreateDelegationToken answer says, times relative to
// its issue time.
func createdLine(r *kmsg.CreateDelegationTokenResponse) string {
	return fmt.Sprintf("%s owner=%s:%s requester=%s:%s issue=%s expiry-issue=%d max-issue=%d id=%t hmac=%d",
		code(r.ErrorCode), r.PrincipalType, r.PrincipalName, r.TokenRequesterPrincipalType, r.TokenRequesterPrincipalName,
		sign(r.IssueTimestamp), r.ExpiryTimestamp-r.IssueTimestamp, r.MaxTimestamp-r.IssueTimestamp, r.TokenID != "", len(r.HMAC))
}

func sign(v int64) string {
	switch {
	case v > 0:
		return "+"
	case v < 0:
		return fmt.Sprint(v)
	}
	return "0"
}

// describedLine lists the tokens of this run a DescribeDelegationToken
// answer lists, in the order of their names (earlier runs' are left out).
func describedLine(r *kmsg.DescribeDelegationTokenResponse, ids map[string]string) string {
	s := code(r.ErrorCode)
	details := slices.Clone(r.TokenDetails)
	slices.SortFunc(details, func(a, b kmsg.DescribeDelegationTokenResponseTokenDetail) int {
		return strings.Compare(ids[a.TokenID], ids[b.TokenID])
	})
	for _, d := range details {
		name := ids[d.TokenID]
		if name == "" {
			continue
		}
		s += fmt.Sprintf(" [%s owner=%s:%s requester=%s:%s renewers=%d hmac=%d]", name, d.PrincipalType, d.PrincipalName,
			d.TokenRequesterPrincipalType, d.TokenRequesterPrincipalName, len(d.Renewers), len(d.HMAC))
	}
	return s
}

func run(ctx context.Context, saslAddr, plainAddr string) error {
	admin, alice, bob := client(saslAddr, user("admin")), client(saslAddr, user("alice")), client(saslAddr, user("bob"))
	anon := client(plainAddr, nil)
	defer func() { admin.Close(); alice.Close(); bob.Close(); anon.Close() }()
	s := &step{ctx: ctx}
	ids := map[string]string{}
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}

	// Versions.
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, alice)
	must(err)
	for _, k := range av.ApiKeys {
		if k.ApiKey >= 38 && k.ApiKey <= 41 {
			s.print("ApiVersions "+kmsg.NameForKey(k.ApiKey), "v%d-v%d", k.MinVersion, k.MaxVersion)
		}
	}

	// PLAINTEXT: no token requests.
	c, err := create(ctx, anon, nil, nil, -1)
	must(err)
	s.print("plaintext create", "%s", createdLine(c))
	rn, err := renew(ctx, anon, []byte("x"), -1)
	must(err)
	s.print("plaintext renew", "%s expiry=%d", code(rn.ErrorCode), rn.ExpiryTimestamp)
	ex, err := expire(ctx, anon, []byte("x"), -1)
	must(err)
	s.print("plaintext expire", "%s expiry=%d", code(ex.ErrorCode), ex.ExpiryTimestamp)
	d, err := describe(ctx, anon)
	must(err)
	s.print("plaintext describe", "%s", describedLine(d, ids))

	// Creation.
	a1, err := create(ctx, alice, nil, nil, -1, [2]string{"User", "bob"})
	must(err)
	ids[a1.TokenID] = "a1"
	s.print("alice create, renewer bob", "%s", createdLine(a1))
	a2, err := create(ctx, alice, str("User"), str("alice"), 3600_000)
	must(err)
	ids[a2.TokenID] = "a2"
	s.print("alice create owner alice, max 1h", "%s", createdLine(a2))
	c, err = create(ctx, alice, nil, nil, -1, [2]string{"Group", "ops"})
	must(err)
	s.print("alice create, renewer Group:ops", "%s", createdLine(c))
	c, err = create(ctx, bob, str("User"), str("carol"), -1)
	must(err)
	s.print("bob create owner carol", "%s", createdLine(c))
	c, err = create(ctx, bob, nil, str("carol"), -1)
	must(err)
	s.print("bob create owner null-type carol", "%s", createdLine(c))
	c1, err := create(ctx, admin, str("User"), str("carol"), -1)
	must(err)
	ids[c1.TokenID] = "c1"
	s.print("admin create owner carol", "%s", createdLine(c1))
	c, err = create(ctx, alice, str("User"), str(""), -1)
	must(err)
	if c.TokenID != "" {
		ids[c.TokenID] = "a3"
	}
	s.print("alice create owner empty name", "%s", createdLine(c))

	// Kafka's controller and brokers know a token only once its record is
	// published on the node, shortly after the answer: wait for all four.
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := describe(ctx, admin)
		must(err)
		seen := 0
		for _, t := range d.TokenDetails {
			if ids[t.TokenID] != "" {
				seen++
			}
		}
		if seen == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %d created tokens are not all described after 30s: %s", len(ids), describedLine(d, ids))
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Renewals.
	rn, err = renew(ctx, bob, a1.HMAC, -1)
	must(err)
	s.print("bob (renewer) renews a1", "%s expiry-issue>24h:%t", code(rn.ErrorCode), rn.ExpiryTimestamp-a1.IssueTimestamp > 24*3600_000)
	rn, err = renew(ctx, bob, a2.HMAC, -1)
	must(err)
	s.print("bob renews a2", "%s expiry=%d", code(rn.ErrorCode), rn.ExpiryTimestamp)
	rn, err = renew(ctx, alice, []byte("not-a-token"), -1)
	must(err)
	s.print("alice renews an unknown hmac", "%s expiry=%d", code(rn.ErrorCode), rn.ExpiryTimestamp)
	rn, err = renew(ctx, admin, a2.HMAC, -1)
	must(err)
	s.print("admin (super user) renews a2", "%s expiry=%s", code(rn.ErrorCode), sign(rn.ExpiryTimestamp))
	rn, err = renew(ctx, alice, a2.HMAC, 24*3600_000)
	must(err)
	s.print("alice renews a2 for a day", "%s expiry=max:%t", code(rn.ErrorCode), rn.ExpiryTimestamp == a2.MaxTimestamp)

	// Descriptions.
	for _, who := range []struct {
		name string
		cl   *kgo.Client
		own  []string
	}{
		{"alice", alice, nil}, {"bob", bob, nil}, {"admin", admin, nil},
		{"admin owners=[]", admin, []string{}}, {"admin owners=[User:carol]", admin, []string{"User", "carol"}},
		{"admin owners=[User:bob]", admin, []string{"User", "bob"}},
	} {
		d, err := describe(ctx, who.cl, who.own...)
		must(err)
		s.print("describe as "+who.name, "%s", describedLine(d, ids))
	}

	// A token login.
	tok := client(saslAddr, &scram.Auth{User: a1.TokenID, Pass: b64(a1.HMAC), IsToken: true})
	defer tok.Close()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, tok)
	s.print("token login: metadata", "err=%v brokers=%d", err, len(mdBrokers(md)))
	c, err = create(ctx, tok, nil, nil, -1)
	must(err)
	s.print("token session create", "%s", createdLine(c))
	rn, err = renew(ctx, tok, a1.HMAC, -1)
	must(err)
	s.print("token session renew", "%s expiry=%d", code(rn.ErrorCode), rn.ExpiryTimestamp)
	ex, err = expire(ctx, tok, a1.HMAC, 1)
	must(err)
	s.print("token session expire", "%s expiry=%d", code(ex.ErrorCode), ex.ExpiryTimestamp)
	d, err = describe(ctx, tok)
	must(err)
	s.print("token session describe", "%s", describedLine(d, ids))
	bad := client(saslAddr, &scram.Auth{User: a1.TokenID, Pass: b64([]byte("wrong")), IsToken: true})
	defer bad.Close()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, bad)
	s.print("token login with a wrong hmac", "err=%v", errName(err))

	// Expiries.
	ex, err = expire(ctx, bob, a2.HMAC, -1)
	must(err)
	s.print("bob expires a2", "%s expiry=%d", code(ex.ErrorCode), ex.ExpiryTimestamp)
	ex, err = expire(ctx, alice, []byte("not-a-token"), -1)
	must(err)
	s.print("alice expires an unknown hmac", "%s expiry=%d", code(ex.ErrorCode), ex.ExpiryTimestamp)
	ex, err = expire(ctx, alice, a2.HMAC, 1500)
	must(err)
	s.print("alice expires a2 in 1.5s", "%s", code(ex.ErrorCode))
	time.Sleep(2500 * time.Millisecond) // the token's own expiry must pass; nothing to poll for
	rn, err = renew(ctx, alice, a2.HMAC, -1)
	must(err)
	s.print("alice renews a2 after its expiry", "%s expiry=%d", code(rn.ErrorCode), rn.ExpiryTimestamp)
	ex, err = expire(ctx, alice, a2.HMAC, 1000)
	must(err)
	s.print("alice expires a2 later after its expiry", "%s expiry=%d", code(ex.ErrorCode), ex.ExpiryTimestamp)
	ex, err = expire(ctx, bob, a1.HMAC, -1)
	must(err)
	s.print("bob (renewer) expires a1 now", "%s expiry=%s", code(ex.ErrorCode), sign(ex.ExpiryTimestamp))
	ex, err = expire(ctx, alice, a1.HMAC, -1)
	must(err)
	s.print("alice expires a1 again", "%s expiry=%d", code(ex.ErrorCode), ex.ExpiryTimestamp)
	after := client(saslAddr, &scram.Auth{User: a1.TokenID, Pass: b64(a1.HMAC), IsToken: true})
	defer after.Close()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, after)
	s.print("token login after its expiry", "err=%v", errName(err))
	d, err = describe(ctx, admin)
	must(err)
	s.print("describe as admin at the end", "%s", describedLine(d, ids))
	return nil
}

// runDisabled sends each token request once to a broker without a token
// secret key, and logs in with a made-up token.
func runDisabled(ctx context.Context, saslAddr string) error {
	alice := client(saslAddr, user("alice"))
	defer alice.Close()
	s := &step{ctx: ctx}
	c, err := create(ctx, alice, nil, nil, -1)
	if err != nil {
		return err
	}
	s.print("disabled: create", "%s", createdLine(c))
	rn, err := renew(ctx, alice, []byte("x"), -1)
	if err != nil {
		return err
	}
	s.print("disabled: renew", "%s expiry=%d", code(rn.ErrorCode), rn.ExpiryTimestamp)
	ex, err := expire(ctx, alice, []byte("x"), -1)
	if err != nil {
		return err
	}
	s.print("disabled: expire", "%s expiry=%d", code(ex.ErrorCode), ex.ExpiryTimestamp)
	d, err := describe(ctx, alice)
	if err != nil {
		return err
	}
	s.print("disabled: describe", "%s tokens=%d", code(d.ErrorCode), len(d.TokenDetails))
	tok := client(saslAddr, &scram.Auth{User: "some-token", Pass: b64([]byte("x")), IsToken: true})
	defer tok.Close()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, tok)
	s.print("disabled: token login", "err=%v", errName(err))
	return nil
}

func mdBrokers(md *kmsg.MetadataResponse) []kmsg.MetadataResponseBroker {
	if md == nil {
		return nil
	}
	return md.Brokers
}

func errName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	if err == nil {
		return "nil"
	}
	return "other"
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
