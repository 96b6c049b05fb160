package controller

import (
	"context"
	"testing"
)

// BenchmarkAllocateProducerIDs measures one planned proposal end to end on a
// single voter: plan, Raft append (one WAL fsync), apply, publish.
func BenchmarkAllocateProducerIDs(b *testing.B) {
	cfg := singleConfig(b.TempDir())
	c, err := Start(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	epoch, err := c.RegisterBroker(ctx, RegisterBroker{ID: 1, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := c.AllocateProducerIDs(ctx, 1, epoch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBrokerHeartbeat measures a heartbeat that changes nothing (the
// common case) on a single voter: session update, plan semaphore, no proposal.
func BenchmarkBrokerHeartbeat(b *testing.B) {
	c, err := Start(singleConfig(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	epoch, err := c.RegisterBroker(ctx, RegisterBroker{ID: 1, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		b.Fatal(err)
	}
	req := HeartbeatRequest{BrokerID: 1, BrokerEpoch: epoch, MetadataOffset: int64(c.Image().Offset())}
	for b.Loop() {
		if res, err := c.BrokerHeartbeat(ctx, req); err != nil || res.Fenced {
			b.Fatal(res, err)
		}
	}
}
