package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/loglevels"
	"github.com/strata-stream/strata/internal/server"
)

func serverCmd() *cobra.Command {
	cfg := config.Default()
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a Strata node (broker and controller); no flags needed for a local single node",
		Args:  cobra.NoArgs,
	}
	configPath := cfg.Bind(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := cfg.Resolve(cmd.Flags(), *configPath, os.Getenv); err != nil {
			return fmt.Errorf("configuration: %w", err)
		}
		logger, err := newLogger(cfg)
		if err != nil {
			return err
		}
		return server.Run(cmd.Context(), cfg, logger)
	}
	return cmd
}

func newLogger(cfg config.Config) (*slog.Logger, error) {
	level, err := cfg.SlogLevel()
	if err != nil {
		return nil, err
	}
	// The levels filter (kafka-configs --entity-type broker-loggers changes
	// them); the handler below them takes every level.
	levels := loglevels.New(level)
	opts := &slog.HandlerOptions{Level: loglevels.Trace}
	if cfg.LogFormat == "json" {
		return slog.New(levels.Handler(slog.NewJSONHandler(os.Stderr, opts))), nil
	}
	return slog.New(levels.Handler(slog.NewTextHandler(os.Stderr, opts))), nil
}
