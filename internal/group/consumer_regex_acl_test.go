package group

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerRegexResolvesDescribableTopics: a subscription pattern resolves
// to the topics the heartbeating member may DESCRIBE only, as Kafka's
// TopicRegexResolver filters them; the member was assigned every topic the
// pattern matched, those it may not see included.
func TestConsumerRegexResolvesDescribableTopics(t *testing.T) {
	topics := newFakeTopics()
	topics.set("orders", 1)
	topics.set("orders-secret", 1)
	clock := &testClock{now: time.UnixMilli(1_700_000_000_000)}
	cfg := DefaultConfig()
	cfg.Topics, cfg.Now, cfg.GroupInitialRebalanceDelay = topics, clock.Now, 0
	store := newMemStore()
	c := New(cfg, store, nil)
	defer c.Close()
	if err := loadAll(context.Background(), c, store); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = "g", "m1", joinEpoch
	req.SubscribedTopicRegex = ptr("orders.*")
	req.RebalanceTimeoutMillis, req.Topics = 60000, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	ctx := WithClient(context.Background(), Client{ID: "c", DescribeTopic: func(topic string) bool { return topic != "orders-secret" }})
	resp := c.ConsumerGroupHeartbeat(ctx, req)
	if resp.ErrorCode != 0 || resp.Assignment == nil {
		t.Fatalf("heartbeat: error %d, assignment %v", resp.ErrorCode, resp.Assignment)
	}
	var got []string
	for _, at := range resp.Assignment.Topics {
		if name, _ := topics.TopicName(at.TopicID); name != "" {
			got = append(got, name)
		}
	}
	if len(got) != 1 || got[0] != "orders" {
		t.Fatalf("assigned topics %q, want only orders", got)
	}
}
