package cli

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASLPasswordEnv names the environment variable the SASL password is read from
// when --sasl-password is not given (a flag shows in the process list).
const SASLPasswordEnv = "STRATA_SASL_PASSWORD"

// SASLFlags are the client commands' SASL settings.
type SASLFlags struct {
	Mechanism string // SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN; empty: no SASL
	User      string
	Password  string
	// Token logs in with a delegation token: User is the token id, Password
	// its HMAC in base64, sent with SCRAM's tokenauth=true extension.
	Token bool
}

// Opt returns the kgo option the flags ask for, or nil without SASL.
func (f SASLFlags) Opt() (kgo.Opt, error) {
	if f.Mechanism == "" {
		if f.User != "" || f.Token {
			return nil, Usagef("--sasl-user and --sasl-token need --sasl-mechanism")
		}
		return nil, nil
	}
	if f.User == "" {
		return nil, Usagef("--sasl-mechanism needs --sasl-user (and --sasl-password or $%s)", SASLPasswordEnv)
	}
	if f.Password == "" {
		return nil, Usagef("--sasl-mechanism needs --sasl-password or $%s", SASLPasswordEnv)
	}
	if f.Token && f.Mechanism != "SCRAM-SHA-256" && f.Mechanism != "SCRAM-SHA-512" {
		return nil, Usagef("--sasl-token needs a SCRAM --sasl-mechanism (delegation tokens log in with SCRAM), not %q", f.Mechanism)
	}
	switch f.Mechanism {
	case "SCRAM-SHA-256":
		return kgo.SASL(scram.Auth{User: f.User, Pass: f.Password, IsToken: f.Token}.AsSha256Mechanism()), nil
	case "SCRAM-SHA-512":
		return kgo.SASL(scram.Auth{User: f.User, Pass: f.Password, IsToken: f.Token}.AsSha512Mechanism()), nil
	case "PLAIN":
		return kgo.SASL(plain.Auth{User: f.User, Pass: f.Password}.AsMechanism()), nil
	}
	return nil, Usagef("--sasl-mechanism %q: want SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN", f.Mechanism)
}
