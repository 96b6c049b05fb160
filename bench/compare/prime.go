package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/bench"
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
	return primeWithin(ctx, primeTimeout, seeds, topic, partitions, rf, nil, opts...)
}

// primeTopic is primePartitions for a run's topic, created with its
// TopicConfigs, which the brokers must then report (a broker that dropped a
// compression.type would leave its row measuring the producer's codec).
func primeTopic(ctx context.Context, c bench.Config, opts ...kgo.Opt) error {
	return primeWithin(ctx, primeTimeout, c.Brokers, c.Topic, c.Partitions, c.ReplicationFactor, c.TopicConfigs, opts...)
}

// primeWithin is primePartitions bounded by bound instead of primeTimeout, the
// topic created with configs.
func primeWithin(ctx context.Context, bound time.Duration, seeds []string, topic string, partitions int32, rf int16, configs map[string]string, opts ...kgo.Opt) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("strata-vs-kafka-prime"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// Bounded by ctx instead: a leader may still be applying the topic.
		kgo.UnknownTopicRetries(-1)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, rf, bench.CreateConfigs(configs), topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	// Kafka's brokers apply a new topic one after another, and a client
	// that meets UNKNOWN_TOPIC_OR_PARTITION more than a few times fails
	// its records: wait until every broker answers for every partition
	// (session 9's three-node Kafka failed here with 1,000 partitions).
	if err := waitLeaders(ctx, cl, topic, partitions); err != nil {
		return fmt.Errorf("priming %s: %w", topic, err)
	}
	if err := checkConfigs(ctx, adm, topic, configs); err != nil {
		return err
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

// checkConfigs fails unless the topic's configuration holds every one of want.
func checkConfigs(ctx context.Context, adm *kadm.Client, topic string, want map[string]string) error {
	if len(want) == 0 {
		return nil
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return fmt.Errorf("describing %s: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return fmt.Errorf("describing %s: %w", topic, err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("%s: %s is %q, want %q", topic, k, got[k], v)
		}
	}
	return nil
}

// waitLeaders waits until each broker cl knows of, asked on its own, shows a
// leader for every one of topic's partitions partitions.
func waitLeaders(ctx context.Context, cl *kgo.Client, topic string, partitions int32) error {
	everywhere := func() error {
		// Asked through the client first: it learns the brokers then.
		if led, err := countPartitions(ctx, cl, topic, leaded); err != nil || led != int(partitions) {
			return fmt.Errorf("%d of %d partitions with a leader (%v)", led, partitions, err)
		}
		for i, b := range cl.DiscoveredBrokers() {
			if led, err := countPartitions(ctx, b, topic, leaded); err != nil || led != int(partitions) {
				return fmt.Errorf("the %d. broker asked: %d of %d partitions with a leader (%v)", i+1, led, partitions, err)
			}
		}
		return nil
	}
	for {
		err := everywhere()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for leaders: %w (last: %v)", ctx.Err(), err)
		}
		time.Sleep(20 * time.Millisecond) // polling other processes' state
	}
}
