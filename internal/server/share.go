package server

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/share"
)

// startShares builds the node's share-partition leader (package share): the
// in-flight records of share groups on the partitions this node leads, persisted in
// __share_group_state through a client of the node's own Kafka listener.
func (n *Node) startShares(logger *slog.Logger) error {
	store, err := share.NewTopicStore([]string{n.kafkaLn.Addr().String()}, share.DefaultStateTopicPartitions)
	if err != nil {
		return err
	}
	n.shareStore = store
	dlq, err := share.NewTopicDeadLetters([]string{n.kafkaLn.Addr().String()}, n.kafkaClientOpts()...)
	if err != nil {
		return err
	}
	n.shareDLQ = dlq
	n.shares = share.NewManager(share.Config{Defaults: share.DefaultGroupConfig(), GroupConfig: n.shareGroupConfig, DeadLetters: dlq},
		store, sharePartitions{n}, logger)
	n.metrics.RegisterShares(n.shares)
	return nil
}

// shareGroupConfig is a share group's configuration: its group configs (metadata),
// else Kafka's defaults.
func (n *Node) shareGroupConfig(group string) share.GroupConfig {
	img := n.ctrl.Image()
	c := share.DefaultGroupConfig()
	c.AutoOffsetReset = img.GroupConfig(group, metadata.GroupShareAutoOffsetReset)
	if ms, err := strconv.Atoi(img.GroupConfig(group, metadata.GroupShareRecordLockDuration)); err == nil {
		c.LockDuration = time.Duration(ms) * time.Millisecond
	}
	if limit, err := strconv.Atoi(img.GroupConfig(group, metadata.GroupShareDeliveryCountLimit)); err == nil {
		c.DeliveryLimit = int16(limit)
	}
	c.DeadLetter.Topic = img.GroupConfig(group, metadata.GroupDeadLetterTopic)
	c.DeadLetter.CopyRecord, _ = strconv.ParseBool(img.GroupConfig(group, metadata.GroupDeadLetterCopyRecord))
	return c
}

// sharePartitions is what the share-partition leader reads: the metadata image and
// the local replicas.
type sharePartitions struct{ n *Node }

func (s sharePartitions) Image() *metadata.Image { return s.n.ctrl.Image() }

func (s sharePartitions) Partition(topic string, index int32) (*replica.Partition, error) {
	return s.n.replicas.Partition(topic, index)
}
