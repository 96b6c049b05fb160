package handlers

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/loglevels"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

// planCluster is the Cluster of a node whose controller is the active one,
// in memory: the topic and config operations run the controller's own
// plans (package controller) against the image and apply their records.
// Other controller calls panic.
type planCluster struct {
	Cluster
	mu  sync.Mutex
	img *metadata.Image
	// alterPartitions counts the AlterPartitions calls.
	alterPartitions int
}

func (c *planCluster) AlterPartitions(_ context.Context, reqs []controller.AlterPartitionRequest) ([]controller.AlterPartitionResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.alterPartitions++
	recs, res, err := controller.PlanAlterPartitions(c.img, reqs, nil)
	if err != nil {
		return nil, err
	}
	return res, c.apply(recs, false)
}

func (c *planCluster) Image() *metadata.Image {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.img
}
func (c *planCluster) LeaderID() int32 { return 1 }
func (c *planCluster) IsLeader() bool  { return true }

// apply applies the records of a plan unless validateOnly.
func (c *planCluster) apply(recs []metadata.Record, validateOnly bool) error {
	if validateOnly {
		return nil
	}
	img, err := metadata.ApplyAll(c.img, recs)
	if err == nil {
		c.img = img
	}
	return err
}

func (c *planCluster) CreateTopics(_ context.Context, reqs []controller.CreateTopic, validateOnly bool) ([]controller.CreateTopicResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, res := controller.PlanCreateTopics(c.img, reqs, 1, rand.Reader, nil, true)
	return res, c.apply(recs, validateOnly)
}

func (c *planCluster) DeleteTopics(_ context.Context, refs []controller.TopicRef) ([]controller.DeleteTopicResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, res := controller.PlanDeleteTopics(c.img, refs)
	return res, c.apply(recs, false)
}

func (c *planCluster) CreatePartitions(_ context.Context, reqs []controller.CreatePartitions, validateOnly bool) ([]controller.CreatePartitionsResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, res := controller.PlanCreatePartitions(c.img, reqs, nil)
	return res, c.apply(recs, validateOnly)
}

func (c *planCluster) AlterConfigs(_ context.Context, reqs []controller.AlterConfigsResource, validateOnly bool) ([]controller.ConfigResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, res := controller.PlanAlterConfigs(c.img, reqs, true)
	return res, c.apply(recs, validateOnly)
}

func (c *planCluster) IncrementalAlterConfigs(_ context.Context, reqs []controller.IncrementalAlterConfigsResource, validateOnly bool) ([]controller.ConfigResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, res := controller.PlanIncrementalAlterConfigs(c.img, reqs, true)
	return res, c.apply(recs, validateOnly)
}

func (c *planCluster) AlterClientQuotas(_ context.Context, entries []controller.QuotaAlteration, validateOnly bool) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, errs := controller.PlanAlterClientQuotas(c.img, entries)
	return errs, c.apply(recs, validateOnly)
}

func (c *planCluster) AlterPartitionReassignments(_ context.Context, reqs []controller.Reassignment) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, errs := controller.PlanAlterReassignments(c.img, reqs, nil)
	return errs, c.apply(recs, false)
}

func (c *planCluster) CreateAcls(_ context.Context, bindings []acl.Binding) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, errs := controller.PlanCreateAcls(c.img, bindings)
	return errs, c.apply(recs, false)
}

func (c *planCluster) DeleteAcls(_ context.Context, filters []acl.Filter) ([]controller.AclDeletion, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, res := controller.PlanDeleteAcls(c.img, filters)
	return res, c.apply(recs, false)
}

func (c *planCluster) UnregisterBroker(_ context.Context, id int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, err := controller.PlanUnregisterBroker(c.img, id, nil)
	if err != nil {
		return err
	}
	return c.apply(recs, false)
}

// newAdminHandlers is a node of a two-broker cluster whose controller is the
// active one (planCluster), hosting no partitions: topic "t" (two
// partitions, replication factor 2) and "t_x" exist.
func newAdminHandlers(t *testing.T) *Handlers {
	t.Helper()
	return newAdminHandlersWith(t, Config{})
}

// newAdminHandlersWith is newAdminHandlers with cfg (its node id and broker
// epoch set here).
func newAdminHandlersWith(t *testing.T, cfg Config) *Handlers {
	t.Helper()
	img, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.RegisterBrokerRecord{BrokerID: 2, Epoch: 1, Host: "127.0.0.1", Port: 9093},
		&metadata.TopicRecord{Name: "t", ID: errTopicID},
		&metadata.PartitionRecord{TopicID: errTopicID, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
		&metadata.PartitionRecord{TopicID: errTopicID, Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2},
		&metadata.TopicRecord{Name: "t_x", ID: metadata.UUID{12}},
		&metadata.PartitionRecord{TopicID: metadata.UUID{12}, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range img.Brokers() {
		if b.Fenced {
			t.Fatalf("broker %d is fenced in the test image", b.ID)
		}
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.NodeID, cfg.BrokerEpoch = 1, func() int64 { return 1 }
	return New(cfg, &planCluster{img: img}, nil, nil, nil, logger)
}

// codesByName lists a response's (name, code) pairs in order.
type nameCode struct {
	name string
	code int16
}

func wantCodes(t *testing.T, what string, got []nameCode, want ...any) {
	t.Helper()
	var w []nameCode
	for i := 0; i < len(want); i += 2 {
		code := int16(0)
		if e, ok := want[i+1].(*kerr.Error); ok && e != nil {
			code = e.Code
		}
		w = append(w, nameCode{want[i].(string), code})
	}
	if len(got) != len(w) {
		t.Errorf("%s: answered %v, want %v", what, got, w)
		return
	}
	for i := range w {
		if got[i] != w[i] {
			t.Errorf("%s: entry %d is %s %v, want %s %v", what, i, got[i].name, kerr.ErrorForCode(got[i].code), w[i].name, kerr.ErrorForCode(w[i].code))
		}
	}
}

// TestCreateTopicsErrors: each invalid topic of a CreateTopics gets Kafka's
// code while the valid ones are created; a name given twice is INVALID_REQUEST
// (in each place: Kafka answers it once) and not created.
func TestCreateTopicsErrors(t *testing.T) {
	h := newAdminHandlers(t)
	topic := func(name string, partitions int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
		for i := 0; i < len(configs); i += 2 {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name = configs[i]
			if configs[i+1] != "<null>" {
				c.Value = kmsg.StringPtr(configs[i+1])
			}
			rt.Configs = append(rt.Configs, c)
		}
		return rt
	}
	assigned := func(name string, partitions int32, replicas ...[]int32) kmsg.CreateTopicsRequestTopic {
		rt := topic(name, partitions, -1)
		for i, r := range replicas {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(i), r
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		return rt
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.CreateTopicsRequestTopic{
		topic("ok", 2, 2),
		topic("dup", 1, 1),
		topic("", 1, 1),
		topic(strings.Repeat("a", 250), 1, 1),
		topic("a/b", 1, 1),
		topic("..", 1, 1),
		topic("t", 1, 1),
		topic("t.x", 1, 1),
		topic("__cluster_metadata", 1, 1),
		topic("zero-partitions", 0, 1),
		topic("minus-two-partitions", -2, 1),
		topic("zero-rf", 1, 0),
		topic("zero-partitions-zero-rf", 0, 0),
		topic("rf-over-brokers", 1, 3),
		topic("unknown-config", 1, 1, "no.such.config", "1"),
		topic("bad-config", 1, 1, "retention.ms", "soon"),
		topic("null-config", 1, 1, "retention.ms", "<null>"),
		topic("compaction-lags", 1, 1, "min.compaction.lag.ms", "1000", "max.compaction.lag.ms", "999"),
		assigned("assignment-and-count", 2, []int32{1}),
		assigned("assignment-duplicate-replica", -1, []int32{1, 1}),
		assigned("assignment-unknown-broker", -1, []int32{7}),
		assigned("assigned", -1, []int32{2, 1}, []int32{1, 2}),
		topic("dup", 1, 1),
	}
	resp := serve(t, h, req).(*kmsg.CreateTopicsResponse)
	var got []nameCode
	for _, rt := range resp.Topics {
		got = append(got, nameCode{rt.Topic, rt.ErrorCode})
	}
	wantCodes(t, "CreateTopics", got,
		"ok", nil,
		"dup", kerr.InvalidRequest,
		"", kerr.InvalidTopicException,
		strings.Repeat("a", 250), kerr.InvalidTopicException,
		"a/b", kerr.InvalidTopicException,
		"..", kerr.InvalidTopicException,
		"t", kerr.TopicAlreadyExists,
		"t.x", kerr.InvalidTopicException,
		"__cluster_metadata", kerr.InvalidRequest,
		"zero-partitions", kerr.InvalidPartitions,
		"minus-two-partitions", kerr.InvalidPartitions,
		"zero-rf", kerr.InvalidReplicationFactor,
		"zero-partitions-zero-rf", kerr.InvalidReplicationFactor,
		"rf-over-brokers", kerr.InvalidReplicationFactor,
		"unknown-config", kerr.InvalidConfig,
		"bad-config", kerr.InvalidConfig,
		"null-config", kerr.InvalidConfig,
		"compaction-lags", kerr.InvalidConfig,
		"assignment-and-count", kerr.InvalidRequest,
		"assignment-duplicate-replica", kerr.InvalidReplicaAssignment,
		"assignment-unknown-broker", kerr.InvalidReplicaAssignment,
		"assigned", nil,
		"dup", kerr.InvalidRequest,
	)
	img := h.cluster.Image()
	if img.Topic("dup") != nil {
		t.Error("a topic named twice in one request was created")
	}
	if tp := img.Topic("ok"); tp == nil || len(tp.Partitions) != 2 {
		t.Error("the valid topic beside the invalid ones was not created with 2 partitions")
	}
}

// TestCreateTopicsManualPartitionIndexes: a manual assignment's entries keep
// the partition indexes the client sent, as in Kafka's controller: listed out
// of order they land on their own partitions; an index given twice, a
// negative one, or a gap is INVALID_REPLICA_ASSIGNMENT with Kafka's message,
// and the topic is not created.
func TestCreateTopicsManualPartitionIndexes(t *testing.T) {
	h := newAdminHandlers(t)
	type entry struct {
		partition int32
		replicas  []int32
	}
	topic := func(name string, entries ...entry) kmsg.CreateTopicsRequestTopic {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
		for _, e := range entries {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = e.partition, e.replicas
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		return rt
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.CreateTopicsRequestTopic{
		topic("reversed", entry{1, []int32{1, 2}}, entry{0, []int32{2, 1}}),
		topic("twice", entry{0, []int32{1}}, entry{1, []int32{2}}, entry{1, []int32{1}}),
		topic("negative", entry{-1, []int32{1}}),
		topic("gap", entry{0, []int32{1}}, entry{2, []int32{2}}),
	}
	resp := serve(t, h, req).(*kmsg.CreateTopicsResponse)
	tests := []struct {
		name string
		code int16
		msg  string
	}{
		{"reversed", 0, ""},
		{"twice", kerr.InvalidReplicaAssignment.Code, "Found multiple manual partition assignments for partition 1"},
		{"negative", kerr.InvalidReplicaAssignment.Code, "partitions should be a consecutive 0-based integer sequence"},
		{"gap", kerr.InvalidReplicaAssignment.Code, "partitions should be a consecutive 0-based integer sequence"},
	}
	if len(resp.Topics) != len(tests) {
		t.Fatalf("%d topics answered, want %d", len(resp.Topics), len(tests))
	}
	img := h.cluster.Image()
	for i, tt := range tests {
		rt := resp.Topics[i]
		var msg string
		if rt.ErrorMessage != nil {
			msg = *rt.ErrorMessage
		}
		if rt.Topic != tt.name || rt.ErrorCode != tt.code || msg != tt.msg {
			t.Errorf("topic %d: %s %v %q, want %s %v %q", i, rt.Topic, kerr.ErrorForCode(rt.ErrorCode), msg,
				tt.name, kerr.ErrorForCode(tt.code), tt.msg)
		}
		if tt.code != 0 && img.Topic(tt.name) != nil {
			t.Errorf("%s: created although refused", tt.name)
		}
	}
	if p0, p1 := img.Partition("reversed", 0), img.Partition("reversed", 1); p0 == nil || p1 == nil ||
		!slices.Equal(p0.Replicas, []int32{2, 1}) || !slices.Equal(p1.Replicas, []int32{1, 2}) {
		t.Errorf("reversed: partitions %+v and %+v, want replicas [2 1] and [1 2]", p0, p1)
	}
}

// TestAlterConfigsErrors: AlterConfigs and IncrementalAlterConfigs answer each
// resource on its own, as Kafka's broker does before the controller sees the
// request: a resource named twice is INVALID_REQUEST in each place, as are a
// key given twice and a null value (but DELETE's); an unknown topic, key or
// bad value gets its code, and the valid resources beside them are applied.
func TestAlterConfigsErrors(t *testing.T) {
	h := newAdminHandlers(t)
	type cfg struct {
		name  string
		value *string
		op    int8
	}
	v := kmsg.StringPtr
	legacy := func(resources ...any) []nameCode {
		req := kmsg.NewPtrAlterConfigsRequest()
		req.SetVersion(2)
		for i := 0; i < len(resources); i += 3 {
			rr := kmsg.NewAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceType(resources[i].(int)), resources[i+1].(string)
			for _, c := range resources[i+2].([]cfg) {
				rc := kmsg.NewAlterConfigsRequestResourceConfig()
				rc.Name, rc.Value = c.name, c.value
				rr.Configs = append(rr.Configs, rc)
			}
			req.Resources = append(req.Resources, rr)
		}
		var got []nameCode
		for _, r := range serve(t, h, req).(*kmsg.AlterConfigsResponse).Resources {
			got = append(got, nameCode{r.ResourceName, r.ErrorCode})
		}
		return got
	}
	incremental := func(resources ...any) []nameCode {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.SetVersion(1)
		for i := 0; i < len(resources); i += 3 {
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceType(resources[i].(int)), resources[i+1].(string)
			for _, c := range resources[i+2].([]cfg) {
				rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				rc.Name, rc.Value, rc.Op = c.name, c.value, kmsg.IncrementalAlterConfigOp(c.op)
				rr.Configs = append(rr.Configs, rc)
			}
			req.Resources = append(req.Resources, rr)
		}
		var got []nameCode
		for _, r := range serve(t, h, req).(*kmsg.IncrementalAlterConfigsResponse).Resources {
			got = append(got, nameCode{r.ResourceName, r.ErrorCode})
		}
		return got
	}
	const topic, broker = 2, 4
	retention := []cfg{{"retention.ms", v("1000"), 0}}

	wantCodes(t, "AlterConfigs", legacy(
		topic, "t", retention,
		topic, "nope", retention,
		topic, "t_x", []cfg{{"retention.ms", v("soon"), 0}},
		topic, "t_x", retention,
		topic, "x", []cfg{{"no.such.config", v("1"), 0}},
		99, "t", retention,
	),
		"t", nil,
		"nope", kerr.UnknownTopicOrPartition,
		"t_x", kerr.InvalidRequest,
		"t_x", kerr.InvalidRequest,
		"x", kerr.UnknownTopicOrPartition,
		"t", kerr.InvalidRequest,
	)
	if got := h.cluster.Image().Topic("t").Overrides["retention.ms"]; got != "1000" {
		t.Errorf("AlterConfigs: the valid resource beside the invalid ones has retention.ms %q, want 1000", got)
	}
	wantCodes(t, "AlterConfigs keys", legacy(
		topic, "t", []cfg{{"retention.ms", v("1"), 0}, {"retention.ms", v("2"), 0}},
		topic, "t_x", []cfg{{"retention.ms", nil, 0}},
		topic, "t", []cfg{{"no.such.config", v("1"), 0}},
	),
		"t", kerr.InvalidRequest,
		"t_x", kerr.InvalidRequest,
		"t", kerr.InvalidRequest,
	)

	const set, del, appendOp, subtract = 0, 1, 2, 3
	wantCodes(t, "IncrementalAlterConfigs", incremental(
		topic, "t", []cfg{{"retention.ms", v("2000"), set}},
		topic, "nope", retention,
		topic, "t_x", []cfg{{"retention.ms", v("1"), set}, {"retention.ms", nil, del}},
		broker, "", []cfg{{"log.retention.ms", nil, set}},
		topic, "x1", []cfg{{"retention.ms", nil, del}},
	),
		"t", nil,
		"nope", kerr.UnknownTopicOrPartition,
		"t_x", kerr.InvalidRequest,
		"", kerr.InvalidRequest,
		"x1", kerr.UnknownTopicOrPartition,
	)
	wantCodes(t, "IncrementalAlterConfigs values", incremental(
		topic, "t", []cfg{{"retention.ms", v("soon"), set}},
		topic, "t_x", []cfg{{"no.such.config", v("1"), set}},
	),
		"t", kerr.InvalidConfig,
		"t_x", kerr.InvalidConfig,
	)
	wantCodes(t, "IncrementalAlterConfigs unknown operation", incremental(
		topic, "t", []cfg{{"retention.ms", v("1"), 9}},
	),
		"t", kerr.InvalidRequest,
	)
	wantCodes(t, "IncrementalAlterConfigs lists", incremental(
		topic, "t", []cfg{{"retention.ms", v("1"), appendOp}},
		topic, "t_x", []cfg{{"cleanup.policy", v("compact"), subtract}},
	),
		"t", kerr.InvalidConfig,
		"t_x", nil,
	)
	if got := h.cluster.Image().Topic("t").Overrides["retention.ms"]; got != "2000" {
		t.Errorf("IncrementalAlterConfigs: retention.ms %q, want 2000", got)
	}
}

// TestDeleteTopicsErrors: DeleteTopics v6 by name or id; an unknown name,
// an unknown id, both or neither given, and a name given twice get Kafka's
// codes, while the valid topic beside them is deleted. Before v6 names only.
func TestDeleteTopicsErrors(t *testing.T) {
	h := newAdminHandlers(t)
	byName := func(name string) kmsg.DeleteTopicsRequestTopic {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		return rt
	}
	byID := func(id metadata.UUID) kmsg.DeleteTopicsRequestTopic {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.TopicID = id
		return rt
	}
	both := byName("t")
	both.TopicID = errTopicID
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(6)
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.DeleteTopicsRequestTopic{
		byName("nope"), byID(metadata.UUID{99}), both, byID(metadata.UUID{}),
		byName("dup"), byName("dup"), byName("t_x"),
	}
	var got []nameCode
	for _, rt := range serve(t, h, req).(*kmsg.DeleteTopicsResponse).Topics {
		got = append(got, nameCode{nullable(rt.Topic), rt.ErrorCode})
	}
	wantCodes(t, "DeleteTopics v6", got,
		"nope", kerr.UnknownTopicOrPartition,
		"", kerr.UnknownTopicID,
		"t", kerr.InvalidRequest,
		"", kerr.InvalidRequest,
		"dup", kerr.InvalidRequest,
		"dup", kerr.InvalidRequest,
		"t_x", nil,
	)
	img := h.cluster.Image()
	if img.Topic("t_x") != nil || img.Topic("t") == nil {
		t.Fatalf("after DeleteTopics: t_x exists %t, t exists %t; want only t", img.Topic("t_x") != nil, img.Topic("t") != nil)
	}

	old := kmsg.NewPtrDeleteTopicsRequest()
	old.SetVersion(5)
	old.TopicNames = []string{"nope", "t"}
	got = nil
	for _, rt := range serve(t, h, old).(*kmsg.DeleteTopicsResponse).Topics {
		got = append(got, nameCode{nullable(rt.Topic), rt.ErrorCode})
	}
	wantCodes(t, "DeleteTopics v5", got, "nope", kerr.UnknownTopicOrPartition, "t", nil)
}

// TestCreatePartitionsErrors: growing an unknown topic, shrinking, staying,
// an assignment of the wrong size or to an unknown broker, a topic named
// twice: each gets Kafka's code, and the valid topic beside them grows.
func TestCreatePartitionsErrors(t *testing.T) {
	h := newAdminHandlers(t)
	topic := func(name string, count int32, assignment ...[]int32) kmsg.CreatePartitionsRequestTopic {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, count
		for _, r := range assignment {
			rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: r})
		}
		return rt
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.SetVersion(3)
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.CreatePartitionsRequestTopic{
		topic("nope", 3),
		topic("t", 1),
		topic("t", 2),
		topic("t_x", 3, []int32{1}),
		topic("t_x", 2, []int32{7}),
		topic("t_x", 3),
	}
	var got []nameCode
	for _, rt := range serve(t, h, req).(*kmsg.CreatePartitionsResponse).Topics {
		got = append(got, nameCode{rt.Topic, rt.ErrorCode})
	}
	// t and t_x are each named more than once: INVALID_REQUEST.
	wantCodes(t, "CreatePartitions duplicates", got,
		"nope", kerr.UnknownTopicOrPartition,
		"t", kerr.InvalidRequest, "t", kerr.InvalidRequest,
		"t_x", kerr.InvalidRequest, "t_x", kerr.InvalidRequest, "t_x", kerr.InvalidRequest,
	)
	for _, tc := range []struct {
		name string
		rt   kmsg.CreatePartitionsRequestTopic
		want *kerr.Error
	}{
		{"shrink", topic("t", 1), kerr.InvalidPartitions},
		{"same count", topic("t", 2), kerr.InvalidPartitions},
		{"assignment of the wrong size", topic("t", 4, []int32{1}), kerr.InvalidReplicaAssignment},
		{"assignment to an unknown broker", topic("t", 3, []int32{7, 1}), kerr.InvalidReplicaAssignment},
		{"assignment with a replica twice", topic("t", 3, []int32{1, 1}), kerr.InvalidReplicaAssignment},
		{"grow", topic("t", 3), nil},
	} {
		req.Topics = []kmsg.CreatePartitionsRequestTopic{tc.rt}
		got := serve(t, h, req).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if got != want {
			t.Errorf("CreatePartitions %s: %v, want %v", tc.name, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}
	if n := len(h.cluster.Image().Topic("t").Partitions); n != 3 {
		t.Errorf("t has %d partitions, want 3", n)
	}
}

// TestDescribeConfigsErrors: an unknown topic, a bad or unknown broker id, an
// unknown resource type each get their code beside a resource described in
// full.
func TestDescribeConfigsErrors(t *testing.T) {
	h := newAdminHandlers(t)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{2, "t"}, {2, "nope"}, {2, ""}, {4, "abc"}, {4, "7"}, {4, "2"}, {4, "1"}, {99, "x"}} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		req.Resources = append(req.Resources, rr)
	}
	resp := serve(t, h, req).(*kmsg.DescribeConfigsResponse)
	var got []nameCode
	for _, r := range resp.Resources {
		got = append(got, nameCode{r.ResourceName, r.ErrorCode})
	}
	wantCodes(t, "DescribeConfigs", got,
		"t", nil,
		"nope", kerr.UnknownTopicOrPartition,
		"", kerr.InvalidTopicException,
		"abc", kerr.InvalidRequest,
		"7", kerr.InvalidRequest,
		"2", kerr.InvalidRequest, // registered, but not this broker: Kafka answers only for its own id
		"1", nil,
		"x", kerr.InvalidRequest,
	)
	if len(resp.Resources[0].Configs) == 0 || len(resp.Resources[6].Configs) == 0 {
		t.Errorf("the valid resources list %d and %d configs", len(resp.Resources[0].Configs), len(resp.Resources[6].Configs))
	}
	// Kafka 4.4's ConfigHelper.describeConfigs words another broker's id so.
	const want = "Unexpected broker id, expected 1 or empty string, but received 2"
	if m := resp.Resources[5].ErrorMessage; m == nil || *m != want {
		t.Errorf("another broker's id: message %q, want %q", derefString(m), want)
	}
}

// TestIncrementalAlterConfigsAsKafka: each request (validate only) was sent to
// a Kafka 4.4 node and to Strata side by side in session 9; the codes are
// Kafka's. Deleting a key with no override is a no-op even for a key the
// broker does not know, and a topic resource needs a name.
func TestIncrementalAlterConfigsAsKafka(t *testing.T) {
	h := newAdminHandlers(t)
	str := func(s string) *string { return &s }
	topic, broker := kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker
	set, del, sub := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete, kmsg.IncrementalAlterConfigOpSubtract
	for _, tt := range []struct {
		name     string
		rt       kmsg.ConfigResourceType
		resource string
		op       kmsg.IncrementalAlterConfigOp
		key      string
		value    *string
		want     *kerr.Error
	}{
		{"delete an unknown topic key", topic, "t", del, "foo.bar", nil, nil},
		{"delete an unknown broker key", broker, "1", del, "foo.bar", nil, nil},
		{"delete a key with no override", topic, "t", del, "retention.ms", nil, nil},
		{"empty topic name", topic, "", set, "retention.ms", str("1000"), kerr.InvalidRequest},
		{"unknown topic", topic, "nosuch", set, "retention.ms", str("1000"), kerr.UnknownTopicOrPartition},
		{"set an unknown topic key", topic, "t", set, "foo.bar", str("1"), kerr.InvalidConfig},
		{"not a number", topic, "t", set, "retention.ms", str("abc"), kerr.InvalidConfig},
		{"empty value", topic, "t", set, "retention.ms", str(""), kerr.InvalidConfig},
		{"subtract from a non-list", topic, "t", sub, "retention.ms", str("5"), kerr.InvalidConfig},
		{"min.insync.replicas 0", topic, "t", set, "min.insync.replicas", str("0"), kerr.InvalidConfig},
		{"boolean TRUE", topic, "t", set, "unclean.leader.election.enable", str("TRUE"), nil},
		{"boolean yes", topic, "t", set, "unclean.leader.election.enable", str("yes"), kerr.InvalidConfig},
		// Session 10, against Kafka 4.4.0 with interop/cmd/configcompare
		// (Kafka's messages in quotes).
		{"another broker's id", broker, "2", set, "log.retention.ms", str("1000"), kerr.InvalidRequest}, // "Unexpected broker id, expected 1, but received 2"
		{"a bad broker value", broker, "1", set, "log.retention.ms", str("x"), kerr.InvalidRequest},     // "Invalid value x for configuration log.retention.ms"
		{"a read-only broker key", broker, "1", set, "log.dirs", str("/x"), kerr.InvalidRequest},        // "Cannot update these configs dynamically: [log.dirs]"
		{"log.segment.bytes below 1 MiB", broker, "", set, "log.segment.bytes", str("1000"), kerr.InvalidRequest},
		{"segment.bytes below 1 MiB", topic, "t", set, "segment.bytes", str("1048575"), kerr.InvalidConfig}, // "Value must be at least 1048576"
		{"segment.bytes at 1 MiB", topic, "t", set, "segment.bytes", str("1048576"), nil},
		{"internal.segment.bytes", topic, "t", set, "internal.segment.bytes", str("4096"), nil},
		// Kafka 4.4's keys that Strata lacked (kafka-configs --add-config
		// compression.zstd.level=5), with Kafka's ranges.
		{"compression.zstd.level", topic, "t", set, "compression.zstd.level", str("5"), nil},
		{"compression.zstd.level above 22", topic, "t", set, "compression.zstd.level", str("23"), kerr.InvalidConfig},
		{"compression.gzip.level 0", topic, "t", set, "compression.gzip.level", str("0"), kerr.InvalidConfig},
		{"compression.lz4.level", topic, "t", set, "compression.lz4.level", str("17"), nil},
		{"max.decompressed.message.bytes", topic, "t", set, "max.decompressed.message.bytes", str("1048576"), nil},
		{"max.decompressed.message.bytes 0", topic, "t", set, "max.decompressed.message.bytes", str("0"), kerr.InvalidConfig},
		{"remote.copy.lag.ms", topic, "t", set, "remote.copy.lag.ms", str("-1"), nil},
		{"remote.copy.lag.bytes -2", topic, "t", set, "remote.copy.lag.bytes", str("-2"), kerr.InvalidConfig},
		{"log.remote.copy.lag.bytes", broker, "", set, "log.remote.copy.lag.bytes", str("1048576"), nil},
		{"broker compression.zstd.level", broker, "1", set, "compression.zstd.level", str("-131073"), kerr.InvalidRequest},
		// Kafka takes unknown broker keys (num.io.threads, foo.bar.baz); Strata
		// refuses them (docs/protocol.md says why) with Kafka's code for a
		// refused broker key.
		{"an unknown broker key", broker, "1", set, "num.io.threads", str("4"), kerr.InvalidRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			req.ValidateOnly = true
			res := kmsg.NewIncrementalAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName = tt.rt, tt.resource
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op, c.Value = tt.key, tt.op, tt.value
			res.Configs = append(res.Configs, c)
			req.Resources = append(req.Resources, res)
			resp := serve(t, h, req).(*kmsg.IncrementalAlterConfigsResponse)
			if len(resp.Resources) != 1 {
				t.Fatalf("%d resources answered", len(resp.Resources))
			}
			if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != tt.want && !(err == nil && tt.want == nil) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}

// TestConfigChangeOfAnotherBroker checks that a broker resource naming another
// broker is refused where the request arrives, before the controller, and the
// rest of the request is answered in order (Kafka 4.4.0: INVALID_REQUEST,
// "Unexpected broker id, expected 1, but received 2"; Strata applied it).
func TestConfigChangeOfAnotherBroker(t *testing.T) {
	h := newAdminHandlers(t)
	alter := kmsg.NewPtrAlterConfigsRequest()
	incr := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, r := range []struct {
		rt   kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeBroker, "2"}, {kmsg.ConfigResourceTypeTopic, "t"}, {kmsg.ConfigResourceTypeBroker, "1"}, {kmsg.ConfigResourceTypeBroker, "3"}} {
		key := "log.retention.ms"
		if r.rt == kmsg.ConfigResourceTypeTopic {
			key = "retention.ms"
		}
		a := kmsg.NewAlterConfigsRequestResource()
		a.ResourceType, a.ResourceName = r.rt, r.name
		ac := kmsg.NewAlterConfigsRequestResourceConfig()
		ac.Name, ac.Value = key, kmsg.StringPtr("1000")
		a.Configs = append(a.Configs, ac)
		alter.Resources = append(alter.Resources, a)
		i := kmsg.NewIncrementalAlterConfigsRequestResource()
		i.ResourceType, i.ResourceName = r.rt, r.name
		ic := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		ic.Name, ic.Value = key, kmsg.StringPtr("1000")
		i.Configs = append(i.Configs, ic)
		incr.Resources = append(incr.Resources, i)
	}
	want := []struct {
		name string
		code int16
	}{{"2", kerr.InvalidRequest.Code}, {"t", 0}, {"1", 0}, {"3", kerr.InvalidRequest.Code}}
	check := func(api string, i int, name string, code int16, msg *string) {
		if name != want[i].name || code != want[i].code {
			t.Errorf("%s resource %d: %s code %d (%v), want %s code %d", api, i, name, code, msg, want[i].name, want[i].code)
		}
	}
	aResp := serve(t, h, alter).(*kmsg.AlterConfigsResponse)
	iResp := serve(t, h, incr).(*kmsg.IncrementalAlterConfigsResponse)
	if len(aResp.Resources) != len(want) || len(iResp.Resources) != len(want) {
		t.Fatalf("answered %d and %d resources, want %d", len(aResp.Resources), len(iResp.Resources), len(want))
	}
	for i := range want {
		check("AlterConfigs", i, aResp.Resources[i].ResourceName, aResp.Resources[i].ErrorCode, aResp.Resources[i].ErrorMessage)
		check("IncrementalAlterConfigs", i, iResp.Resources[i].ResourceName, iResp.Resources[i].ErrorCode, iResp.Resources[i].ErrorMessage)
	}
	if got := h.cluster.Image().BrokerConfigs("2"); got != nil {
		t.Errorf("broker 2's configs %v, want none", got)
	}
}

// TestDescribeConfigsAsKafka checks the documentation and synonyms of a
// described topic key as Kafka 4.4.0 answered them side by side
// (interop/cmd/configcompare): documentation only when asked for, the built-in
// default under the broker key it comes from, none for a topic-only key.
func TestDescribeConfigsAsKafka(t *testing.T) {
	h := newAdminHandlers(t)
	for _, docs := range []bool{false, true} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(4)
		req.IncludeSynonyms, req.IncludeDocumentation = true, docs
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		rr.ConfigNames = []string{"cleanup.policy", "remote.storage.enable"}
		req.Resources = append(req.Resources, rr)
		resp := serve(t, h, req).(*kmsg.DescribeConfigsResponse)
		if len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 2 {
			t.Fatalf("answer %+v", resp.Resources)
		}
		for _, c := range resp.Resources[0].Configs {
			if (c.Documentation != nil && *c.Documentation != "") != docs {
				t.Errorf("documentation %v: %s documented %v", docs, c.Name, c.Documentation)
			}
			var syns []string
			for _, s := range c.ConfigSynonyms {
				syns = append(syns, fmt.Sprintf("%s=%s/%d", s.Name, *s.Value, s.Source))
			}
			want := map[string][]string{"cleanup.policy": {"log.cleanup.policy=delete/5"}, "remote.storage.enable": nil}[c.Name]
			if !slices.Equal(syns, want) {
				t.Errorf("%s synonyms %v, want %v", c.Name, syns, want)
			}
		}
	}
}

// TestBrokerLoggers checks kafka-configs --entity-type broker-loggers against
// the node's log levels, the codes as Kafka 4.4.0 answered them side by side
// (interop/cmd/configcompare): SET of a level, an unknown level or logger
// INVALID_CONFIG ("Logger no.such.logger does not exist!"), DELETE of the root's
// level INVALID_REQUEST, another broker's id INVALID_REQUEST.
func TestBrokerLoggers(t *testing.T) {
	levels := loglevels.New(slog.LevelInfo)
	logger := slog.New(levels.Handler(slog.DiscardHandler))
	logger.With("component", "group")
	h := newAdminHandlersWith(t, Config{Loggers: levels})
	set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete
	describe := func() map[string]string {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "1"
		req.Resources = append(req.Resources, rr)
		resp := serve(t, h, req).(*kmsg.DescribeConfigsResponse)
		got := map[string]string{}
		for _, c := range resp.Resources[0].Configs {
			if c.Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig {
				t.Errorf("%s source %v", c.Name, c.Source)
			}
			got[c.Name] = *c.Value
		}
		return got
	}
	if got := describe(); !maps.Equal(got, map[string]string{"root": "INFO", "group": "INFO"}) {
		t.Fatalf("described %v", got)
	}
	for _, tt := range []struct {
		name, resource, logger string
		op                     kmsg.IncrementalAlterConfigOp
		value                  string
		validateOnly           bool
		want                   *kerr.Error
		levels                 map[string]string
	}{
		{"group DEBUG", "1", "group", set, "DEBUG", false, nil, map[string]string{"root": "INFO", "group": "DEBUG"}},
		{"root WARN, validate only", "1", "root", set, "WARN", true, nil, map[string]string{"root": "INFO", "group": "DEBUG"}},
		{"root WARN", "1", "root", set, "WARN", false, nil, map[string]string{"root": "WARN", "group": "DEBUG"}},
		{"bad level", "1", "root", set, "BAD", false, kerr.InvalidConfig, nil},
		{"unknown logger", "1", "no.such.logger", set, "DEBUG", false, kerr.InvalidConfig, nil},
		{"delete root", "1", "root", del, "", false, kerr.InvalidRequest, nil},
		{"another broker", "2", "root", set, "DEBUG", false, kerr.InvalidRequest, nil},
		{"delete group", "1", "group", del, "", false, nil, map[string]string{"root": "WARN", "group": "WARN"}},
	} {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = tt.validateOnly
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, tt.resource
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = tt.logger, tt.op
		if tt.op == set {
			c.Value = kmsg.StringPtr(tt.value)
		}
		res.Configs = append(res.Configs, c)
		req.Resources = append(req.Resources, res)
		resp := serve(t, h, req).(*kmsg.IncrementalAlterConfigsResponse)
		if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != tt.want && !(err == nil && tt.want == nil) {
			t.Errorf("%s: got %v (%v), want %v", tt.name, err, resp.Resources[0].ErrorMessage, tt.want)
		}
		if tt.levels != nil {
			if got := describe(); !maps.Equal(got, tt.levels) {
				t.Errorf("%s: levels %v, want %v", tt.name, got, tt.levels)
			}
		}
	}
	// Without levels (a node whose logger is not loglevels'), the resource type
	// is refused.
	plain := newAdminHandlers(t)
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "1"
	req.Resources = append(req.Resources, rr)
	if code := serve(t, plain, req).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode; code != kerr.InvalidRequest.Code {
		t.Errorf("without levels: code %d, want INVALID_REQUEST", code)
	}
}

// TestDescribeConfigsEmptyNamesListsAll: an empty (not null) list of config
// names describes every config of the resource, as a null one does: Kafka's
// ConfigHelper filters by name only when the list has names.
func TestDescribeConfigsEmptyNamesListsAll(t *testing.T) {
	h := newAdminHandlers(t)
	for _, names := range [][]string{nil, {}} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(4)
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, "t", names
		req.Resources = append(req.Resources, rr)
		resp := serve(t, h, req).(*kmsg.DescribeConfigsResponse)
		if got, want := len(resp.Resources[0].Configs), len(metadata.TopicConfigDefs())-1; got != want { // less internal.segment.bytes
			t.Errorf("config names %#v: %d configs described, want %d", names, got, want)
		}
	}
}

// TestDescribeConfigsCanonicalValues: DescribeConfigs shows a topic's values
// as Kafka's parser reads them back (ConfigHelper describes the parsed
// LogConfig): booleans in lower case, numbers without padding, list items
// trimmed and joined by commas, doubles as Java prints them. The topic's own
// synonym is shown so too; a cluster-wide synonym as it was set. CreateTopics
// answers the values as given, as Kafka's controller does.
func TestDescribeConfigsCanonicalValues(t *testing.T) {
	h := newAdminHandlers(t)
	incr := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, r := range []struct {
		typ        kmsg.ConfigResourceType
		name       string
		key, value string
	}{
		{kmsg.ConfigResourceTypeTopic, "t", "unclean.leader.election.enable", "TRUE"},
		{kmsg.ConfigResourceTypeTopic, "t", "retention.ms", " 0100"},
		{kmsg.ConfigResourceTypeTopic, "t", "cleanup.policy", "compact, delete"},
		{kmsg.ConfigResourceTypeTopic, "t", "min.cleanable.dirty.ratio", "0.0001"},
		{kmsg.ConfigResourceTypeTopic, "t", "compression.type", "gzip "},
		{kmsg.ConfigResourceTypeTopic, "t", "leader.replication.throttled.replicas", "0:1 , 1:2"},
		{kmsg.ConfigResourceTypeBroker, "", "log.cleaner.min.cleanable.ratio", "1"},
		{kmsg.ConfigResourceTypeBroker, "", "log.segment.bytes", "02097152"},
	} {
		i := slices.IndexFunc(incr.Resources, func(rr kmsg.IncrementalAlterConfigsRequestResource) bool {
			return rr.ResourceType == r.typ && rr.ResourceName == r.name
		})
		if i < 0 {
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = r.typ, r.name
			incr.Resources, i = append(incr.Resources, rr), len(incr.Resources)
		}
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = r.key, kmsg.StringPtr(r.value)
		incr.Resources[i].Configs = append(incr.Resources[i].Configs, c)
	}
	for _, r := range serve(t, h, incr).(*kmsg.IncrementalAlterConfigsResponse).Resources {
		if r.ErrorCode != 0 {
			t.Fatalf("altering %q: %v %v", r.ResourceName, kerr.ErrorForCode(r.ErrorCode), nullable(r.ErrorMessage))
		}
	}
	describe := func(topic string) map[string][]string {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(4)
		req.IncludeSynonyms = true
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		req.Resources = append(req.Resources, rr)
		got := map[string][]string{}
		for _, c := range serve(t, h, req).(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
			vals := []string{*c.Value}
			for _, s := range c.ConfigSynonyms {
				vals = append(vals, *s.Value)
			}
			got[c.Name] = vals
		}
		return got
	}
	got := describe("t")
	for key, want := range map[string][]string{
		"unclean.leader.election.enable":        {"true", "true", "false"},
		"retention.ms":                          {"100", "100"},
		"cleanup.policy":                        {"compact,delete", "compact,delete", "delete"},
		"min.cleanable.dirty.ratio":             {"1.0E-4", "1.0E-4", "1", "0.5"},
		"compression.type":                      {"gzip", "gzip", "producer"},
		"leader.replication.throttled.replicas": {"0:1,1:2", "0:1,1:2"},
		"segment.bytes":                         {"2097152", "02097152", "1073741824"},
	} {
		if !slices.Equal(got[key], want) {
			t.Errorf("t's %s: value and synonyms %q, want %q", key, got[key], want)
		}
	}
	if v := describe("t_x")["min.cleanable.dirty.ratio"]; !slices.Equal(v, []string{"1.0", "1", "0.5"}) {
		t.Errorf("t_x's min.cleanable.dirty.ratio: value and synonyms %q, want the cluster-wide value as Java prints a double", v)
	}

	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(7)
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "created", 1, 1
	ct.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "preallocate", Value: kmsg.StringPtr("TRUE")}}
	create.Topics = append(create.Topics, ct)
	for _, c := range serve(t, h, create).(*kmsg.CreateTopicsResponse).Topics[0].Configs {
		if c.Name == "preallocate" && *c.Value != "TRUE" {
			t.Errorf("CreateTopics answered preallocate %q, want the value as given", *c.Value)
		}
	}
}

// TestAlterConfigsKeyTwice: a key given twice in one resource is
// INVALID_REQUEST ("Error due to duplicate config keys") in AlterConfigs and
// IncrementalAlterConfigs alike, as Kafka's ConfigAdminManager.preprocess
// refuses it, and nothing of the resource is applied.
func TestAlterConfigsKeyTwice(t *testing.T) {
	h := newAdminHandlers(t)
	alter := kmsg.NewPtrAlterConfigsRequest()
	a := kmsg.NewAlterConfigsRequestResource()
	a.ResourceType, a.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	incr := kmsg.NewPtrIncrementalAlterConfigsRequest()
	i := kmsg.NewIncrementalAlterConfigsRequestResource()
	i.ResourceType, i.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	for _, v := range []string{"1000", "2000"} {
		ac := kmsg.NewAlterConfigsRequestResourceConfig()
		ac.Name, ac.Value = "retention.ms", kmsg.StringPtr(v)
		a.Configs = append(a.Configs, ac)
		ic := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		ic.Name, ic.Value = "retention.ms", kmsg.StringPtr(v)
		i.Configs = append(i.Configs, ic)
	}
	alter.Resources = append(alter.Resources, a)
	incr.Resources = append(incr.Resources, i)
	if r := serve(t, h, alter).(*kmsg.AlterConfigsResponse).Resources[0]; r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("AlterConfigs: code %d (%v), want INVALID_REQUEST", r.ErrorCode, r.ErrorMessage)
	}
	if r := serve(t, h, incr).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("IncrementalAlterConfigs: code %d (%v), want INVALID_REQUEST", r.ErrorCode, r.ErrorMessage)
	}
	if got := h.cluster.Image().Topic("t").Overrides["retention.ms"]; got != "" {
		t.Errorf("retention.ms %q applied, want none", got)
	}
}

// TestDescribeBrokerNullValues: a broker key Kafka defines without a default
// (log.retention.ms: its default is log.retention.hours') set nowhere is
// described with a null value and no synonyms, as Kafka's ConfigHelper
// answers; a key with a default shows it.
func TestDescribeBrokerNullValues(t *testing.T) {
	h := newAdminHandlers(t)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	rr.ConfigNames = []string{"log.retention.ms", "log.retention.bytes"}
	req.Resources = append(req.Resources, rr)
	resp := serve(t, h, req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 2 {
		t.Fatalf("answer %+v", resp.Resources)
	}
	for _, c := range resp.Resources[0].Configs {
		switch c.Name {
		case "log.retention.ms":
			if c.Value != nil || len(c.ConfigSynonyms) != 0 || c.Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("log.retention.ms = %v from %v, synonyms %+v; want null from DEFAULT_CONFIG, none", c.Value, c.Source, c.ConfigSynonyms)
			}
		case "log.retention.bytes":
			if c.Value == nil || *c.Value != "-1" {
				t.Errorf("log.retention.bytes = %v, want -1", c.Value)
			}
		}
	}
}

func derefString(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestConfigsBrokerIDParsedAsKafka checks the broker (and broker logger)
// resource names of DescribeConfigs, AlterConfigs and IncrementalAlterConfigs
// on broker 1: Kafka 4.4 parses them as integers (ConfigHelper,
// ConfigAdminManager, RuntimeLoggerManager), so "01" and "+1" name broker 1,
// and words each refusal as below (validate only; "" names no broker).
func TestConfigsBrokerIDParsedAsKafka(t *testing.T) {
	h := newAdminHandlersWith(t, Config{Loggers: loglevels.New(slog.LevelInfo)})
	broker, logger := kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger
	const (
		describe = iota
		alter
		incremental
	)
	for _, tt := range []struct {
		api  int
		rt   kmsg.ConfigResourceType
		name string
		msg  string // "" accepted
	}{
		{describe, broker, "01", ""},
		{describe, broker, "+1", ""},
		{describe, broker, "x", "Broker id must be an integer, but it is: x"},
		{describe, broker, "+2", "Unexpected broker id, expected 1 or empty string, but received +2"},
		{describe, logger, "01", ""},
		{describe, logger, "", "Broker id must not be empty"},
		{describe, logger, "x", "Broker id must be an integer, but it is: x"},
		{describe, logger, "2", "Unexpected broker id, expected 1 but received 2"},
		{alter, broker, "x", "Node id must be an integer, but it is: x"},
		{alter, broker, "02", "Unexpected broker id, expected 1, but received 02"},
		{incremental, broker, "1.0", "Node id must be an integer, but it is: 1.0"},
		{incremental, broker, "2", "Unexpected broker id, expected 1, but received 2"},
		{incremental, logger, "+1", ""},
		{incremental, logger, "", "Node id must be an integer, but it is: "},
		{incremental, logger, "02", "Unexpected node id. Expected 1, but received 2"},
	} {
		var code int16
		var msg *string
		switch tt.api {
		case describe:
			req := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = tt.rt, tt.name
			req.Resources = append(req.Resources, rr)
			r := serve(t, h, req).(*kmsg.DescribeConfigsResponse).Resources[0]
			code, msg = r.ErrorCode, r.ErrorMessage
			if code == 0 && len(r.Configs) == 0 {
				t.Errorf("describe %v %q: no configs", tt.rt, tt.name)
			}
		case alter:
			req := kmsg.NewPtrAlterConfigsRequest()
			req.ValidateOnly = true
			rr := kmsg.NewAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = tt.rt, tt.name
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "log.retention.ms", kmsg.StringPtr("1000")
			rr.Configs = append(rr.Configs, c)
			req.Resources = append(req.Resources, rr)
			r := serve(t, h, req).(*kmsg.AlterConfigsResponse).Resources[0]
			code, msg = r.ErrorCode, r.ErrorMessage
		case incremental:
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			req.ValidateOnly = true
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = tt.rt, tt.name
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "log.retention.ms", kmsg.StringPtr("1000")
			if tt.rt == logger {
				c.Name, c.Value = "root", kmsg.StringPtr("DEBUG")
			}
			rr.Configs = append(rr.Configs, c)
			req.Resources = append(req.Resources, rr)
			r := serve(t, h, req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
			code, msg = r.ErrorCode, r.ErrorMessage
		}
		if tt.msg == "" {
			if code != 0 {
				t.Errorf("api %d %v %q: code %d (%s), want accepted", tt.api, tt.rt, tt.name, code, derefString(msg))
			}
			continue
		}
		if code != kerr.InvalidRequest.Code || derefString(msg) != tt.msg {
			t.Errorf("api %d %v %q: code %d %q, want INVALID_REQUEST %q", tt.api, tt.rt, tt.name, code, derefString(msg), tt.msg)
		}
	}
}

// TestAlterConfigsOfBrokerSpelledOtherwise: a change to broker 1's configs
// named "01" or "+1" passes broker 1's own check and reaches the controller,
// which accepts any non-negative integer as Kafka 4.4's
// ControllerConfigurationValidator does, and stores it under the name as sent
// (ConfigurationControlManager keys the record by the request's name). Broker
// 1 acts only on "1" (DynamicConfigPublisher), so describing broker 1 shows
// none of it. A negative or non-integer name reaching the controller (through
// a forwarding broker, which checks nothing) is refused in Kafka's words.
func TestAlterConfigsOfBrokerSpelledOtherwise(t *testing.T) {
	for _, tt := range []struct {
		name        string
		incremental bool
		forwarded   bool   // as sent by another broker: no check here
		msg         string // "" accepted
	}{
		{name: "01"},
		{name: "+1"},
		{name: "01", incremental: true},
		{name: "+1", incremental: true},
		{name: "-1", forwarded: true, msg: "Invalid negative broker ID."},
		{name: "x", forwarded: true, msg: "Unable to parse broker name as a base 10 number."},
	} {
		h := newAdminHandlers(t)
		ctx := context.Background()
		if tt.forwarded {
			ctx = context.WithValue(ctx, onLinkKey{}, true)
		}
		var req kmsg.Request
		if tt.incremental {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, tt.name
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "log.retention.ms", kmsg.StringPtr("1000")
			rr.Configs = append(rr.Configs, c)
			r.Resources = append(r.Resources, rr)
			req = r
		} else {
			r := kmsg.NewPtrAlterConfigsRequest()
			rr := kmsg.NewAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, tt.name
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "log.retention.ms", kmsg.StringPtr("1000")
			rr.Configs = append(rr.Configs, c)
			r.Resources = append(r.Resources, rr)
			req = r
		}
		resp := h.Handle(ctx, &protocol.ConnInfo{}, &protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req})
		if resp.Wait != nil {
			resp = resp.Wait(ctx)
		}
		var code int16
		var msg *string
		switch r := resp.Msg.(type) {
		case *kmsg.AlterConfigsResponse:
			code, msg = r.Resources[0].ErrorCode, r.Resources[0].ErrorMessage
		case *kmsg.IncrementalAlterConfigsResponse:
			code, msg = r.Resources[0].ErrorCode, r.Resources[0].ErrorMessage
		}
		img := h.cluster.Image()
		if tt.msg != "" {
			if code != kerr.InvalidRequest.Code || derefString(msg) != tt.msg {
				t.Errorf("%q (incremental %v): code %d %q, want INVALID_REQUEST %q", tt.name, tt.incremental, code, derefString(msg), tt.msg)
			}
			continue
		}
		if code != 0 {
			t.Errorf("%q (incremental %v): code %d (%s), want accepted", tt.name, tt.incremental, code, derefString(msg))
			continue
		}
		if got := img.BrokerConfigs(tt.name)["log.retention.ms"]; got != "1000" {
			t.Errorf("%q (incremental %v): stored under %q as %q, want 1000", tt.name, tt.incremental, tt.name, got)
		}
		if got := img.BrokerConfigs("1"); len(got) != 0 {
			t.Errorf("%q (incremental %v): broker 1's own configs became %v, want none", tt.name, tt.incremental, got)
		}
		for _, e := range img.BrokerConfigEntries("1") {
			if e.Name == "log.retention.ms" && e.Source == metadata.SourceBroker {
				t.Errorf("%q (incremental %v): broker 1 describes log.retention.ms from its own configs", tt.name, tt.incremental)
			}
		}
	}
}

// TestDescribeTopicConfigsPerBrokerSynonym: a topic key's broker synonym set
// for the describing broker alone (DYNAMIC_BROKER_CONFIG) is the value of
// its topics that do not set the key, before the cluster-wide default, as
// Kafka 4.4's ConfigHelper.createTopicConfigEntry lists the broker's own
// dynamic configs first; another broker's value is not listed.
func TestDescribeTopicConfigsPerBrokerSynonym(t *testing.T) {
	h := newAdminHandlers(t) // broker 1
	pc := h.cluster.(waitingCluster).Cluster.(*planCluster)
	if err := pc.apply([]metadata.Record{
		&metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, Key: "log.retention.ms", Value: "5000"},
		&metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, ResourceName: "1", Key: "log.retention.ms", Value: "4242"},
		&metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, ResourceName: "1", Key: "log.segment.bytes", Value: "2097152"},
		&metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, ResourceName: "2", Key: "log.roll.ms", Value: "3000"},
		&metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "t_x", Key: "retention.ms", Value: "7"},
	}, false); err != nil {
		t.Fatal(err)
	}
	type synonym struct {
		name, value string
		source      kmsg.ConfigSource
	}
	const (
		perBroker = kmsg.ConfigSourceDynamicBrokerConfig
		cluster   = kmsg.ConfigSourceDynamicDefaultBrokerConfig
		builtIn   = kmsg.ConfigSourceDefaultConfig
		topic     = kmsg.ConfigSourceDynamicTopicConfig
	)
	for _, tt := range []struct {
		topic, key string
		want       []synonym // the value and its source first
	}{
		{"t", "retention.ms", []synonym{{"", "4242", perBroker},
			{"log.retention.ms", "4242", perBroker}, {"log.retention.ms", "5000", cluster}, {"log.retention.hours", "168", builtIn}}},
		{"t", "segment.bytes", []synonym{{"", "2097152", perBroker},
			{"log.segment.bytes", "2097152", perBroker}, {"log.segment.bytes", "1073741824", builtIn}}},
		{"t", "segment.ms", []synonym{{"", "604800000", builtIn}}},
		{"t_x", "retention.ms", []synonym{{"", "7", topic},
			{"retention.ms", "7", topic}, {"log.retention.ms", "4242", perBroker}, {"log.retention.ms", "5000", cluster}, {"log.retention.hours", "168", builtIn}}},
	} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.IncludeSynonyms = true
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, tt.topic, []string{tt.key}
		req.Resources = append(req.Resources, rr)
		res := serve(t, h, req).(*kmsg.DescribeConfigsResponse).Resources[0]
		if res.ErrorCode != 0 || len(res.Configs) != 1 {
			t.Fatalf("%s %s: code %d, %d configs", tt.topic, tt.key, res.ErrorCode, len(res.Configs))
		}
		c := res.Configs[0]
		got := []synonym{{"", derefString(c.Value), c.Source}}
		for _, s := range c.ConfigSynonyms {
			got = append(got, synonym{s.Name, derefString(s.Value), s.Source})
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s %s: %v, want %v", tt.topic, tt.key, got, tt.want)
		}
	}
}
