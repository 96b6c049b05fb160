package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/server"
	"github.com/strata-stream/strata/internal/vfs"
)

// TestDeliverySemantics runs the example against a real node and checks the claims
// it makes: commit-after-process duplicates and loses nothing, commit-before-process
// loses and duplicates nothing, and the idempotent consumer writes each order once.
func TestDeliverySemantics(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.KafkaAddr, cfg.HTTPAddr, cfg.ControllerAddr, cfg.AdvertisedKafkaAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.GroupInitialDelay = 0
	cfg.OffsetsTopicPartition = 3
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := server.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), vfs.Default)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	reports, err := runAll(ctx, []string{n.KafkaAddr()})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Report{}
	for _, r := range reports {
		t.Log(r)
		byName[r.Scenario] = r
	}
	if r := byName["at-least-once"]; r.Duplicates == 0 || r.Lost != 0 || r.Rows != orders {
		t.Errorf("at-least-once: want duplicates > 0 and nothing lost, got %v", r)
	}
	if r := byName["at-most-once"]; r.Lost == 0 || r.Duplicates != 0 {
		t.Errorf("at-most-once: want losses and no duplicates, got %v", r)
	}
	if r := byName["idempotent-consumer"]; r.Duplicates == 0 || r.Lost != 0 || r.Rows != orders {
		t.Errorf("idempotent consumer: want repeated deliveries but exactly %d rows, got %v", orders, r)
	}
}
