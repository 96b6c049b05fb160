package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/bench"
)

// TestPreEncodedProduce: the pre-encoded producer's records all reach the
// partition (a reader finds exactly as many as it counted, at both acks), its
// requests are counted with the others, and a refused request fails the run.
func TestPreEncodedProduce(t *testing.T) {
	ctx, seeds := fakeBroker(t, "pre", 1)
	total := int64(0)
	for _, acks := range []string{bench.AcksLeader, bench.AcksAll} {
		before := produceWrites.writes.Load()
		res, err := preEncodedProduce(ctx, bench.Config{Brokers: seeds, Topic: "pre", RecordSize: 100, Acks: acks, Duration: 200 * time.Millisecond})
		if err != nil {
			t.Fatalf("acks=%s: %v", acks, err)
		}
		requests := produceWrites.writes.Load() - before
		_, perRequest, _ := preEncodedFrame("pre", 1, 100, -1)
		if res.Records == 0 || res.Records != requests*int64(perRequest) || res.Bytes != res.Records*100 || res.RecordsPerSec <= 0 {
			t.Fatalf("acks=%s: %+v after %d requests of %d records", acks, res, requests, perRequest)
		}
		total += res.Records
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("pre"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	read := int64(0)
	for read < total {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		read += int64(fs.NumRecords())
	}
	if read != total {
		t.Fatalf("read %d records, produced %d", read, total)
	}

	_, err = preEncodedProduce(ctx, bench.Config{Brokers: seeds, Topic: "missing", RecordSize: 100, Acks: bench.AcksAll, Duration: time.Second})
	if err == nil || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("producing to a missing topic: %v", err)
	}
}

// TestPreEncodedProducePartitions: every request carries the batch to each
// partition, and each partition holds what its share of the count says.
func TestPreEncodedProducePartitions(t *testing.T) {
	ctx, seeds := fakeBroker(t, "pre4", 4)
	res, err := preEncodedProduce(ctx, bench.Config{Brokers: seeds, Topic: "pre4", Partitions: 4, RecordSize: 1024, Acks: bench.AcksAll, Duration: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, perRequest, _ := preEncodedFrame("pre4", 1, 1024, -1)
	if res.Partitions != 4 || res.Records == 0 || res.Records%int64(4*perRequest) != 0 {
		t.Fatalf("%+v: not whole requests of 4 batches of %d records", res, perRequest)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "pre4")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(4) {
		o, ok := ends.Lookup("pre4", p)
		if !ok || o.Err != nil || o.Offset != res.Records/4 {
			t.Errorf("partition %d ends at %+v, want %d", p, o, res.Records/4)
		}
	}
}

// fakeBroker starts a one-broker kfake cluster holding topic with partitions
// partitions, for the test's life, and a context bounding the test.
func fakeBroker(t *testing.T, topic string, partitions int32) (context.Context, []string) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx, c.ListenAddrs()
}
