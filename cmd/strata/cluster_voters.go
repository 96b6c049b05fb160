package main

// strata cluster add-controller|remove-controller NODE: runtime changes of the
// controller voters, through AddRaftVoter and RemoveRaftVoter (KIP-853).
// add-controller asks again while the node is refused as not caught up
// ("lagging behind"), until --timeout, so a node just started is added once
// it has heartbeated; Kafka's kafka-metadata-quorum asks once. Both name the
// node by its voter key, the directory id read from DescribeQuorum;
// add-controller also names the node's controller listener, given with
// --controller-addr, as Kafka's tool takes it from the new controller's
// config: DescribeQuorum lists no observer's endpoint.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/admin"
	"github.com/strata-stream/strata/internal/cli"
)

// catchUpRetry is how often add-controller asks again while the node is
// refused as not caught up yet (admin.AddVoterLagging): a node just started
// heartbeats within a second or two.
const catchUpRetry = 500 * time.Millisecond

type voterChangeJSON struct {
	Node  int32 `json:"node"`
	Voter bool  `json:"voter"`
}

func clusterAddControllerCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	return voterChangeCmd(env, g, "add-controller NODE",
		"Make a running broker-only node a controller voter",
		"  strata cluster add-controller 4 --controller-addr 127.0.0.14:9093", true)
}

func clusterRemoveControllerCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	return voterChangeCmd(env, g, "remove-controller NODE",
		"Take a node out of the controller voters (the active controller steps down once it is out)",
		"  strata cluster remove-controller 3", false)
}

func voterChangeCmd(env *clientEnv, g *globalFlags, use, short, example string, add bool) *cobra.Command {
	cmd := &cobra.Command{
		Use:               use,
		Short:             short,
		Example:           example,
		Args:              usageArgs(env, cobra.ExactArgs(1)),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	var controllerAddr string
	if add {
		cmd.Flags().StringVar(&controllerAddr, "controller-addr", "",
			"the node's controller listener as the quorum reaches it, host:port: its --advertised-controller-addr, or its --controller-addr (required)")
	}
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, args []string) error {
		id, err := strconv.ParseInt(args[0], 10, 32)
		if err != nil || id < 0 {
			return cli.Usagef("node %q: want a node id", args[0])
		}
		if add && controllerAddr == "" {
			return cli.Usagef("add-controller needs --controller-addr: the node's controller listener, host:port")
		}
		ctx, cancel := s.withTimeout(ctx)
		defer cancel()
		cl, _, err := s.admin(ctx)
		if err != nil {
			return err
		}
		defer cl.Close()
		var code int16
		var msg *string
		if add {
			req, err := admin.AddVoterRequest(ctx, cl, int32(id), controllerAddr)
			if err != nil {
				return err
			}
			req.TimeoutMillis = 30000
			send := func(ctx context.Context) (*kmsg.AddRaftVoterResponse, error) { return req.RequestWith(ctx, cl) }
			resp, err := admin.AddVoterWhenCaughtUp(ctx, catchUpRetry, send, func(msg string) {
				fmt.Fprintf(s.env.stderr, "add-controller: %s; trying again until --timeout\n", msg)
			})
			if err != nil {
				return err
			}
			code, msg = resp.ErrorCode, resp.ErrorMessage
		} else {
			req, err := admin.RemoveVoterRequest(ctx, cl, int32(id))
			if err != nil {
				return err
			}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			code, msg = resp.ErrorCode, resp.ErrorMessage
		}
		if err := kerr.ErrorForCode(code); err != nil {
			m := ""
			if msg != nil {
				m = *msg
			}
			return brokerError(fmt.Sprintf("node %d", id), err, m)
		}
		if s.json() {
			return cli.WriteJSON(s.env.stdout, voterChangeJSON{Node: int32(id), Voter: add})
		}
		if add {
			fmt.Fprintf(s.env.stdout, "node %d is a controller voter\n", id)
		} else {
			fmt.Fprintf(s.env.stdout, "node %d is no longer a controller voter\n", id)
		}
		return nil
	})
	return cmd
}
