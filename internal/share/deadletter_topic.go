package share

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/metadata"
)

// TopicDeadLetters is the DeadLetterWriter on a Kafka client: an acks=all produce
// to the chosen partition, and CreateTopics for a missing topic.
type TopicDeadLetters struct{ cl *kgo.Client }

// NewTopicDeadLetters returns a writer through a client on seeds with opts (the
// node's own listener and credentials).
func NewTopicDeadLetters(seeds []string, opts ...kgo.Opt) (*TopicDeadLetters, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("strata-share-dlq"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
	}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &TopicDeadLetters{cl: cl}, nil
}

// Close closes the writer's client.
func (w *TopicDeadLetters) Close() { w.cl.Close() }

// Produce implements DeadLetterWriter.
func (w *TopicDeadLetters) Produce(ctx context.Context, topic string, partition int32, recs []DeadLetterRecord) error {
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		kr := &kgo.Record{Topic: topic, Partition: partition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		krs[i] = kr
	}
	return w.cl.ProduceSync(ctx, krs...).FirstErr()
}

// CreateTopic implements DeadLetterWriter: the broker's default partition count
// and replication factor, records stamped with their write time (CreateTime).
func (w *TopicDeadLetters) CreateTopic(ctx context.Context, topic string) error {
	enable, createTime := "true", "CreateTime"
	_, err := kadm.NewClient(w.cl).CreateTopic(ctx, -1, -1, map[string]*string{
		metadata.TopicDeadLetterGroupEnable: &enable,
		"message.timestamp.type":            &createTime,
	}, topic)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return nil
	}
	return err
}
