// Command strata is the Strata event-streaming platform: the server and its client tools
// in one binary.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The root, and through it the commands that do not handle flag errors themselves
	// (server, dev), report usage errors as the client commands do: exit status 2
	// and where to find help.
	env := processEnv()
	root := &cobra.Command{
		Use:                        "strata",
		Short:                      "Strata: a Kafka-compatible event-streaming platform",
		SilenceUsage:               true,
		SilenceErrors:              true,
		Args:                       cobra.ArbitraryArgs,
		RunE:                       unknownSubcommand(env),
		SuggestionsMinimumDistance: 2,
	}
	root.SetFlagErrorFunc(flagError(env))
	root.AddCommand(serverCmd())
	root.AddCommand(topicCmd())
	root.AddCommand(produceCmd())
	root.AddCommand(consumeCmd())
	root.AddCommand(groupCmd())
	root.AddCommand(txnCmd())
	root.AddCommand(clusterCmd())
	root.AddCommand(userCmd())
	root.AddCommand(aclCmd())
	root.AddCommand(tokenCmd())
	root.AddCommand(benchCmd())
	root.AddCommand(devCmd())
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "strata:", err)
		os.Exit(1)
	}
}
