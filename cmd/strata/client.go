package main

// Plumbing shared by the client command groups (topic, produce, consume, group,
// cluster): the process environment, the global flags, and the wrapper that turns a
// command's error into the documented exit status.

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/term"

	"github.com/strata-stream/strata/internal/cli"
)

// clientEnv is the outside world of the client commands: the process's streams in
// main, buffers in tests.
type clientEnv struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	stdinTerminal, stdoutTerminal, stderrTerminal bool

	// exit, when set, ends the process with status 2 on a usage error: main.go exits 1
	// on any error it gets back, so a usage error has to leave before. Tests leave it
	// nil and read the status with cli.ExitCode.
	exit func(code int)
}

// processEnv is the environment of the running process.
func processEnv() *clientEnv {
	return &clientEnv{
		stdin:          os.Stdin,
		stdout:         os.Stdout,
		stderr:         os.Stderr,
		getenv:         os.Getenv,
		stdinTerminal:  term.IsTerminal(int(os.Stdin.Fd())),
		stdoutTerminal: term.IsTerminal(int(os.Stdout.Fd())),
		stderrTerminal: term.IsTerminal(int(os.Stderr.Fd())),
		exit:           os.Exit,
	}
}

// finish passes err on, except that a usage error ends the process with status 2
// when the environment can exit (see clientEnv.exit).
func (e *clientEnv) finish(cmd *cobra.Command, err error) error {
	if err == nil || cli.ExitCode(err) != 2 || e.exit == nil {
		return err
	}
	fmt.Fprintf(e.stderr, "strata: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
	e.exit(2)
	return err
}

// globalFlags are on every client command.
type globalFlags struct {
	brokers string
	output  string
	timeout time.Duration
	tls     cli.TLSFlags
	sasl    cli.SASLFlags
}

const defaultTimeout = 30 * time.Second

func (g *globalFlags) bind(fs *pflag.FlagSet, env *clientEnv) {
	brokers := env.getenv(cli.BrokersEnv)
	if brokers == "" {
		brokers = cli.DefaultBrokers
	}
	fs.StringVar(&g.brokers, "brokers", brokers, "comma-separated seed brokers, host:port (env "+cli.BrokersEnv+")")
	fs.StringVarP(&g.output, "output", "o", "table", "output format: table or json")
	fs.BoolVar(&g.tls.On, "tls", false, "connect with TLS, trusting the system roots (implied by the other --tls-* flags)")
	fs.StringVar(&g.tls.CAFile, "tls-ca-file", "", "PEM CAs that signed the brokers' certificates")
	fs.StringVar(&g.tls.CertFile, "tls-cert-file", "", "PEM client certificate, for brokers that require one (mTLS)")
	fs.StringVar(&g.tls.KeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&g.sasl.Mechanism, "sasl-mechanism", "", "authenticate with SASL: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN")
	fs.StringVar(&g.sasl.User, "sasl-user", "", "SASL user name")
	fs.StringVar(&g.sasl.Password, "sasl-password", "", "SASL password (env "+cli.SASLPasswordEnv+", which keeps it out of the process list)")
	fs.BoolVar(&g.sasl.Token, "sasl-token", false, "log in with a delegation token: --sasl-user is the token id, the password its HMAC (SCRAM only)")
	fs.DurationVar(&g.timeout, "timeout", defaultTimeout, "how long to wait for the brokers: the whole operation (topic, group, cluster), each record's delivery (produce), the start-up lookups (consume)")
}

// completeValues offers a fixed list of values for a flag in shell completion.
func completeValues(cmd *cobra.Command, flag string, values ...string) {
	cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
}

// progressFlags are on the commands that do long work (produce, consume).
type progressFlags struct {
	mode     string
	interval time.Duration
}

func (p *progressFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.mode, "progress", "auto", "progress on stderr: auto (a bar on a terminal, plain lines otherwise, none with --output json), bar, lines or none")
	cmd.Flags().DurationVar(&p.interval, "progress-interval", cli.DefaultProgressInterval, "time between plain progress lines")
	completeValues(cmd, "progress", "auto", "bar", "lines", "none")
}

// setup says where progress goes; recordsOnStdout is set when the command prints
// one line per record on stdout.
func (p *progressFlags) setup(s *session, recordsOnStdout bool) (cli.ProgressSetup, error) {
	mode, err := cli.ParseProgressMode(p.mode)
	if err != nil {
		return cli.ProgressSetup{}, err
	}
	if p.interval <= 0 {
		return cli.ProgressSetup{}, cli.Usagef("--progress-interval must be positive, got %s", p.interval)
	}
	return cli.ProgressSetup{
		Mode: mode, W: s.env.stderr, Terminal: s.env.stderrTerminal,
		StdoutTerminal: s.env.stdoutTerminal && recordsOnStdout,
		JSON:           s.json(), Interval: p.interval,
	}, nil
}

// session is a client command's validated global settings.
type session struct {
	env    *clientEnv
	opts   cli.Options
	format cli.Format
}

func (g *globalFlags) session(env *clientEnv) (*session, error) {
	brokers, err := cli.ParseBrokers(g.brokers)
	if err != nil {
		return nil, err
	}
	format, err := cli.ParseFormat(g.output)
	if err != nil {
		return nil, err
	}
	if g.timeout <= 0 {
		return nil, cli.Usagef("--timeout must be positive, got %s", g.timeout)
	}
	tlsConfig, err := g.tls.Config()
	if err != nil {
		return nil, err
	}
	if g.sasl.Password == "" {
		g.sasl.Password = env.getenv(cli.SASLPasswordEnv)
	}
	saslOpt, err := g.sasl.Opt()
	if err != nil {
		return nil, err
	}
	return &session{env: env, opts: cli.Options{Brokers: brokers, Timeout: g.timeout, TLS: tlsConfig, SASL: saslOpt}, format: format}, nil
}

func (s *session) json() bool { return s.format == cli.FormatJSON }

// admin connects and returns an admin client; close the kgo client when done.
func (s *session) admin(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, *kadm.Client, error) {
	cl, err := cli.Connect(ctx, s.opts, extra...)
	if err != nil {
		return nil, nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(min(s.opts.Timeout, time.Hour).Milliseconds()))
	return cl, adm, nil
}

// runFunc is the body of a client command.
type runFunc func(ctx context.Context, s *session, cmd *cobra.Command, args []string) error

// clientRun makes cmd a client command: it gets the global flags (unless its group
// command has them already) and runs run with a validated session.
func clientRun(env *clientEnv, g *globalFlags, run runFunc) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		s, err := g.session(env)
		if err != nil {
			return env.finish(cmd, err)
		}
		err = run(cmd.Context(), s, cmd, args)
		return env.finish(cmd, cli.Explain(err, s.opts))
	}
}

// usageArgs wraps a cobra argument check so its complaint is a usage error.
func usageArgs(env *clientEnv, check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		return env.finish(cmd, cli.Usage(check(cmd, args)))
	}
}

// newParentCmd is a command grouping subcommands (topic, group, cluster), carrying the
// global flags and the usage-error handling for all of them.
func newParentCmd(env *clientEnv, g *globalFlags, use, short string) *cobra.Command {
	cmd := &cobra.Command{
		Use:                        use,
		Short:                      short,
		SuggestionsMinimumDistance: 2,
		RunE:                       unknownSubcommand(env),
	}
	g.bind(cmd.PersistentFlags(), env)
	completeValues(cmd, "output", "table", "json")
	cmd.SetFlagErrorFunc(flagError(env))
	return cmd
}

// unknownSubcommand is the body of a command that only groups subcommands: its help
// when called alone, else a usage error naming the unknown subcommand and the
// nearest known ones.
func unknownSubcommand(env *clientEnv) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return env.finish(cmd, cli.Usagef("%s", msg))
	}
}

// flagError makes a flag that does not parse a usage error (exit status 2).
func flagError(env *clientEnv) func(*cobra.Command, error) error {
	return func(c *cobra.Command, err error) error {
		return env.finish(c, cli.Usage(err))
	}
}

// newLeafCmd is a client command directly under the root (produce, consume).
func newLeafCmd(env *clientEnv, g *globalFlags, cmd *cobra.Command, run runFunc) *cobra.Command {
	g.bind(cmd.Flags(), env)
	completeValues(cmd, "output", "table", "json")
	cmd.RunE = clientRun(env, g, run)
	cmd.SetFlagErrorFunc(flagError(env))
	return cmd
}

// withTimeout bounds an admin operation by --timeout.
func (s *session) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.Timeout)
}

// withAdmin connects an admin client and runs op with it, the whole bounded by
// --timeout.
func (s *session) withAdmin(ctx context.Context, op func(context.Context, *kadm.Client) error) error {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	cl, adm, err := s.admin(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	return op(ctx, adm)
}

// completeTopics completes topic names from the brokers named on the command line.
func completeTopics(env *clientEnv, g *globalFlags) cobra.CompletionFunc {
	return completeFrom(env, g, func(ctx context.Context, adm *kadm.Client) ([]string, error) {
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return nil, err
		}
		return topics.Names(), nil
	})
}

// completeGroups completes consumer group names.
func completeGroups(env *clientEnv, g *globalFlags) cobra.CompletionFunc {
	return completeFrom(env, g, func(ctx context.Context, adm *kadm.Client) ([]string, error) {
		groups, err := adm.ListGroups(ctx)
		if err != nil {
			return nil, err
		}
		return groups.Groups(), nil
	})
}

// completionTimeout keeps a shell responsive when no broker answers.
const completionTimeout = 2 * time.Second

func completeFrom(env *clientEnv, g *globalFlags, list func(context.Context, *kadm.Client) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		s, err := g.session(env)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		s.opts.Timeout = min(s.opts.Timeout, completionTimeout)
		ctx, cancel := s.withTimeout(context.Background())
		defer cancel()
		cl, adm, err := s.admin(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		defer cl.Close()
		names, err := list(ctx, adm)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
