package main

// strata user create|delete|list: SCRAM users, through AlterUserScramCredentials
// and DescribeUserScramCredentials (what kafka-configs --entity-type users does).

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-stream/strata/internal/cli"
	"github.com/strata-stream/strata/internal/sasl"
)

// UserPasswordEnv names the environment variable `strata user create` reads the
// new password from when --password is not given.
const UserPasswordEnv = "STRATA_USER_PASSWORD"

func userCmd() *cobra.Command { return newUserCmd(processEnv()) }

func newUserCmd(env *clientEnv) *cobra.Command {
	g := &globalFlags{}
	cmd := newParentCmd(env, g, "user", "Create, list and delete SCRAM users")
	cmd.AddCommand(userCreateCmd(env, g), userListCmd(env, g), userDeleteCmd(env, g))
	return cmd
}

var scramMechanismNames = map[string]kadm.ScramMechanism{"SCRAM-SHA-256": kadm.ScramSha256, "SCRAM-SHA-512": kadm.ScramSha512}

func parseScramMechanism(name string) (kadm.ScramMechanism, error) {
	m, ok := scramMechanismNames[name]
	if !ok {
		return 0, cli.Usagef("--mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", name)
	}
	return m, nil
}

func userCreateCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var mechanism, password string
	var iterations int32
	cmd := &cobra.Command{
		Use:   "create USER",
		Short: "Create a SCRAM user, or set its password for one mechanism",
		Example: "  STRATA_USER_PASSWORD=alice-secret strata user create alice\n" +
			"  strata user create alice --mechanism SCRAM-SHA-256 --password alice-secret",
		Args:              usageArgs(env, cobra.ExactArgs(1)),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringVar(&mechanism, "mechanism", "SCRAM-SHA-512", "SCRAM-SHA-256 or SCRAM-SHA-512")
	cmd.Flags().StringVar(&password, "password", "", "the new password (env "+UserPasswordEnv+", which keeps it out of the process list)")
	cmd.Flags().Int32Var(&iterations, "iterations", sasl.DefaultIterations, fmt.Sprintf("SCRAM iterations (%d..%d)", sasl.MinIterations, sasl.MaxIterations))
	completeValues(cmd, "mechanism", "SCRAM-SHA-256", "SCRAM-SHA-512")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, args []string) error {
		mech, err := parseScramMechanism(mechanism)
		if err != nil {
			return err
		}
		if password == "" {
			password = env.getenv(UserPasswordEnv)
		}
		if password == "" {
			return cli.Usagef("no password: give --password or set %s", UserPasswordEnv)
		}
		if err := sasl.CheckIterations(iterations); err != nil {
			return cli.Usage(err)
		}
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: args[0], Mechanism: mech, Iterations: iterations, Password: password}})
			if err != nil {
				return err
			}
			if r := res[args[0]]; r.Err != nil {
				return brokerError(fmt.Sprintf("user %q", args[0]), r.Err, r.ErrMessage)
			}
			if s.json() {
				return cli.WriteJSON(s.env.stdout, userJSON{User: args[0], Credentials: []credentialJSON{{Mechanism: mechanism, Iterations: iterations}}})
			}
			fmt.Fprintf(s.env.stdout, "set %s credential for user %q\n", mechanism, args[0])
			return nil
		})
	})
	return cmd
}

type userJSON struct {
	User        string           `json:"user"`
	Credentials []credentialJSON `json:"credentials"`
}

type credentialJSON struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func userListCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "list",
		Short:             "List SCRAM users and their mechanisms (never passwords or keys)",
		Args:              usageArgs(env, cobra.NoArgs),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			described, err := adm.DescribeUserSCRAMs(ctx)
			if err != nil {
				return err
			}
			out := []userJSON{}
			for _, name := range slices.Sorted(maps.Keys(described)) {
				d := described[name]
				if d.Err != nil {
					return brokerError(fmt.Sprintf("user %q", name), d.Err, d.ErrMessage)
				}
				u := userJSON{User: name, Credentials: []credentialJSON{}}
				for _, c := range d.CredInfos {
					u.Credentials = append(u.Credentials, credentialJSON{Mechanism: c.Mechanism.String(), Iterations: c.Iterations})
				}
				out = append(out, u)
			}
			if s.json() {
				return cli.WriteJSON(s.env.stdout, out)
			}
			tw := cli.NewTable(s.env.stdout, "USER", "MECHANISM", "ITERATIONS")
			for _, u := range out {
				for _, c := range u.Credentials {
					tw.Row(u.User, c.Mechanism, c.Iterations)
				}
			}
			return tw.Flush()
		})
	})
	return cmd
}

func userDeleteCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	var mechanism string
	cmd := &cobra.Command{
		Use:               "delete USER",
		Short:             "Delete a SCRAM user's credentials (all of them, or one mechanism's)",
		Args:              usageArgs(env, cobra.ExactArgs(1)),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.Flags().StringVar(&mechanism, "mechanism", "", "delete only this mechanism's credential (default: all)")
	completeValues(cmd, "mechanism", "SCRAM-SHA-256", "SCRAM-SHA-512")
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, args []string) error {
		user := args[0]
		var mechs []kadm.ScramMechanism
		if mechanism != "" {
			m, err := parseScramMechanism(mechanism)
			if err != nil {
				return err
			}
			mechs = append(mechs, m)
		}
		return s.withAdmin(ctx, func(ctx context.Context, adm *kadm.Client) error {
			if len(mechs) == 0 {
				described, err := adm.DescribeUserSCRAMs(ctx, user)
				if err != nil {
					return err
				}
				d := described[user]
				if d.Err != nil {
					return brokerError(fmt.Sprintf("user %q", user), d.Err, d.ErrMessage)
				}
				for _, c := range d.CredInfos {
					mechs = append(mechs, c.Mechanism)
				}
			}
			// One request per mechanism: Kafka refuses a user named twice in one
			// request (DUPLICATE_RESOURCE), and so does Strata.
			for _, m := range mechs {
				res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: m}}, nil)
				if err != nil {
					return err
				}
				if r := res[user]; r.Err != nil {
					return brokerError(fmt.Sprintf("user %q (%s)", user, m), r.Err, r.ErrMessage)
				}
			}
			if s.json() {
				return cli.WriteJSON(s.env.stdout, map[string]any{"user": user, "deleted": len(mechs)})
			}
			fmt.Fprintf(s.env.stdout, "deleted %d credential(s) of user %q\n", len(mechs), user)
			return nil
		})
	})
	return cmd
}
