package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ensureTopic creates the topic unless it exists and waits until every partition
// has a leader; it returns the partition ids.
func ensureTopic(ctx context.Context, c *Config) ([]int32, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOpts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, c.Partitions, c.ReplicationFactor, CreateConfigs(c.TopicConfigs), c.Topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return nil, fmt.Errorf("creating topic %q: %w", c.Topic, err)
	}

	deadline := time.Now().Add(c.drainTimeout())
	for {
		ids, err := leadedPartitions(ctx, adm, c.Topic)
		if err == nil {
			return ids, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("topic %q: %w", c.Topic, err)
		}
		if !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			return nil, ctx.Err()
		}
	}
}

// leadedPartitions lists the topic's partitions, or fails while one has no leader.
func leadedPartitions(ctx context.Context, adm *kadm.Client, topic string) ([]int32, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	switch {
	case !ok:
		return nil, errors.New("not in the metadata")
	case td.Err != nil:
		return nil, td.Err
	case len(td.Partitions) == 0:
		return nil, errors.New("no partitions")
	}
	ids := make([]int32, 0, len(td.Partitions))
	for _, p := range td.Partitions.Sorted() {
		if p.Err != nil || p.Leader < 0 {
			return nil, fmt.Errorf("partition %d has no leader (%v)", p.Partition, p.Err)
		}
		ids = append(ids, p.Partition)
	}
	return ids, nil
}

// listOffsets returns the start and end offsets of every listed partition. Right
// after a topic is created a broker may not know it yet, so failures are retried
// for up to DrainTimeout.
func listOffsets(ctx context.Context, c *Config, partitions []int32) (start, end map[int32]int64, err error) {
	deadline := time.Now().Add(c.drainTimeout())
	for {
		start, end, err = listOffsetsOnce(ctx, c, partitions)
		if err == nil || time.Now().After(deadline) {
			return start, end, err
		}
		if !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			return nil, nil, err
		}
	}
}

func listOffsetsOnce(ctx context.Context, c *Config, partitions []int32) (start, end map[int32]int64, err error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOpts...)...)
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, c.Topic)
	if err != nil {
		return nil, nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, c.Topic)
	if err != nil {
		return nil, nil, err
	}
	start, end = map[int32]int64{}, map[int32]int64{}
	for _, p := range partitions {
		s, ok1 := starts.Lookup(c.Topic, p)
		e, ok2 := ends.Lookup(c.Topic, p)
		switch {
		case !ok1 || !ok2:
			return nil, nil, fmt.Errorf("topic %q partition %d: no offsets listed", c.Topic, p)
		case s.Err != nil:
			return nil, nil, fmt.Errorf("topic %q partition %d: %w", c.Topic, p, s.Err)
		case e.Err != nil:
			return nil, nil, fmt.Errorf("topic %q partition %d: %w", c.Topic, p, e.Err)
		}
		start[p], end[p] = s.Offset, e.Offset
	}
	return start, end, nil
}

// CreateConfigs is topic configs as CreateTopics takes them (nil for none).
func CreateConfigs(topicConfigs map[string]string) map[string]*string {
	if len(topicConfigs) == 0 {
		return nil
	}
	configs := make(map[string]*string, len(topicConfigs))
	for k, v := range topicConfigs {
		configs[k] = &v
	}
	return configs
}
