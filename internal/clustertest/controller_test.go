package clustertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/testcluster"
)

// topicView is what must survive a controller failover about one topic: its
// replica assignment and the configs set on it.
type topicView struct {
	Replicas [][]int32
	Configs  map[string]string
}

func (v topicView) String() string {
	keys := slices.Sorted(maps.Keys(v.Configs))
	var cfg []string
	for _, k := range keys {
		cfg = append(cfg, k+"="+v.Configs[k])
	}
	return fmt.Sprintf("replicas %v configs [%s]", v.Replicas, strings.Join(cfg, " "))
}

// viewFrom asks node n alone for topics' assignments (Metadata) and the configs
// set on them (DescribeConfigs, dynamic topic configs only).
func viewFrom(ctx context.Context, n *testcluster.Node, topics []string) (map[string]topicView, error) {
	md := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		md.Topics = append(md.Topics, rt)
	}
	resp, err := n.Request(ctx, md)
	if err != nil {
		return nil, err
	}
	views := map[string]topicView{}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, fmt.Errorf("node %d: topic %s: %w", n.ID, *t.Topic, err)
		}
		v := topicView{Replicas: make([][]int32, len(t.Partitions)), Configs: map[string]string{}}
		for _, p := range t.Partitions {
			if int(p.Partition) >= len(v.Replicas) {
				return nil, fmt.Errorf("node %d: %s has partition %d of %d", n.ID, *t.Topic, p.Partition, len(t.Partitions))
			}
			v.Replicas[p.Partition] = p.Replicas
		}
		views[*t.Topic] = v
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	for _, name := range topics {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, name
		dc.Resources = append(dc.Resources, r)
	}
	resp, err = n.Request(ctx, dc)
	if err != nil {
		return nil, err
	}
	for _, r := range resp.(*kmsg.DescribeConfigsResponse).Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, fmt.Errorf("node %d: configs of %s: %w", n.ID, r.ResourceName, err)
		}
		for _, c := range r.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
				views[r.ResourceName].Configs[c.Name] = *c.Value
			}
		}
	}
	return views, nil
}

// sameViews explains how got differs from want, or returns nil.
func sameViews(want, got map[string]topicView) error {
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			return fmt.Errorf("topic %s is missing", name)
		}
		if !slices.EqualFunc(w.Replicas, g.Replicas, slices.Equal[[]int32]) || !maps.Equal(w.Configs, g.Configs) {
			return fmt.Errorf("topic %s: %v, want %v", name, g, w)
		}
	}
	return nil
}

// TestControllerCrashKeepsMetadata: topics with configs set at creation and
// altered afterwards exist when the active controller is killed with SIGKILL.
// Another node becomes the active controller (DescribeCluster), every
// surviving node still knows every topic with its assignment and configs, a new
// topic can be created and written, and the old controller, restarted, knows
// all of it too.
func TestControllerCrashKeepsMetadata(t *testing.T) {
	c := testcluster.Start(t, 3)
	ctx := context.Background()
	adm := c.Admin()
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name          string
		partitions    int32
		rf            int16
		configs       map[string]*string
		alterKey, val string
	}{
		{"meta-a", 3, 3, map[string]*string{"retention.ms": str("3600000")}, "segment.bytes", "1048576"},
		{"meta-b", 1, 2, map[string]*string{"max.message.bytes": str("65536"), "min.insync.replicas": str("2")}, "retention.bytes", "1048576"},
		{"meta-c", 2, 1, map[string]*string{"cleanup.policy": str("compact")}, "retention.ms", "60000"},
	} {
		if _, err := adm.CreateTopic(ctx, tc.partitions, tc.rf, tc.configs, tc.name); err != nil {
			t.Fatalf("creating %s: %v", tc.name, err)
		}
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: tc.alterKey, Value: str(tc.val)}}, tc.name)
		if err == nil {
			var r kadm.AlterConfigsResponse
			if r, err = res.On(tc.name, nil); err == nil {
				err = r.Err
			}
		}
		if err != nil {
			t.Fatalf("altering %s: %v", tc.name, err)
		}
	}
	topics := []string{"meta-a", "meta-b", "meta-c"}

	ctrlID, _, err := c.ActiveController(ctx)
	if err != nil || ctrlID < 1 {
		t.Fatalf("active controller: %d, %v", ctrlID, err)
	}
	old := c.Node(ctrlID)
	// What every node must agree on once the creations and alterations are
	// applied everywhere.
	var want map[string]topicView
	testcluster.Eventually(t, 30*time.Second, "all nodes agreeing on the topics", func() error {
		var err error
		want, err = viewFrom(ctx, old, topics)
		if err != nil {
			return err
		}
		for _, tc := range []struct{ topic, key string }{{"meta-a", "segment.bytes"}, {"meta-b", "retention.bytes"}, {"meta-c", "retention.ms"}} {
			if _, ok := want[tc.topic].Configs[tc.key]; !ok {
				return fmt.Errorf("%s: altered config %s not shown yet", tc.topic, tc.key)
			}
		}
		for _, n := range c.Nodes() {
			got, err := viewFrom(ctx, n, topics)
			if err != nil {
				return err
			}
			if err := sameViews(want, got); err != nil {
				return fmt.Errorf("node %d: %w", n.ID, err)
			}
		}
		return nil
	})
	t.Logf("before the crash (controller %d): %v", ctrlID, want)

	killedAt := time.Now()
	old.Kill()
	var newID int32
	testcluster.Eventually(t, 30*time.Second, "another active controller", func() error {
		id, from, err := c.ActiveController(ctx)
		if err != nil {
			return err
		}
		if id == ctrlID || id < 1 {
			return fmt.Errorf("node %d says the controller is %d", from, id)
		}
		newID = id
		return nil
	})
	t.Logf("node %d is the active controller %v after node %d was killed", newID, time.Since(killedAt).Round(time.Millisecond), ctrlID)

	for _, n := range c.Nodes() {
		if n == old {
			continue
		}
		got, err := viewFrom(ctx, n, topics)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameViews(want, got); err != nil {
			t.Fatalf("node %d after the controller crash: %v", n.ID, err)
		}
	}

	// The new controller creates topics; the new topic takes writes.
	testcluster.Eventually(t, 30*time.Second, "creating meta-d", func() error {
		res, err := adm.CreateTopic(ctx, 1, 2, nil, "meta-d")
		if errors.Is(err, kerr.TopicAlreadyExists) || errors.Is(res.Err, kerr.TopicAlreadyExists) {
			return nil
		}
		if err != nil {
			return err
		}
		return res.Err
	})
	cl := c.Client(kgo.DefaultProduceTopic("meta-d"))
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte("after the failover")}).FirstErr(); err != nil {
		t.Fatalf("writing to a topic created after the failover: %v", err)
	}

	// The old controller returns and learns everything it missed.
	old.Restart()
	topics = append(topics, "meta-d")
	testcluster.Eventually(t, 30*time.Second, "the restarted node knowing every topic", func() error {
		ref, err := viewFrom(ctx, c.Node(newID), topics)
		if err != nil {
			return err
		}
		got, err := viewFrom(ctx, old, topics)
		if err != nil {
			return err
		}
		return sameViews(ref, got)
	})
	id, _, err := c.ActiveController(ctx)
	if err != nil || id < 1 {
		t.Fatalf("active controller after the restart: %d, %v", id, err)
	}
}
