package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// primeTimeout bounds creating a topic and getting its first record acknowledged.
const primeTimeout = 2 * time.Minute

// prime creates the topic (one partition, rf replicas) and waits until one record
// is acknowledged by all in-sync replicas, so that a timed run measures the steady
// state, not how long a new partition takes to get its leader and followers going
// (seconds for a replicated topic on a loaded machine, for both brokers).
func prime(ctx context.Context, seeds []string, topic string, rf int16, opts ...kgo.Opt) error {
	return primePartitions(ctx, seeds, topic, 1, rf, opts...)
}

// primePartitions is prime for a topic of several partitions: one record is
// acknowledged on each. opts (TLS) are added to the client's.
func primePartitions(ctx context.Context, seeds []string, topic string, partitions int32, rf int16, opts ...kgo.Opt) error {
	ctx, cancel := context.WithTimeout(ctx, primeTimeout)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("strata-vs-kafka-prime"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, rf, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	records := make([]*kgo.Record, partitions)
	for i := range records {
		records[i] = &kgo.Record{Partition: int32(i), Value: []byte("prime")}
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return fmt.Errorf("priming %s: %w", topic, err)
	}
	return nil
}
