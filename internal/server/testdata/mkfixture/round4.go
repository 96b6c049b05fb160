package main

// The item added for the fourth fixture: a KIP-848 consumer group, whose
// records __consumer_offsets holds since session 19.

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerMember is one member of kip848-g as its heartbeats left it.
type consumerMember struct {
	id    string
	epoch int32
	owned []int32 // partitions of clicks
}

// consumerGroup has members cg-a and cg-b of kip848-g (subscribed to clicks)
// heartbeat until each owns one of its two partitions at one group epoch,
// and prints them.
func consumerGroup(ctx context.Context, admin *kgo.Client) error {
	meta := kmsg.NewPtrMetadataRequest()
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("clicks")}}
	resp, err := meta.RequestWith(ctx, admin)
	if err != nil {
		return err
	}
	clicks := resp.Topics[0].TopicID
	a, b := &consumerMember{id: "cg-a"}, &consumerMember{id: "cg-b"}
	if err := until(ctx, "kip848-g's partitions to settle", func() error {
		for _, m := range []*consumerMember{a, b} {
			if err := consumerHeartbeat(ctx, admin, clicks, m); err != nil {
				return err
			}
		}
		if len(a.owned) != 1 || len(b.owned) != 1 || a.epoch != b.epoch {
			return fmt.Errorf("cg-a at %d owns %v, cg-b at %d owns %v", a.epoch, a.owned, b.epoch, b.owned)
		}
		return nil
	}); err != nil {
		return err
	}
	fmt.Printf("kip848-g: cg-a at %d owns clicks %v, cg-b at %d owns clicks %v\n", a.epoch, a.owned, b.epoch, b.owned)
	return nil
}

// consumerHeartbeat sends m's ConsumerGroupHeartbeat v1: a join at epoch 0
// (no partitions owned), else its epoch and the partitions it owns.
func consumerHeartbeat(ctx context.Context, admin *kgo.Client, clicks [16]byte, m *consumerMember) error {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.SetVersion(1)
	req.Group, req.MemberID, req.MemberEpoch = "kip848-g", m.id, m.epoch
	req.RebalanceTimeoutMillis = -1
	if m.epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{"clicks"}
	}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if m.epoch != 0 {
		owned := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		owned.TopicID, owned.Partitions = clicks, slices.Clone(m.owned)
		req.Topics = append(req.Topics, owned)
	}
	r, err := req.RequestWith(ctx, admin)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return fmt.Errorf("%s at epoch %d: %w", m.id, m.epoch, err)
	}
	m.epoch = r.MemberEpoch
	if r.Assignment != nil {
		m.owned = nil
		for _, t := range r.Assignment.Topics {
			m.owned = append(m.owned, t.Partitions...)
		}
		slices.Sort(m.owned)
	}
	return nil
}
