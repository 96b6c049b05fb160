package controller

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

var (
	idOrders = metadata.UUID{1, 0, 0, 0, 0, 0, 0x40, 0, 0x80}
	idLogs   = metadata.UUID{2, 0, 0, 0, 0, 0, 0x40, 0, 0x80}
)

func TestPlanCreateTopics(t *testing.T) {
	three := clusterImage(t, 3)
	tests := []struct {
		name  string
		img   *metadata.Image
		reqs  []CreateTopic
		errs  []error // per request; nil = success
		check func(t *testing.T, img *metadata.Image, res []CreateTopicResult)
	}{
		{
			name: "defaults: one partition, rf min(3, live)",
			img:  clusterImage(t, 5),
			reqs: []CreateTopic{{Name: "a", NumPartitions: -1, ReplicationFactor: -1}},
			errs: []error{nil},
			check: func(t *testing.T, img *metadata.Image, res []CreateTopicResult) {
				if res[0].NumPartitions != 1 || res[0].ReplicationFactor != 3 || res[0].ID.IsZero() {
					t.Errorf("result = %+v", res[0])
				}
				p := img.Partition("a", 0)
				if len(p.Replicas) != 3 || p.Leader != p.Replicas[0] || !slices.Equal(p.ISR, p.Replicas) || p.LeaderEpoch != 0 {
					t.Errorf("partition = %+v", p)
				}
			},
		},
		{
			name: "default rf on one broker",
			img:  clusterImage(t, 1),
			reqs: []CreateTopic{{Name: "a", NumPartitions: 4, ReplicationFactor: -1}},
			errs: []error{nil},
			check: func(t *testing.T, img *metadata.Image, res []CreateTopicResult) {
				if res[0].ReplicationFactor != 1 || len(img.Topic("a").Partitions) != 4 {
					t.Errorf("result = %+v", res[0])
				}
			},
		},
		{
			name: "leaders and replicas spread evenly",
			img:  three,
			reqs: []CreateTopic{{Name: "a", NumPartitions: 6, ReplicationFactor: 2}},
			errs: []error{nil},
			check: func(t *testing.T, img *metadata.Image, res []CreateTopicResult) {
				leaders, replicas := map[int32]int{}, map[int32]int{}
				for _, p := range img.Topic("a").Partitions {
					leaders[p.Leader]++
					for _, r := range p.Replicas {
						replicas[r]++
					}
				}
				for id := int32(1); id <= 3; id++ {
					if leaders[id] != 2 || replicas[id] != 4 {
						t.Errorf("broker %d leads %d and holds %d replicas, want 2 and 4", id, leaders[id], replicas[id])
					}
				}
			},
		},
		{
			name: "fenced brokers get no replicas",
			img:  fence(t, clusterImage(t, 3), 2),
			reqs: []CreateTopic{{Name: "a", NumPartitions: 4, ReplicationFactor: 2}},
			errs: []error{nil},
			check: func(t *testing.T, img *metadata.Image, res []CreateTopicResult) {
				for _, p := range img.Topic("a").Partitions {
					if slices.Contains(p.Replicas, 2) {
						t.Errorf("partition %d on fenced broker: %v", p.Index, p.Replicas)
					}
				}
			},
		},
		{
			name: "configs are validated and applied",
			img:  three,
			reqs: []CreateTopic{
				{Name: "good", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"cleanup.policy": "compact", "retention.ms": "100"}},
				{Name: "bad", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "100", "segment.bytes": "1"}},
				{Name: "unknown", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"no.such": "1"}},
			},
			errs: []error{nil, metadata.ErrInvalidConfig, metadata.ErrInvalidConfig},
			check: func(t *testing.T, img *metadata.Image, res []CreateTopicResult) {
				if c := img.Topic("good").Config; c.CleanupPolicy != metadata.CleanupCompact || c.RetentionMs != 100 {
					t.Errorf("config = %+v", c)
				}
				for _, e := range res[0].Configs {
					if e.Name == "retention.ms" && (e.Value != "100" || e.Source != metadata.SourceTopic) {
						t.Errorf("described retention.ms = %+v", e)
					}
				}
			},
		},
		{
			name: "rf above live brokers",
			img:  fence(t, clusterImage(t, 3), 3),
			reqs: []CreateTopic{{Name: "a", NumPartitions: 1, ReplicationFactor: 3}},
			errs: []error{metadata.ErrInvalidReplicationFactor},
		},
		{
			name: "no live brokers",
			img:  metadata.NewImage(),
			reqs: []CreateTopic{{Name: "a", NumPartitions: 1, ReplicationFactor: -1}},
			errs: []error{metadata.ErrInvalidReplicationFactor},
		},
		{
			name: "bad counts",
			img:  three,
			reqs: []CreateTopic{
				{Name: "rf0", NumPartitions: 1, ReplicationFactor: 0},
				{Name: "rf-2", NumPartitions: 1, ReplicationFactor: -2},
				{Name: "p0", NumPartitions: 0, ReplicationFactor: 1},
				{Name: "p-2", NumPartitions: -2, ReplicationFactor: 1},
			},
			errs: []error{metadata.ErrInvalidReplicationFactor, metadata.ErrInvalidReplicationFactor,
				metadata.ErrInvalidPartitions, metadata.ErrInvalidPartitions},
		},
		// More than 10,000 partitions in one request refuse every topic of it
		// (Kafka 4.4.0 side by side, interop/cmd/configcompare: POLICY_VIOLATION
		// for 10,001 and 70,000 partitions in one topic, 6,000 + 6,000 + 1 and
		// 9,999 + 1 + 1 in three).
		{
			name: "above the request's limit",
			img:  three,
			reqs: []CreateTopic{
				{Name: "a", NumPartitions: 9999, ReplicationFactor: 1},
				{Name: "b", NumPartitions: 1, ReplicationFactor: 1},
				{Name: "c", NumPartitions: -1, ReplicationFactor: 1},
			},
			errs: []error{metadata.ErrPolicyViolation, metadata.ErrPolicyViolation, metadata.ErrPolicyViolation},
		},
		{
			name: "one topic above the request's limit",
			img:  three,
			reqs: []CreateTopic{{Name: "huge", NumPartitions: metadata.MaxPartitions + 1, ReplicationFactor: 1}},
			errs: []error{metadata.ErrPolicyViolation},
		},
		{
			name: "names",
			img:  withTopic(t, three, "orders.v1", idOrders, nil, []int32{1}),
			reqs: []CreateTopic{
				{Name: "orders.v1", NumPartitions: 1, ReplicationFactor: 1},
				{Name: "orders_v1", NumPartitions: 1, ReplicationFactor: 1},
				{Name: "bad name", NumPartitions: 1, ReplicationFactor: 1},
				{Name: "..", NumPartitions: 1, ReplicationFactor: 1},
				{Name: "x.y", NumPartitions: 1, ReplicationFactor: 1},
				{Name: "x_y", NumPartitions: 1, ReplicationFactor: 1},
				{Name: "dup", NumPartitions: 1, ReplicationFactor: 1},
				{Name: "dup", NumPartitions: 1, ReplicationFactor: 1},
			},
			errs: []error{metadata.ErrTopicExists, metadata.ErrInvalidTopic, metadata.ErrInvalidTopic,
				metadata.ErrInvalidTopic, nil, metadata.ErrInvalidTopic, metadata.ErrInvalidRequest, metadata.ErrInvalidRequest},
		},
		{
			name: "manual assignment",
			img:  fence(t, clusterImage(t, 4), 4),
			reqs: []CreateTopic{
				{Name: "ok", NumPartitions: -1, ReplicationFactor: -1, Assignment: inOrder([]int32{2, 1}, []int32{4, 3})},
				{Name: "with-counts", NumPartitions: 2, ReplicationFactor: -1, Assignment: inOrder([]int32{1}, []int32{2})},
				{Name: "uneven", NumPartitions: -1, ReplicationFactor: -1, Assignment: inOrder([]int32{1, 2}, []int32{3})},
				{Name: "unknown-broker", NumPartitions: -1, ReplicationFactor: -1, Assignment: inOrder([]int32{1, 9})},
				{Name: "repeated-broker", NumPartitions: -1, ReplicationFactor: -1, Assignment: inOrder([]int32{1, 1})},
				{Name: "empty", NumPartitions: -1, ReplicationFactor: -1, Assignment: inOrder([]int32{})},
				{Name: "all-fenced", NumPartitions: -1, ReplicationFactor: -1, Assignment: inOrder([]int32{4})},
			},
			errs: []error{nil, metadata.ErrInvalidRequest, metadata.ErrInvalidReplicaAssignment, metadata.ErrInvalidReplicaAssignment,
				metadata.ErrInvalidReplicaAssignment, metadata.ErrInvalidReplicaAssignment, metadata.ErrInvalidReplicaAssignment},
			check: func(t *testing.T, img *metadata.Image, res []CreateTopicResult) {
				p0, p1 := img.Partition("ok", 0), img.Partition("ok", 1)
				if p0.Leader != 2 || !slices.Equal(p0.Replicas, []int32{2, 1}) || !slices.Equal(p0.ISR, []int32{2, 1}) {
					t.Errorf("partition 0 = %+v", p0)
				}
				if p1.Leader != 3 || !slices.Equal(p1.ISR, []int32{3}) {
					t.Errorf("partition 1 (fenced preferred leader) = %+v", p1)
				}
				if res[0].ReplicationFactor != 2 || res[0].NumPartitions != 2 {
					t.Errorf("result = %+v", res[0])
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, res := PlanCreateTopics(tt.img, tt.reqs, 1, testRand(1), nil, true)
			if len(res) != len(tt.reqs) {
				t.Fatalf("%d results for %d requests", len(res), len(tt.reqs))
			}
			for i, r := range res {
				if r.Name != tt.reqs[i].Name || !errors.Is(r.Err, tt.errs[i]) || (r.Err == nil) != (tt.errs[i] == nil) {
					t.Errorf("result %d (%s): err = %v, want %v", i, r.Name, r.Err, tt.errs[i])
				}
			}
			img := apply(t, tt.img, recs...)
			for i, r := range res {
				if (img.Topic(r.Name) != nil) != (r.Err == nil) && !errors.Is(r.Err, metadata.ErrTopicExists) &&
					!errors.Is(r.Err, metadata.ErrInvalidRequest) {
					t.Errorf("result %d (%s): err %v but topic present = %v", i, r.Name, r.Err, img.Topic(r.Name) != nil)
				}
			}
			if tt.check != nil {
				tt.check(t, img, res)
			}
		})
	}
}

func TestPlanCreateTopicsSpreadsAcrossTopics(t *testing.T) {
	img := clusterImage(t, 3)
	leaders := map[int32]int{}
	for i := range 6 {
		recs, res := PlanCreateTopics(img, []CreateTopic{{Name: fmt.Sprint("t", i), NumPartitions: 1, ReplicationFactor: 1}}, 1, testRand(byte(i)), nil, true)
		if res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		img = apply(t, img, recs...)
		leaders[img.Partition(res[0].Name, 0).Leader]++
	}
	for id := int32(1); id <= 3; id++ {
		if leaders[id] != 2 {
			t.Errorf("single-partition topics: broker %d leads %d, want 2 (%v)", id, leaders[id], leaders)
		}
	}
}

func TestPlaceReplicas(t *testing.T) {
	for b := 1; b <= 6; b++ {
		live := make([]int32, b)
		for i := range live {
			live[i] = int32(10 + i)
		}
		for rf := 1; rf <= b; rf++ {
			for n := 1; n <= 3*b; n++ {
				for start := 0; start < 2*b; start++ {
					out := placeReplicas(live, n, rf, start)
					leaders, replicas := map[int32]int{}, map[int32]int{}
					for p, rs := range out {
						if len(rs) != rf {
							t.Fatalf("b=%d rf=%d n=%d: partition %d has %v", b, rf, n, p, rs)
						}
						for j, r := range rs {
							if !slices.Contains(live, r) || slices.Contains(rs[:j], r) {
								t.Fatalf("b=%d rf=%d: partition %d replicas %v", b, rf, p, rs)
							}
							replicas[r]++
						}
						leaders[rs[0]]++
					}
					if spread(leaders, live) > 1 {
						t.Fatalf("b=%d rf=%d n=%d start=%d: leaders %v", b, rf, n, start, leaders)
					}
					if start%b == 0 && n%b == 0 && spread(replicas, live) != 0 {
						t.Fatalf("b=%d rf=%d n=%d start=%d: whole rounds but replicas %v", b, rf, n, start, replicas)
					}
				}
			}
		}
	}
}

func spread(counts map[int32]int, ids []int32) int {
	lo, hi := counts[ids[0]], counts[ids[0]]
	for _, id := range ids {
		lo, hi = min(lo, counts[id]), max(hi, counts[id])
	}
	return hi - lo
}

func TestPlanDeleteTopics(t *testing.T) {
	img := withTopic(t, withTopic(t, clusterImage(t, 1), "orders", idOrders, nil, []int32{1}), "logs", idLogs, nil, []int32{1})
	tests := []struct {
		name string
		refs []TopicRef
		errs []error
	}{
		{"by name and id", []TopicRef{{Name: "orders"}, {ID: idLogs}}, []error{nil, nil}},
		{"unknown", []TopicRef{{Name: "nope"}, {ID: metadata.UUID{9}}, {}}, []error{metadata.ErrUnknownTopic, metadata.ErrUnknownTopicID, metadata.ErrInvalidRequest}},
		{"same topic twice", []TopicRef{{Name: "orders"}, {ID: idOrders}, {Name: "logs"}}, []error{metadata.ErrInvalidRequest, metadata.ErrInvalidRequest, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, res := PlanDeleteTopics(img, tt.refs)
			after := apply(t, img, recs...)
			for i, r := range res {
				if !errors.Is(r.Err, tt.errs[i]) || (r.Err == nil) != (tt.errs[i] == nil) {
					t.Errorf("result %d: err = %v, want %v", i, r.Err, tt.errs[i])
				}
				if r.Err == nil && (after.Topic(r.Name) != nil || r.ID.IsZero()) {
					t.Errorf("result %d: %s (%s) not deleted", i, r.Name, r.ID)
				}
			}
			if len(recs) != countNil(tt.errs) {
				t.Errorf("%d records, want %d", len(recs), countNil(tt.errs))
			}
		})
	}
}

func countNil(errs []error) int {
	n := 0
	for _, e := range errs {
		if e == nil {
			n++
		}
	}
	return n
}

func TestPlanCreatePartitions(t *testing.T) {
	base := withTopic(t, clusterImage(t, 3), "orders", idOrders, nil, []int32{1, 2}, []int32{2, 3})
	tests := []struct {
		name  string
		img   *metadata.Image
		reqs  []CreatePartitions
		errs  []error
		check func(t *testing.T, img *metadata.Image)
	}{
		{
			name: "grow keeps rf",
			img:  base,
			reqs: []CreatePartitions{{Topic: "orders", Count: 5}},
			errs: []error{nil},
			check: func(t *testing.T, img *metadata.Image) {
				tp := img.Topic("orders")
				if len(tp.Partitions) != 5 {
					t.Fatalf("%d partitions", len(tp.Partitions))
				}
				for _, p := range tp.Partitions[2:] {
					if len(p.Replicas) != 2 || p.Leader != p.Replicas[0] {
						t.Errorf("new partition %+v", p)
					}
				}
			},
		},
		{
			name: "manual assignment",
			img:  base,
			reqs: []CreatePartitions{{Topic: "orders", Count: 3, Assignment: [][]int32{{3, 1}}}},
			errs: []error{nil},
			check: func(t *testing.T, img *metadata.Image) {
				if p := img.Partition("orders", 2); p.Leader != 3 || !slices.Equal(p.Replicas, []int32{3, 1}) {
					t.Errorf("partition 2 = %+v", p)
				}
			},
		},
		{name: "same count", img: base, reqs: []CreatePartitions{{Topic: "orders", Count: 2}}, errs: []error{metadata.ErrInvalidPartitions}},
		{name: "fewer", img: base, reqs: []CreatePartitions{{Topic: "orders", Count: 1}}, errs: []error{metadata.ErrInvalidPartitions}},
		// More than 10,000 new partitions in one request refuse every topic of it
		// (Kafka 4.4.0 side by side, interop/cmd/configcompare: POLICY_VIOLATION
		// for +10,001 and to 70,000 on one topic, +6,000 on each of two).
		{name: "too many", img: base, reqs: []CreatePartitions{{Topic: "orders", Count: metadata.MaxPartitions + 1}}, errs: []error{metadata.ErrPolicyViolation}},
		{name: "too many over two topics", img: withTopic(t, base, "audit", metadata.UUID{9}, nil, []int32{1}),
			reqs: []CreatePartitions{{Topic: "orders", Count: 6002}, {Topic: "audit", Count: 6001}},
			errs: []error{metadata.ErrPolicyViolation, metadata.ErrPolicyViolation}},
		{name: "unknown topic", img: base, reqs: []CreatePartitions{{Topic: "nope", Count: 3}}, errs: []error{metadata.ErrUnknownTopic}},
		{name: "assignment count", img: base, reqs: []CreatePartitions{{Topic: "orders", Count: 4, Assignment: [][]int32{{1, 2}}}}, errs: []error{metadata.ErrInvalidReplicaAssignment}},
		{name: "assignment rf", img: base, reqs: []CreatePartitions{{Topic: "orders", Count: 3, Assignment: [][]int32{{1}}}}, errs: []error{metadata.ErrInvalidReplicaAssignment}},
		{name: "not enough live brokers", img: fence(t, base, 2, 3), reqs: []CreatePartitions{{Topic: "orders", Count: 3}}, errs: []error{metadata.ErrInvalidReplicationFactor}},
		{name: "duplicate", img: base, reqs: []CreatePartitions{{Topic: "orders", Count: 3}, {Topic: "orders", Count: 4}}, errs: []error{metadata.ErrInvalidRequest, metadata.ErrInvalidRequest}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, res := PlanCreatePartitions(tt.img, tt.reqs, nil)
			for i, r := range res {
				if !errors.Is(r.Err, tt.errs[i]) || (r.Err == nil) != (tt.errs[i] == nil) {
					t.Errorf("result %d: err = %v, want %v", i, r.Err, tt.errs[i])
				}
			}
			img := apply(t, tt.img, recs...)
			if tt.check != nil {
				tt.check(t, img)
			}
			if countNil(tt.errs) == 0 && len(recs) != 0 {
				t.Errorf("records despite failure: %v", recs)
			}
		})
	}
}

// TestAdminMessagesAsKafka: the refusals Kafka's admin tools print
// (kafka-topics, kafka-reassign-partitions, kafka-configs, kafka-cluster,
// kafka-leader-election) carry Kafka 4.4's code and message, its controller's,
// taken from a Kafka 4.4 node side by side; a manual assignment's partition is
// named by its index in the topic, not in the request.
func TestAdminMessagesAsKafka(t *testing.T) {
	// Brokers 1-4 registered, 3 and 4 fenced; orders has two partitions of two replicas.
	img := withTopic(t, fence(t, clusterImage(t, 4), 3, 4), "orders", idOrders, nil, []int32{1, 2}, []int32{2, 1})
	create := func(assignment ...[]int32) error {
		_, res := PlanCreateTopics(img, []CreateTopic{{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignment: inOrder(assignment...)}}, 1, testRand(1), nil, true)
		return res[0].Err
	}
	grow := func(count int32, assignment ...[]int32) error {
		_, res := PlanCreatePartitions(img, []CreatePartitions{{Topic: "orders", Count: count, Assignment: assignment}}, nil)
		return res[0].Err
	}
	move := func(replicas ...int32) error {
		_, errs := PlanAlterReassignments(img, []Reassignment{{Topic: "orders", Partition: 1, Replicas: replicas}}, nil)
		return errs[0]
	}
	createRF := func(name string, rf int16) error {
		_, res := PlanCreateTopics(img, []CreateTopic{{Name: name, NumPartitions: 1, ReplicationFactor: rf}}, 1, testRand(1), nil, true)
		return res[0].Err
	}
	createCounts := func(partitions int32, rf int16) error {
		_, res := PlanCreateTopics(img, []CreateTopic{{Name: "t", NumPartitions: partitions, ReplicationFactor: rf}}, 1, testRand(1), nil, true)
		return res[0].Err
	}
	elect := func(typ ElectionType, topic string, partition int32) error {
		_, res := PlanElectLeaders(img, []TopicPartitionRef{{Topic: topic, Partition: partition}}, typ, nil)
		return res[0].Err
	}
	alterConfig := func(topic string) error {
		_, res := PlanIncrementalAlterConfigs(img, []IncrementalAlterConfigsResource{{Type: metadata.ResourceTopic, Name: topic,
			Ops: []AlterConfigOp{{Key: "retention.ms", Op: OpSet, Value: "1000"}}}}, true)
		return res[0].Err
	}
	_, unregisterErr := PlanUnregisterBroker(img, 9, nil)
	tests := []struct {
		name     string
		err      error
		sentinel error
		want     string
	}{
		{"create: an unknown broker", create([]int32{1, 2}, []int32{9, 1}), metadata.ErrInvalidReplicaAssignment,
			"The manual partition assignment includes broker 9, but no such broker is registered."},
		{"create: the lowest unknown broker", create([]int32{8, 7}), metadata.ErrInvalidReplicaAssignment,
			"The manual partition assignment includes broker 7, but no such broker is registered."},
		{"create: a broker twice", create([]int32{2, 1, 2}), metadata.ErrInvalidReplicaAssignment,
			"The manual partition assignment includes the broker 2 more than once."},
		{"create: an empty list", create([]int32{}), metadata.ErrInvalidReplicaAssignment,
			"The manual partition assignment includes an empty replica list."},
		{"create: uneven replicas", create([]int32{1, 2}, []int32{1}), metadata.ErrInvalidReplicaAssignment,
			"The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with previous partitions, which have 2 replica(s)."},
		{"create: all fenced", create([]int32{1}, []int32{3}), metadata.ErrInvalidReplicaAssignment,
			"All brokers specified in the manual partition assignment for partition 1 are fenced or in controlled shutdown."},
		{"grow: an unknown broker in the third new partition", grow(5, []int32{1, 2}, []int32{2, 1}, []int32{9, 1}), metadata.ErrInvalidReplicaAssignment,
			"The manual partition assignment includes broker 9, but no such broker is registered."},
		{"grow: fewer replicas than the topic's partitions", grow(3, []int32{1}), metadata.ErrInvalidReplicaAssignment,
			"The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with previous partitions, which have 2 replica(s)."},
		{"grow: all fenced names the topic's partition", grow(4, []int32{1, 2}, []int32{3, 4}), metadata.ErrInvalidReplicaAssignment,
			"All brokers specified in the manual partition assignment for partition 3 are fenced or in controlled shutdown."},
		{"grow: too few assignments", grow(4, []int32{1, 2}), metadata.ErrInvalidReplicaAssignment,
			"Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."},
		{"grow: the same count", grow(2), metadata.ErrInvalidPartitions, "Topic already has 2 partition(s)."},
		{"grow: fewer", grow(1), metadata.ErrInvalidPartitions, "The topic orders currently has 2 partition(s); 1 would not be an increase."},
		{"move: an unknown broker", move(1, 6), metadata.ErrInvalidReplicaAssignment,
			"The manual partition assignment includes broker 6, but no such broker is registered."},
		{"move: a broker twice", move(1, 1), metadata.ErrInvalidReplicaAssignment,
			"The manual partition assignment includes the broker 1 more than once."},
		{"move: an empty list", move([]int32{}...), metadata.ErrInvalidReplicaAssignment,
			"The manual partition assignment includes an empty replica list."},
		{"create: an existing topic", createRF("orders", 1), metadata.ErrTopicExists, "Topic 'orders' already exists."},
		// The replication factor is checked before the partition count.
		{"create: no partitions and no replicas", createCounts(0, 0), metadata.ErrInvalidReplicationFactor,
			"Replication factor must be larger than 0, or -1 to use the default value."},
		{"create: a replication factor below -1", createCounts(1, -2), metadata.ErrInvalidReplicationFactor,
			"Replication factor must be larger than 0, or -1 to use the default value."},
		{"create: no partitions", createCounts(0, 1), metadata.ErrInvalidPartitions,
			"Number of partitions was set to an invalid non-positive value."},
		{"create: partitions below -1", createCounts(-2, -1), metadata.ErrInvalidPartitions,
			"Number of partitions was set to an invalid non-positive value."},
		{"create: the metadata log's topic", createRF("__cluster_metadata", 1), metadata.ErrInvalidRequest,
			"Creation of internal topic __cluster_metadata is prohibited."},
		{"create: more replicas than live brokers", createRF("t", 3), metadata.ErrInvalidReplicationFactor,
			"Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached because only 2 broker(s) are registered or some brokers have all their log directories cordoned."},
		{"elect: an unknown topic", elect(ElectPreferred, "nosuch", 0), metadata.ErrUnknownTopic, "No such topic as nosuch"},
		{"elect: an unknown partition", elect(ElectUnclean, "orders", 9), metadata.ErrUnknownTopic, "No such partition as orders-9"},
		{"alter configs: an unknown topic", alterConfig("nosuch"), metadata.ErrUnknownTopic, "The topic 'nosuch' does not exist."},
		{"unregister: an unknown broker", unregisterErr, metadata.ErrBrokerIDNotRegistered, "Broker ID 9 is not currently registered"},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.sentinel) || tt.err.Error() != tt.want {
			t.Errorf("%s: %v, want %v %q", tt.name, tt.err, tt.sentinel, tt.want)
		}
	}
}
