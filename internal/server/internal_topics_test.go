package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/share"
	"github.com/strata-stream/strata/internal/wait"
)

// TestMetadataAutoCreatesShareStateTopic: a Metadata request naming
// __share_group_state with auto-creation creates it as the share coordinator
// does (share.coordinator.state.topic.num.partitions, its configs), not with
// the broker's defaults, which left the coordinator hashing keys over more
// partitions than the topic had.
func TestMetadataAutoCreatesShareStateTopic(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.DefaultPartitions, cfg.ShareStatePartitions = 1, 3
	n := startNode(t, cfg)
	cl, adm := n.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(share.StateTopic)}}
	req.AllowAutoTopicCreation = true
	if _, err := req.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	var partitions int
	wait.Eventually(t, 30*time.Second, "the state topic to be created", func() error {
		td, err := adm.ListTopics(ctx, share.StateTopic)
		if err != nil {
			return err
		}
		partitions = len(td[share.StateTopic].Partitions)
		return td[share.StateTopic].Err
	})
	if partitions != 3 {
		t.Errorf("%d partitions, want 3", partitions)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, share.StateTopic)
	if err != nil {
		t.Fatal(err)
	}
	rcfg, err := rc.On(share.StateTopic, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rcfg.Configs {
		got[c.Key] = c.MaybeValue()
	}
	_, want := share.StateTopicSettings(1)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s %q, want %q", k, got[k], v)
		}
	}
}
