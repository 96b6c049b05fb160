package main

// strata token create|describe|renew|expire: delegation tokens (KIP-48),
// through CreateDelegationToken, DescribeDelegationToken, RenewDelegationToken
// and ExpireDelegationToken (what kafka-delegation-tokens does). The brokers
// need --delegation-token-secret-key, and the caller a login with SASL (not
// with a token) or a TLS client certificate.

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/cli"
)

// TokenHMACEnv names the environment variable renew and expire read the
// token's HMAC from when --hmac is not given (a flag shows in the process
// list, and the HMAC is the token's password).
const TokenHMACEnv = "STRATA_TOKEN_HMAC"

func tokenCmd() *cobra.Command { return newTokenCmd(processEnv()) }

func newTokenCmd(env *clientEnv) *cobra.Command {
	g := &globalFlags{}
	cmd := newParentCmd(env, g, "token", "Create, describe, renew and expire delegation tokens")
	cmd.AddCommand(tokenCreateCmd(env, g), tokenDescribeCmd(env, g), tokenRenewCmd(env, g), tokenExpireCmd(env, g))
	return cmd
}

// tokenJSON is a token as --output json prints it; times are Unix
// milliseconds, as Kafka's API carries them.
type tokenJSON struct {
	TokenID         string   `json:"token_id"`
	HMAC            string   `json:"hmac,omitempty"` // create only: the password, base64
	Owner           string   `json:"owner"`
	Requester       string   `json:"requester"`
	Renewers        []string `json:"renewers"`
	IssueTimestamp  int64    `json:"issue_timestamp"`
	ExpiryTimestamp int64    `json:"expiry_timestamp"`
	MaxTimestamp    int64    `json:"max_timestamp"`
}

func newTokenJSON(t kadm.DelegationToken, withHMAC bool) tokenJSON {
	out := tokenJSON{
		TokenID: t.TokenID, Owner: principalString(t.Owner), Requester: principalString(t.TokenRequesterPrincipal),
		Renewers:       []string{},
		IssueTimestamp: t.IssueTimestamp.UnixMilli(), ExpiryTimestamp: t.ExpiryTimestamp.UnixMilli(), MaxTimestamp: t.MaxTimestamp.UnixMilli(),
	}
	if withHMAC {
		out.HMAC = base64.StdEncoding.EncodeToString(t.HMAC)
	}
	for _, r := range t.Renewers {
		out.Renewers = append(out.Renewers, principalString(r))
	}
	return out
}

// printTokens prints tokens as a table or as JSON; created is create's one
// token, printed with its HMAC (as one JSON object).
func printTokens(s *session, tokens []tokenJSON, created bool) error {
	if s.json() {
		if created {
			return cli.WriteJSON(s.env.stdout, tokens[0])
		}
		return cli.WriteJSON(s.env.stdout, tokens)
	}
	header := []string{"TOKEN", "OWNER", "REQUESTER", "RENEWERS", "ISSUED", "EXPIRES", "MAX"}
	if created {
		header = slices.Insert(header, 1, "HMAC")
	}
	tw := cli.NewTable(s.env.stdout, header...)
	for _, t := range tokens {
		renewers := strings.Join(t.Renewers, ",")
		if renewers == "" {
			renewers = "-"
		}
		row := []any{t.TokenID, t.Owner, t.Requester, renewers, tokenTime(t.IssueTimestamp), tokenTime(t.ExpiryTimestamp), tokenTime(t.MaxTimestamp)}
		if created {
			row = slices.Insert(row, 1, any(t.HMAC))
		}
		tw.Row(row...)
	}
	return tw.Flush()
}

func tokenTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

// parsePrincipal reads "User:alice", or "alice" as User:alice.
func parsePrincipal(flag, s string) (kadm.Principal, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok {
		typ, name = "User", s
	}
	if typ == "" || name == "" {
		return kadm.Principal{}, cli.Usagef("%s %q: want a principal such as User:alice", flag, s)
	}
	return kadm.Principal{Type: typ, Name: name}, nil
}

// parsePrincipals is parsePrincipal of each of a repeated flag's values.
func parsePrincipals(flag string, ss []string) ([]kadm.Principal, error) {
	var out []kadm.Principal
	for _, s := range ss {
		p, err := parsePrincipal(flag, s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func principalString(p kadm.Principal) string { return cmp.Or(p.Type, "User") + ":" + p.Name }

// tokenHints say what to do about the token APIs' refusals.
var tokenHints = map[*kerr.Error]string{
	kerr.DelegationTokenAuthDisabled:        "the brokers were started without --delegation-token-secret-key",
	kerr.DelegationTokenRequestNotAllowed:   "token requests need a login with SASL or a TLS client certificate, and not with a delegation token",
	kerr.DelegationTokenOwnerMismatch:       "only the token's owner and its renewers may renew or expire it",
	kerr.DelegationTokenNotFound:            "no token has this HMAC: mistyped, expired at once, or removed after its expiry",
	kerr.DelegationTokenExpired:             "the token is past its expiry; only a new token logs in",
	kerr.DelegationTokenAuthorizationFailed: "a token for another owner needs CREATE_TOKENS on that user",
	kerr.InvalidPrincipalType:               "renewers must be User principals",
}

// tokenError says what failed, with a hint for the token APIs' errors.
func tokenError(what string, err error) error {
	for e, hint := range tokenHints {
		if errors.Is(err, e) {
			return fmt.Errorf("%s: %w (%s)", what, err, hint)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// durationMs checks a period flag: 0 (not given) is sent as Kafka's -1 (the
// brokers' default for create and renew, at once for expire); a period
// shorter than the API's millisecond is refused.
func durationMs(flag string, d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return -time.Millisecond, nil
	case d < time.Millisecond:
		return 0, cli.Usagef("%s must be at least 1ms, got %s", flag, d)
	}
	return d, nil
}

func tokenCreateCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var (
		owner       string
		renewers    []string
		maxLifetime time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a delegation token and print its id and HMAC (shown only now)",
		Example: "  strata token create --renewer User:spark\n" +
			"  strata token create --owner User:etl --max-lifetime 48h -o json",
		Args:              usageArgs(env, cobra.NoArgs),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringVar(&owner, "owner", "", "the principal the token authenticates as (default: the caller; another owner needs CREATE_TOKENS on that user)")
	cmd.Flags().StringArrayVar(&renewers, "renewer", nil, "a principal that may renew and expire the token besides its owner, User:NAME (repeatable)")
	cmd.Flags().DurationVar(&maxLifetime, "max-lifetime", 0, "the token's longest life, renewals included (default: the brokers' --delegation-token-max-lifetime, which also bounds it)")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		req := kadm.CreateDelegationToken{}
		var err error
		if req.MaxLifetime, err = durationMs("--max-lifetime", maxLifetime); err != nil {
			return err
		}
		if owner != "" {
			p, err := parsePrincipal("--owner", owner)
			if err != nil {
				return err
			}
			req.Owner = &p
		}
		if req.Renewers, err = parsePrincipals("--renewer", renewers); err != nil {
			return err
		}
		var tok kadm.DelegationToken
		if err := s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) (err error) {
			tok, err = adm.CreateDelegationToken(ctx, req)
			return err
		}); err != nil {
			return tokenError("create token", err)
		}
		if !s.json() {
			fmt.Fprintln(s.env.stderr, "the HMAC is the token's password: keep it now, no command shows it again")
		}
		return printTokens(s, []tokenJSON{newTokenJSON(tok, true)}, true)
	})
	return cmd
}

func tokenDescribeCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var owners []string
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Describe the delegation tokens the caller owns, renews or may describe (never their HMACs)",
		Example: "  strata token describe\n" +
			"  strata token describe --owner User:alice -o json",
		Args:              usageArgs(env, cobra.NoArgs),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringArrayVar(&owners, "owner", nil, "only the tokens this principal owns or renews (repeatable; default: all the caller may see)")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		filter, err := parsePrincipals("--owner", owners)
		if err != nil {
			return err
		}
		var described kadm.DelegationTokens
		if err := s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) (err error) {
			described, err = adm.DescribeDelegationTokens(ctx, filter...)
			return err
		}); err != nil {
			return tokenError("describe tokens", err)
		}
		out := []tokenJSON{}
		for _, t := range described {
			out = append(out, newTokenJSON(t, false))
		}
		slices.SortFunc(out, func(a, b tokenJSON) int {
			return cmp.Or(cmp.Compare(a.IssueTimestamp, b.IssueTimestamp), strings.Compare(a.TokenID, b.TokenID))
		})
		return printTokens(s, out, false)
	})
	return cmd
}

// tokenHMAC is the HMAC renew and expire name the token by: --hmac, else
// $STRATA_TOKEN_HMAC, in the base64 create printed.
func tokenHMAC(env *clientEnv, flag string) ([]byte, error) {
	if flag == "" {
		flag = env.getenv(TokenHMACEnv)
	}
	if flag == "" {
		return nil, cli.Usagef("no token: give --hmac or set %s", TokenHMACEnv)
	}
	mac, err := base64.StdEncoding.DecodeString(flag)
	if err != nil {
		return nil, cli.Usagef("--hmac: not base64 (give the HMAC as create printed it): %v", err)
	}
	return mac, nil
}

type tokenExpiryJSON struct {
	ExpiryTimestamp int64 `json:"expiry_timestamp"`
}

// tokenChange is renew or expire: both name a token by its HMAC, take a
// period and answer its new expiry.
type tokenChange struct {
	use, short, example, periodHelp string
	// change is the kadm method: (*kadm.Client).RenewDelegationToken or
	// ExpireDelegationToken.
	change func(adm *kadm.Client, ctx context.Context, mac []byte, period time.Duration) (time.Time, error)
	// done says what happened; period is as given (0: not given).
	done func(period time.Duration, expiry time.Time) string
}

func tokenRenewCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	return tokenChangeCmd(env, g, tokenChange{
		use: "renew", short: "Move a delegation token's expiry later (its owner or a renewer)",
		example:    "  STRATA_TOKEN_HMAC=... strata token renew --period 12h",
		periodHelp: "expire this long from now (default and longest: the brokers' --delegation-token-expiry-time; never past the token's maximum lifetime)",
		change:     (*kadm.Client).RenewDelegationToken,
		done: func(_ time.Duration, expiry time.Time) string {
			return "renewed: the token expires at " + tokenTime(expiry.UnixMilli())
		},
	})
}

func tokenExpireCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	return tokenChangeCmd(env, g, tokenChange{
		use: "expire", short: "Expire a delegation token now, or after --period (its owner or a renewer)",
		example:    "  STRATA_TOKEN_HMAC=... strata token expire\n  STRATA_TOKEN_HMAC=... strata token expire --period 1h",
		periodHelp: "expire this long from now, never past the token's maximum lifetime (default: now, and the token is removed)",
		change:     (*kadm.Client).ExpireDelegationToken,
		done: func(period time.Duration, expiry time.Time) string {
			if period == 0 {
				return "expired: the token is removed and no longer logs in"
			}
			return "the token now expires at " + tokenTime(expiry.UnixMilli())
		},
	})
}

func tokenChangeCmd(env *clientEnv, g *globalFlags, tc tokenChange) *cobra.Command {
	var (
		hmac   string
		period time.Duration
	)
	cmd := &cobra.Command{
		Use:               tc.use,
		Short:             tc.short,
		Example:           tc.example,
		Args:              usageArgs(env, cobra.NoArgs),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringVar(&hmac, "hmac", "", "the token's HMAC, base64 (env "+TokenHMACEnv+", which keeps it out of the process list)")
	cmd.Flags().DurationVar(&period, "period", 0, tc.periodHelp)
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		mac, err := tokenHMAC(env, hmac)
		if err != nil {
			return err
		}
		d, err := durationMs("--period", period)
		if err != nil {
			return err
		}
		var expiry time.Time
		if err := s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) (err error) {
			expiry, err = tc.change(adm, ctx, mac, d)
			return err
		}); err != nil {
			return tokenError(tc.use+" token", err)
		}
		if s.json() {
			return cli.WriteJSON(s.env.stdout, tokenExpiryJSON{expiry.UnixMilli()})
		}
		fmt.Fprintln(s.env.stdout, tc.done(period, expiry))
		return nil
	})
	return cmd
}
