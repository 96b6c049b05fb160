package metadata

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

var idC = UUID{0xc, 1, 2, 3, 4, 5, 0x46, 7, 0x88, 9, 10, 11, 12, 13, 14, 15}

func mustApply(t *testing.T, img *Image, recs ...Record) *Image {
	t.Helper()
	out, err := ApplyAll(img, recs)
	if err != nil {
		t.Fatalf("ApplyAll: %v", err)
	}
	return out
}

func register(id int32, epoch int64) *RegisterBrokerRecord {
	return &RegisterBrokerRecord{BrokerID: id, Epoch: epoch, Host: "127.0.0.1", Port: 9090 + id}
}

// baseImage has brokers 1-3 (epoch 1), topic "orders" (idA, 2 partitions, RF 3,
// retention.ms=1000) and topic "logs" (idB, 1 partition).
func baseImage(t *testing.T) *Image {
	return mustApply(t, NewImage(),
		register(1, 1), register(2, 1), register(3, 1),
		&TopicRecord{Name: "orders", ID: idA, Configs: map[string]string{"retention.ms": "1000"}},
		&PartitionRecord{TopicID: idA, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1},
		&PartitionRecord{TopicID: idA, Partition: 1, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3, 1}, Leader: 2},
		&TopicRecord{Name: "logs", ID: idB},
		&PartitionRecord{TopicID: idB, Partition: 0, Replicas: []int32{3}, ISR: []int32{3}, Leader: 3},
	)
}

func TestApply(t *testing.T) {
	tests := []struct {
		name    string
		recs    []Record
		wantErr error
		check   func(t *testing.T, img *Image)
	}{
		{
			name: "register new broker",
			recs: []Record{&RegisterBrokerRecord{BrokerID: 4, Incarnation: idC, Epoch: 1, Host: "h", Port: 1, Rack: "r"}},
			check: func(t *testing.T, img *Image) {
				b := img.Broker(4)
				if b == nil || b.Addr() != "h:1" || b.Rack != "r" || b.Incarnation != idC || !img.IsLive(4) {
					t.Errorf("broker 4 = %+v", b)
				}
				if got := img.LiveBrokers(); !slices.Equal(got, []int32{1, 2, 3, 4}) {
					t.Errorf("LiveBrokers = %v", got)
				}
			},
		},
		{
			name:  "re-register with higher epoch",
			recs:  []Record{register(2, 5)},
			check: func(t *testing.T, img *Image) { wantEq(t, "epoch", img.Broker(2).Epoch, int64(5)) },
		},
		{name: "re-register with same epoch", recs: []Record{register(2, 1)}, wantErr: ErrStaleBrokerEpoch},
		{name: "register negative id", recs: []Record{register(-1, 1)}, wantErr: ErrInvalidRequest},
		{name: "register without host", recs: []Record{&RegisterBrokerRecord{BrokerID: 9, Port: 1}}, wantErr: ErrInvalidRequest},
		{name: "register bad port", recs: []Record{&RegisterBrokerRecord{BrokerID: 9, Host: "h", Port: 70000}}, wantErr: ErrInvalidRequest},
		{
			name: "fence and unfence",
			recs: []Record{&FenceBrokerRecord{BrokerID: 2, Epoch: 1}},
			check: func(t *testing.T, img *Image) {
				if img.IsLive(2) || !img.Broker(2).Fenced {
					t.Error("broker 2 is live after fencing")
				}
				wantEq(t, "live", img.LiveBrokers(), []int32{1, 3})
				img = mustApply(t, img, &UnfenceBrokerRecord{BrokerID: 2, Epoch: 1})
				if !img.IsLive(2) {
					t.Error("broker 2 is fenced after unfencing")
				}
			},
		},
		{name: "fence stale epoch", recs: []Record{&FenceBrokerRecord{BrokerID: 2, Epoch: 0}}, wantErr: ErrStaleBrokerEpoch},
		{name: "fence unknown broker", recs: []Record{&FenceBrokerRecord{BrokerID: 9, Epoch: 1}}, wantErr: ErrUnknownBroker},
		{name: "unfence unknown broker", recs: []Record{&UnfenceBrokerRecord{BrokerID: 9, Epoch: 1}}, wantErr: ErrUnknownBroker},
		{
			name: "create topic",
			recs: []Record{
				&TopicRecord{Name: "new", ID: idC, Configs: map[string]string{"cleanup.policy": "compact"}},
				&PartitionRecord{TopicID: idC, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
			},
			check: func(t *testing.T, img *Image) {
				tp := img.Topic("new")
				if tp == nil || img.TopicByID(idC) != tp || len(tp.Partitions) != 1 {
					t.Fatalf("topic new = %+v", tp)
				}
				wantEq(t, "policy", tp.Config.CleanupPolicy, CleanupCompact)
				wantEq(t, "retention", tp.Config.RetentionMs, int64(604800000))
				wantEq(t, "topics", img.NumTopics(), 3)
				wantEq(t, "partitions", img.NumPartitions(), 4)
			},
		},
		{name: "create existing name", recs: []Record{&TopicRecord{Name: "orders", ID: idC}}, wantErr: ErrTopicExists},
		{name: "create existing id", recs: []Record{&TopicRecord{Name: "other", ID: idA}}, wantErr: ErrTopicExists},
		{name: "create zero id", recs: []Record{&TopicRecord{Name: "other"}}, wantErr: ErrInvalidRequest},
		{name: "create bad name", recs: []Record{&TopicRecord{Name: "a b", ID: idC}}, wantErr: ErrInvalidTopic},
		{name: "create colliding name", recs: []Record{&TopicRecord{Name: "lo.gs", ID: idC}, &TopicRecord{Name: "lo_gs", ID: UUID{1}}}, wantErr: ErrInvalidTopic},
		{name: "create bad config", recs: []Record{&TopicRecord{Name: "x", ID: idC, Configs: map[string]string{"retention.ms": "soon"}}}, wantErr: ErrInvalidConfig},
		{name: "partition of unknown topic", recs: []Record{&PartitionRecord{TopicID: idC, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}, wantErr: ErrUnknownTopicID},
		{name: "partition index gap", recs: []Record{&PartitionRecord{TopicID: idB, Partition: 2, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}, wantErr: ErrInvalidPartitions},
		{name: "partition index repeat", recs: []Record{&PartitionRecord{TopicID: idB, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}, wantErr: ErrInvalidPartitions},
		{name: "partition no replicas", recs: []Record{&PartitionRecord{TopicID: idB, Partition: 1, Leader: NoLeader}}, wantErr: ErrInvalidReplicaAssignment},
		{name: "partition duplicate replicas", recs: []Record{&PartitionRecord{TopicID: idB, Partition: 1, Replicas: []int32{1, 1}, ISR: []int32{1}, Leader: 1}}, wantErr: ErrInvalidReplicaAssignment},
		{name: "partition isr outside replicas", recs: []Record{&PartitionRecord{TopicID: idB, Partition: 1, Replicas: []int32{1}, ISR: []int32{2}, Leader: 2}}, wantErr: ErrInvalidReplicaAssignment},
		{name: "partition leader outside isr", recs: []Record{&PartitionRecord{TopicID: idB, Partition: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 2}}, wantErr: ErrInvalidReplicaAssignment},
		{name: "partition negative epoch", recs: []Record{&PartitionRecord{TopicID: idB, Partition: 1, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: -1}}, wantErr: ErrInvalidRequest},
		{
			name: "partition change elects new leader",
			recs: []Record{&PartitionChangeRecord{TopicID: idA, Partition: 0, BasePartitionEpoch: 0, Leader: 2, LeaderEpoch: 1, ISR: []int32{2, 3}}},
			check: func(t *testing.T, img *Image) {
				p := img.Partition("orders", 0)
				if p.Leader != 2 || p.LeaderEpoch != 1 || p.PartitionEpoch != 1 || !slices.Equal(p.ISR, []int32{2, 3}) {
					t.Errorf("partition = %+v", p)
				}
				wantEq(t, "replicas", p.Replicas, []int32{1, 2, 3})
			},
		},
		{
			name: "partition change shrinks isr only",
			recs: []Record{&PartitionChangeRecord{TopicID: idA, Partition: 1, Leader: 2, ISR: []int32{2}}},
			check: func(t *testing.T, img *Image) {
				p := img.Partition("orders", 1)
				if p.Leader != 2 || p.LeaderEpoch != 0 || p.PartitionEpoch != 1 || !slices.Equal(p.ISR, []int32{2}) {
					t.Errorf("partition = %+v", p)
				}
			},
		},
		{name: "partition change stale", recs: []Record{&PartitionChangeRecord{TopicID: idA, Partition: 0, BasePartitionEpoch: 3, Leader: 1, ISR: []int32{1}}}, wantErr: ErrStalePartitionEpoch},
		{name: "partition change same epoch new leader", recs: []Record{&PartitionChangeRecord{TopicID: idA, Partition: 0, Leader: 2, ISR: []int32{2}}}, wantErr: ErrFencedLeaderEpoch},
		{name: "partition change leader not in isr", recs: []Record{&PartitionChangeRecord{TopicID: idA, Partition: 0, Leader: 2, LeaderEpoch: 1, ISR: []int32{3}}}, wantErr: ErrInvalidReplicaAssignment},
		{name: "partition change unknown partition", recs: []Record{&PartitionChangeRecord{TopicID: idA, Partition: 2, Leader: 1, ISR: []int32{1}}}, wantErr: ErrUnknownTopic},
		{name: "partition change unknown topic", recs: []Record{&PartitionChangeRecord{TopicID: idC, Leader: 1, ISR: []int32{1}}}, wantErr: ErrUnknownTopicID},
		{
			name: "remove topic",
			recs: []Record{&RemoveTopicRecord{TopicID: idA}},
			check: func(t *testing.T, img *Image) {
				if img.Topic("orders") != nil || img.TopicByID(idA) != nil {
					t.Error("orders still present")
				}
				wantEq(t, "partitions", img.NumPartitions(), 1)
				_ = mustApply(t, img, &TopicRecord{Name: "orders", ID: idC}) // the name is free again
			},
		},
		{name: "remove unknown topic", recs: []Record{&RemoveTopicRecord{TopicID: idC}}, wantErr: ErrUnknownTopicID},
		{
			name: "topic config set and delete",
			recs: []Record{
				&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders", Key: "segment.bytes", Value: "1048576"},
				&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders", Key: "retention.ms", Delete: true},
			},
			check: func(t *testing.T, img *Image) {
				tp := img.Topic("orders")
				wantEq(t, "overrides", len(tp.Overrides), 1)
				wantEq(t, "segment", tp.Config.SegmentBytes, int32(1048576))
				wantEq(t, "retention", tp.Config.RetentionMs, int64(604800000))
			},
		},
		{name: "topic config unknown topic", recs: []Record{&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "nope", Key: "retention.ms", Value: "1"}}, wantErr: ErrUnknownTopic},
		{name: "topic config bad value", recs: []Record{&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders", Key: "retention.ms", Value: "x"}}, wantErr: ErrInvalidConfig},
		{name: "topic config delete unknown key", recs: []Record{&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders", Key: "nope", Delete: true}}, wantErr: ErrInvalidConfig},
		{
			name: "cluster default changes every topic without override",
			recs: []Record{&ConfigRecord{ResourceType: ResourceBroker, Key: "log.retention.ms", Value: "5000"}},
			check: func(t *testing.T, img *Image) {
				wantEq(t, "orders keeps override", img.Topic("orders").Config.RetentionMs, int64(1000))
				wantEq(t, "logs follows default", img.Topic("logs").Config.RetentionMs, int64(5000))
				img = mustApply(t, img, &ConfigRecord{ResourceType: ResourceBroker, Key: "log.retention.ms", Delete: true})
				wantEq(t, "logs back to default", img.Topic("logs").Config.RetentionMs, int64(604800000))
				if img.BrokerConfigs("") != nil {
					t.Errorf("empty broker configs kept: %v", img.BrokerConfigs(""))
				}
			},
		},
		{
			name:  "per-broker config",
			recs:  []Record{&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "2", Key: "message.max.bytes", Value: "10"}},
			check: func(t *testing.T, img *Image) { wantEq(t, "cfg", img.BrokerConfigs("2")["message.max.bytes"], "10") },
		},
		{
			// Kept under the name as given, as Kafka's controller keeps it.
			name:  "broker config name spelled otherwise",
			recs:  []Record{&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "02", Key: "log.retention.ms", Value: "1"}},
			check: func(t *testing.T, img *Image) { wantEq(t, "cfg", img.BrokerConfigs("02")["log.retention.ms"], "1") },
		},
		{name: "broker config name not an integer", recs: []Record{&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "2x", Key: "log.retention.ms", Value: "1"}}, wantErr: ErrInvalidRequest},
		{name: "broker config negative name", recs: []Record{&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "-2", Key: "log.retention.ms", Value: "1"}}, wantErr: ErrInvalidRequest},
		{name: "broker config topic key", recs: []Record{&ConfigRecord{ResourceType: ResourceBroker, Key: "retention.ms", Value: "1"}}, wantErr: ErrInvalidRequest},
		{name: "config unknown resource type", recs: []Record{&ConfigRecord{ResourceType: 9, Key: "retention.ms", Value: "1"}}, wantErr: ErrInvalidRequest},
		{
			name:  "producer ids advance",
			recs:  []Record{&ProducerIDsRecord{BrokerID: 1, BrokerEpoch: 1, NextProducerID: 1000}},
			check: func(t *testing.T, img *Image) { wantEq(t, "next", img.NextProducerID(), int64(1000)) },
		},
		{name: "producer ids must advance", recs: []Record{&ProducerIDsRecord{NextProducerID: 0}}, wantErr: ErrProducerIDs},
		{
			name: "reassignment starts, an ISR change keeps it, it completes",
			recs: []Record{
				&ReassignmentRecord{TopicID: idA, Partition: 0, Replicas: []int32{3, 4, 1, 2}, Adding: []int32{4},
					Removing: []int32{1, 2}, ISR: []int32{1, 2, 3}, Leader: 1},
				&PartitionChangeRecord{TopicID: idA, Partition: 0, BasePartitionEpoch: 1, Leader: 1, ISR: []int32{1, 2, 3, 4}},
			},
			check: func(t *testing.T, img *Image) {
				p := img.Partition("orders", 0)
				wantEq(t, "reassigning", p.Reassigning(), true)
				wantEq(t, "target", fmt.Sprint(p.TargetReplicas()), "[3 4]")
				wantEq(t, "original", fmt.Sprint(p.OriginalReplicas()), "[3 1 2]")
				img = mustApply(t, img, &ReassignmentRecord{TopicID: idA, Partition: 0, BasePartitionEpoch: 2,
					Replicas: []int32{3, 4}, ISR: []int32{3, 4}, Leader: 3, LeaderEpoch: 1})
				p = img.Partition("orders", 0)
				wantEq(t, "done", p.Reassigning(), false)
				wantEq(t, "epoch", p.PartitionEpoch, int32(3))
			},
		},
		{
			name: "unregister a fenced broker",
			recs: []Record{&FenceBrokerRecord{BrokerID: 3, Epoch: 1}, &UnregisterBrokerRecord{BrokerID: 3, Epoch: 1}},
			check: func(t *testing.T, img *Image) {
				wantEq(t, "gone", img.Broker(3) == nil, true)
				wantEq(t, "replicas kept", fmt.Sprint(img.Partition("logs", 0).Replicas), "[3]")
			},
		},
		{name: "unregister a live broker", recs: []Record{&UnregisterBrokerRecord{BrokerID: 3, Epoch: 1}}, wantErr: ErrInvalidRequest},
		{name: "unregister an unknown broker", recs: []Record{&UnregisterBrokerRecord{BrokerID: 9, Epoch: 1}}, wantErr: ErrUnknownBroker},
		{
			name: "reassignment removing every replica",
			recs: []Record{&ReassignmentRecord{TopicID: idA, Partition: 0, Replicas: []int32{1, 2, 3},
				Removing: []int32{1, 2, 3}, ISR: []int32{1}, Leader: 1}},
			wantErr: ErrInvalidReplicaAssignment,
		},
		{
			name: "reassignment adding a non-replica",
			recs: []Record{&ReassignmentRecord{TopicID: idA, Partition: 0, Replicas: []int32{1, 2, 3},
				Adding: []int32{4}, ISR: []int32{1}, Leader: 1}},
			wantErr: ErrInvalidReplicaAssignment,
		},
		{
			name: "reassignment on a stale epoch",
			recs: []Record{&ReassignmentRecord{TopicID: idA, Partition: 0, BasePartitionEpoch: 3, Replicas: []int32{1, 2},
				ISR: []int32{1}, Leader: 1}},
			wantErr: ErrStalePartitionEpoch,
		},
		{name: "nil record", recs: []Record{nil}, wantErr: ErrInvalidRequest},
		{
			name:    "batch is all or nothing",
			recs:    []Record{&TopicRecord{Name: "fine", ID: idC}, &RemoveTopicRecord{TopicID: UUID{9}}},
			wantErr: ErrUnknownTopicID,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := baseImage(t)
			before := EncodeSnapshot(base)
			got, err := ApplyAll(base, tt.recs)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if got != base {
					t.Fatal("a failed ApplyAll returned a new image")
				}
			} else if err != nil {
				t.Fatalf("err = %v", err)
			}
			if string(EncodeSnapshot(base)) != string(before) {
				t.Fatal("ApplyAll modified its input image")
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

func wantEq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func equal(a, b any) bool {
	if as, ok := a.([]int32); ok {
		return slices.Equal(as, b.([]int32))
	}
	return a == b
}

// TestApplySharesUnchangedState checks copy on write: an unrelated topic, its
// partitions and unchanged brokers are the same pointers in the new image.
func TestApplySharesUnchangedState(t *testing.T) {
	base := baseImage(t)
	next := mustApply(t, base,
		&PartitionChangeRecord{TopicID: idA, Partition: 0, Leader: 1, ISR: []int32{1, 2}},
		&PartitionChangeRecord{TopicID: idA, Partition: 0, BasePartitionEpoch: 1, Leader: 1, ISR: []int32{1}})
	if next.Topic("logs") != base.Topic("logs") {
		t.Error("unrelated topic was copied")
	}
	if next.Topic("orders") == base.Topic("orders") {
		t.Error("changed topic was not copied")
	}
	if next.Partition("orders", 1) != base.Partition("orders", 1) {
		t.Error("unchanged partition was copied")
	}
	if next.Broker(1) != base.Broker(1) {
		t.Error("broker was copied")
	}
	if reflect.ValueOf(next.names).Pointer() != reflect.ValueOf(base.names).Pointer() {
		t.Error("the name index was copied for a partition change")
	}
	for s := range next.shards {
		same := reflect.ValueOf(next.shards[s]).Pointer() == reflect.ValueOf(base.shards[s]).Pointer()
		if same == (s == shardOf(idA)) {
			t.Errorf("shard %d: shared=%v; only the shard of the changed topic may be copied", s, same)
		}
	}
	if p := next.Partition("orders", 0); p.PartitionEpoch != 2 || !slices.Equal(p.ISR, []int32{1}) {
		t.Errorf("partition after two changes = %+v", p)
	}
	if p := base.Partition("orders", 0); p.PartitionEpoch != 0 || len(p.ISR) != 3 {
		t.Errorf("base partition changed: %+v", p)
	}
}

func TestCollidingTopic(t *testing.T) {
	img := baseImage(t)
	if other, ok := img.CollidingTopic("log_s"); ok {
		t.Errorf("log_s collides with %q", other)
	}
	img = mustApply(t, img, &TopicRecord{Name: "a.b", ID: idC})
	if other, ok := img.CollidingTopic("a_b"); !ok || other != "a.b" {
		t.Errorf("CollidingTopic(a_b) = %q, %v", other, ok)
	}
	if _, ok := img.CollidingTopic("a.b"); ok {
		t.Error("a topic collides with itself")
	}
}

func TestConfigEntries(t *testing.T) {
	img := mustApply(t, baseImage(t),
		&ConfigRecord{ResourceType: ResourceBroker, Key: "log.retention.ms", Value: "5000"},
		&ConfigRecord{ResourceType: ResourceBroker, Key: "log.segment.bytes", Value: "2000"},
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "1", Key: "log.segment.bytes", Value: "3000"})
	es, err := img.TopicConfigEntries("orders", NoBroker)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]ConfigEntry{}
	for _, e := range es {
		byName[e.Name] = e
	}
	if _, ok := byName[TopicInternalSegmentBytes]; ok || len(es) != len(topicConfigDefs)-1 {
		t.Errorf("%d entries, want %d: all but %s", len(es), len(topicConfigDefs)-1, TopicInternalSegmentBytes)
	}
	r := byName["retention.ms"]
	if r.Value != "1000" || r.Source != SourceTopic || r.IsDefault || !slices.Equal(r.Synonyms, []ConfigSynonym{
		{"retention.ms", "1000", SourceTopic}, {"log.retention.ms", "5000", SourceClusterDefault}, {"log.retention.hours", "168", SourceDefault}}) {
		t.Errorf("retention.ms = %+v", r)
	}
	// Kafka 4.4 lists no synonym for the built-in default of these keys
	// (kafka-configs --describe --all side by side, session 17).
	for _, key := range []string{"segment.ms", "segment.jitter.ms", "flush.ms"} {
		if e := byName[key]; e.Source != SourceDefault || e.Value == "" || len(e.Synonyms) != 0 {
			t.Errorf("%s = %+v, want the default with no synonyms", key, e)
		}
	}
	if s := byName["segment.bytes"]; s.Value != "2000" || s.Source != SourceClusterDefault || s.Type != ConfigTypeInt {
		t.Errorf("segment.bytes = %+v", s)
	}
	// Synonyms as Kafka 4.4.0 listed them side by side (interop/cmd/configcompare):
	// the built-in default under the broker key, none for a topic-only key.
	if c := byName["cleanup.policy"]; c.Value != "delete" || !c.IsDefault || c.Type != ConfigTypeList ||
		!slices.Equal(c.Synonyms, []ConfigSynonym{{"log.cleanup.policy", "delete", SourceDefault}}) || c.Documentation == "" {
		t.Errorf("cleanup.policy = %+v", c)
	}
	if r := byName["remote.storage.enable"]; r.Value != "false" || r.Source != SourceDefault || len(r.Synonyms) != 0 {
		t.Errorf("remote.storage.enable = %+v", r)
	}
	internal := mustApply(t, img, &ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders", Key: TopicInternalSegmentBytes, Value: "4096"})
	es, _ = internal.TopicConfigEntries("orders", NoBroker)
	if i := slices.IndexFunc(es, func(e ConfigEntry) bool { return e.Name == TopicInternalSegmentBytes }); i < 0 ||
		es[i].Value != "4096" || es[i].Source != SourceTopic {
		t.Errorf("internal.segment.bytes set: entries %+v", es)
	}
	if got := internal.Topic("orders").Config.SegmentSize(); got != 4096 {
		t.Errorf("segment size with internal.segment.bytes = %d, want 4096", got)
	}
	if _, err := img.TopicConfigEntries("nope", NoBroker); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("unknown topic: %v", err)
	}
	for _, tt := range []struct {
		resource, key, value string
		source               ConfigSource
	}{
		{"1", "log.segment.bytes", "3000", SourceBroker},
		{"2", "log.segment.bytes", "2000", SourceClusterDefault},
		{"", "log.segment.bytes", "2000", SourceClusterDefault},
	} {
		found := false
		for _, e := range img.BrokerConfigEntries(tt.resource) {
			if e.Name == tt.key {
				found = true
				if e.Value != tt.value || e.Source != tt.source {
					t.Errorf("broker %q %s = %+v, want %s from %d", tt.resource, tt.key, e, tt.value, tt.source)
				}
			}
		}
		if !found {
			t.Errorf("broker %q: no entry %s", tt.resource, tt.key)
		}
	}
	// The cluster-wide default lists only the keys set there, each with no
	// default synonym (Kafka 4.4.0).
	var names []string
	for _, e := range img.BrokerConfigEntries("") {
		names = append(names, e.Name)
		if len(e.Synonyms) != 1 || e.Synonyms[0].Source != SourceClusterDefault {
			t.Errorf("broker \"\" %s synonyms %+v", e.Name, e.Synonyms)
		}
	}
	if !slices.Equal(names, []string{"log.retention.ms", "log.segment.bytes"}) {
		t.Errorf("broker \"\" lists %v", names)
	}
}

// TestConfigEntriesCoarserDefaults: Kafka defines log.retention.ms,
// log.roll.ms, log.roll.jitter.ms and log.flush.interval.ms without a default;
// theirs lies in a coarser synonym (log.retention.hours, ...). As its
// ConfigHelper lists them, a broker describes such a key set nowhere as null
// with no synonyms, and a key set somewhere lists the coarser default after the
// values set (on the broker, and under the topic key); the cluster default
// resource lists only its own values.
func TestConfigEntriesCoarserDefaults(t *testing.T) {
	img := mustApply(t, baseImage(t),
		&ConfigRecord{ResourceType: ResourceBroker, Key: "log.retention.ms", Value: "5000"},
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "1", Key: "log.roll.ms", Value: "3000"})
	find := func(es []ConfigEntry, name string) ConfigEntry {
		t.Helper()
		for _, e := range es {
			if e.Name == name {
				return e
			}
		}
		t.Fatalf("no entry %s", name)
		return ConfigEntry{}
	}
	topic, err := img.TopicConfigEntries("orders", NoBroker)
	if err != nil {
		t.Fatal(err)
	}
	broker1, broker2, cluster := img.BrokerConfigEntries("1"), img.BrokerConfigEntries("2"), img.BrokerConfigEntries("")
	for _, tt := range []struct {
		what     string
		e        ConfigEntry
		value    string
		null     bool
		source   ConfigSource
		synonyms []ConfigSynonym
	}{
		{"topic retention.ms", find(topic, "retention.ms"), "1000", false, SourceTopic, []ConfigSynonym{
			{"retention.ms", "1000", SourceTopic}, {"log.retention.ms", "5000", SourceClusterDefault}, {"log.retention.hours", "168", SourceDefault}}},
		{"topic segment.ms", find(topic, "segment.ms"), "604800000", false, SourceDefault, nil},
		{"broker 1 log.retention.ms", find(broker1, "log.retention.ms"), "5000", false, SourceClusterDefault, []ConfigSynonym{
			{"log.retention.ms", "5000", SourceClusterDefault}, {"log.retention.hours", "168", SourceDefault}}},
		{"broker 1 log.roll.ms", find(broker1, "log.roll.ms"), "3000", false, SourceBroker, []ConfigSynonym{
			{"log.roll.ms", "3000", SourceBroker}, {"log.roll.hours", "168", SourceDefault}}},
		{"broker 2 log.roll.ms", find(broker2, "log.roll.ms"), "", true, SourceDefault, nil},
		{"broker 2 log.roll.jitter.ms", find(broker2, "log.roll.jitter.ms"), "", true, SourceDefault, nil},
		{"broker 2 log.flush.interval.ms", find(broker2, "log.flush.interval.ms"), "", true, SourceDefault, nil},
		{"cluster log.retention.ms", find(cluster, "log.retention.ms"), "5000", false, SourceClusterDefault, []ConfigSynonym{
			{"log.retention.ms", "5000", SourceClusterDefault}}},
	} {
		e := tt.e
		if e.Value != tt.value || e.NullValue != tt.null || e.Source != tt.source || !slices.Equal(e.Synonyms, tt.synonyms) {
			t.Errorf("%s = %q (null %v) from %d, synonyms %v; want %q (null %v) from %d, synonyms %v",
				tt.what, e.Value, e.NullValue, e.Source, e.Synonyms, tt.value, tt.null, tt.source, tt.synonyms)
		}
	}
}
