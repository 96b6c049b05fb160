package handlers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/share"
	"github.com/strata-stream/strata/internal/txn"
)

// TestMetadataErrors: Metadata v12 and v13 for an unknown name, an invalid
// name, beside a topic that exists; the internal topics are marked internal
// (an unknown topic id, which makes Kafka ignore the names of the request:
// TestMetadataTopicIDsOverrideNames). v13's top-level error is 0, as a Kafka 4.4 broker
// answered the same names.
func TestMetadataErrors(t *testing.T) {
	h := newErrorsHandlers(t)
	for _, version := range []int16{12, 13} {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(version)
		for _, rt := range []kmsg.MetadataRequestTopic{
			{Topic: kmsg.StringPtr("t")},
			{Topic: kmsg.StringPtr("nope")},
			{Topic: kmsg.StringPtr("a/b")},
			{Topic: kmsg.StringPtr("")},
			{Topic: kmsg.StringPtr(OffsetsTopic)},
		} {
			req.Topics = append(req.Topics, rt)
		}
		resp := serve(t, h, req).(*kmsg.MetadataResponse)
		if resp.ErrorCode != 0 {
			t.Errorf("v%d: top-level error %v", version, kerr.ErrorForCode(resp.ErrorCode))
		}
		want := []struct {
			code     *kerr.Error
			internal bool
		}{{nil, false}, {kerr.UnknownTopicOrPartition, false}, {kerr.InvalidTopicException, false},
			{kerr.InvalidTopicException, false}, {nil, true}}
		if len(resp.Topics) != len(want) {
			t.Fatalf("v%d: %d topics answered for %d asked", version, len(resp.Topics), len(want))
		}
		for i, rt := range resp.Topics {
			code := int16(0)
			if want[i].code != nil {
				code = want[i].code.Code
			}
			if rt.ErrorCode != code || rt.IsInternal != want[i].internal {
				t.Errorf("v%d: topic %d (%v): %v internal %t, want %v internal %t", version, i, nullable(rt.Topic),
					kerr.ErrorForCode(rt.ErrorCode), rt.IsInternal, kerr.ErrorForCode(code), want[i].internal)
			}
		}
		if len(resp.Topics[0].Partitions) != 4 {
			t.Errorf("v%d: topic t lists %d partitions, want 4", version, len(resp.Topics[0].Partitions))
		}
	}
}

// TestMetadataAuthorizedOperations: as Kafka's handleTopicMetadataRequest,
// Metadata v8+ with IncludeTopicAuthorizedOperations answers the topic
// operations the principal may perform on every topic it may DESCRIBE (an
// unknown one too), and v8-v10 with IncludeClusterAuthorizedOperations the
// cluster's (0 without DESCRIBE on the cluster); a denied topic and requests
// that do not ask keep the schema default. Both were left at the default
// (librdkafka's DescribeTopics and DescribeCluster read them from Metadata).
func TestMetadataAuthorizedOperations(t *testing.T) {
	describe, alter := kmsg.ACLOperationDescribe, kmsg.ACLOperationAlter
	const unset = -2147483648
	withCluster := allowAnonymous(describe, resTopic, "t", alter, resTopic, "t", describe, resTopic, "nope",
		describe, resCluster, acl.ClusterName)
	withoutCluster := allowAnonymous(describe, resTopic, "t")
	for _, tc := range []struct {
		name                string
		authorizer          func() *acl.Authorizer
		version             int16
		all                 bool
		topicOps, clusterOp bool
		wantTopics          map[string]int32
		wantCluster         int32
	}{
		{"v10 both asked", withCluster, 10, false, true, true,
			map[string]int32{"t": opBits(describe, alter), "nope": opBits(describe), "denied": unset}, opBits(describe)},
		{"v10 nothing asked", withCluster, 10, false, false, false,
			map[string]int32{"t": unset, "nope": unset, "denied": unset}, unset},
		{"v10 no describe on the cluster", withoutCluster, 10, false, true, true,
			map[string]int32{"t": opBits(describe), "nope": unset, "denied": unset}, 0},
		{"v11 drops the cluster operations", withCluster, 11, false, true, true,
			map[string]int32{"t": opBits(describe, alter), "nope": opBits(describe), "denied": unset}, unset},
		{"v12 every topic", withoutCluster, 12, true, true, false,
			map[string]int32{"t": opBits(describe)}, unset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newErrorsHandlersWith(t, Config{Authorizer: tc.authorizer})
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(tc.version)
			if !tc.all {
				for _, name := range []string{"t", "nope", "denied"} {
					req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(name)})
				}
			}
			req.IncludeTopicAuthorizedOperations = tc.topicOps
			req.IncludeClusterAuthorizedOperations = tc.clusterOp
			resp := serve(t, h, req).(*kmsg.MetadataResponse)
			got := map[string]int32{}
			for _, rt := range resp.Topics {
				got[nullable(rt.Topic)] = rt.AuthorizedOperations
			}
			if !maps.Equal(got, tc.wantTopics) {
				t.Errorf("topic operations %v, want %v", got, tc.wantTopics)
			}
			if resp.AuthorizedOperations != tc.wantCluster {
				t.Errorf("cluster operations %b, want %b", resp.AuthorizedOperations, tc.wantCluster)
			}
		})
	}
}

// metadataTopics is a Metadata request naming topics by name (non-empty
// names) and by id (non-zero ids), entry by entry.
func metadataTopics(version int16, entries ...kmsg.MetadataRequestTopic) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	req.Topics = append([]kmsg.MetadataRequestTopic{}, entries...)
	return req
}

func byName(name string) kmsg.MetadataRequestTopic {
	return kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(name)}
}

func byID(id metadata.UUID) kmsg.MetadataRequestTopic { return kmsg.MetadataRequestTopic{TopicID: id} }

// answered is "name/code" (or "id/code" for a nameless answer) of every
// topic of resp, in its order.
func answered(resp *kmsg.MetadataResponse) []string {
	var out []string
	for _, rt := range resp.Topics {
		key := nullable(rt.Topic)
		if rt.Topic == nil {
			key = fmt.Sprint(metadata.UUID(rt.TopicID))
		}
		code := "NONE"
		if rt.ErrorCode != 0 {
			code = kerr.ErrorForCode(rt.ErrorCode).(*kerr.Error).Message
		}
		out = append(out, key+"/"+code)
	}
	return out
}

// TestMetadataDuplicateTopicAnsweredOnce: a topic named (or, v12+, given by
// id) twice in one request is answered once, as Kafka's
// handleTopicMetadataRequest collects the topics in a set.
func TestMetadataDuplicateTopicAnsweredOnce(t *testing.T) {
	unknownID := metadata.UUID{99}
	for _, tc := range []struct {
		name string
		req  *kmsg.MetadataRequest
		want []string
	}{
		{"v1 names", metadataTopics(1, byName("t"), byName("nope"), byName("t"), byName("nope")),
			[]string{"t/NONE", "nope/UNKNOWN_TOPIC_OR_PARTITION"}},
		{"v12 names", metadataTopics(12, byName("t"), byName("t"), byName("a/b"), byName("a/b")),
			[]string{"t/NONE", "a/b/INVALID_TOPIC_EXCEPTION"}},
		{"v12 ids", metadataTopics(12, byID(errTopicID), byID(unknownID), byID(errTopicID), byID(unknownID)),
			[]string{"t/NONE", fmt.Sprint(unknownID) + "/UNKNOWN_TOPIC_ID"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := answered(serve(t, newErrorsHandlers(t), tc.req).(*kmsg.MetadataResponse))
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("answered %q, want %q", got, want)
			}
		})
	}
}

// TestMetadataTopicIDsRefusedBeforeV12: on v10 and v11 (which carry topic ids
// but cannot look topics up by them) a null name or a non-zero id refuses the
// whole request, as Kafka's handleTopicMetadataRequest throws
// InvalidRequestException: MetadataRequest's error response answers every
// requested topic INVALID_REQUEST (a null name as ""), lists no broker and
// no cluster id, and the controller id is -1. The Java client never sends
// such a request (its builder refuses ids and null names below v12).
func TestMetadataTopicIDsRefusedBeforeV12(t *testing.T) {
	h := newErrorsHandlers(t)
	for _, version := range []int16{10, 11} {
		for _, tc := range []struct {
			name    string
			entries []kmsg.MetadataRequestTopic
			want    []string
		}{
			{"null name", []kmsg.MetadataRequestTopic{byName("t"), {}},
				[]string{"t/INVALID_REQUEST", "/INVALID_REQUEST"}},
			{"topic id", []kmsg.MetadataRequestTopic{byName("t"), {Topic: kmsg.StringPtr("nope"), TopicID: errTopicID}},
				[]string{"t/INVALID_REQUEST", "nope/INVALID_REQUEST"}},
		} {
			t.Run(fmt.Sprintf("v%d %s", version, tc.name), func(t *testing.T) {
				resp := serve(t, h, metadataTopics(version, tc.entries...)).(*kmsg.MetadataResponse)
				if got := answered(resp); !slices.Equal(got, tc.want) {
					t.Errorf("answered %q, want %q", got, tc.want)
				}
				for _, rt := range resp.Topics {
					if len(rt.Partitions) != 0 || rt.IsInternal {
						t.Errorf("topic %q: %d partitions, internal %t; want none, false", nullable(rt.Topic), len(rt.Partitions), rt.IsInternal)
					}
				}
				if resp.Topics[1].TopicID != tc.entries[1].TopicID {
					t.Errorf("topic id %v, want the request's %v", resp.Topics[1].TopicID, tc.entries[1].TopicID)
				}
				if len(resp.Brokers) != 0 || resp.ClusterID != nil || resp.ControllerID != -1 {
					t.Errorf("brokers %v, cluster id %v, controller %d; want none, null, -1", resp.Brokers, resp.ClusterID, resp.ControllerID)
				}
			})
		}
	}
}

// creatingCluster is fakeCluster as the active controller, recording the
// topics it is asked to create; it creates none (each gets
// UNKNOWN_SERVER_ERROR).
type creatingCluster struct {
	fakeCluster
	asked *[]controller.CreateTopic
}

func (c creatingCluster) IsLeader() bool { return true }

func (c creatingCluster) CreateTopics(_ context.Context, reqs []controller.CreateTopic, _ bool) ([]controller.CreateTopicResult, error) {
	*c.asked = append(*c.asked, reqs...)
	results := make([]controller.CreateTopicResult, len(reqs))
	for i, r := range reqs {
		results[i] = controller.CreateTopicResult{Name: r.Name, Err: errors.New("not created in this test")}
	}
	return results, nil
}

// withCreatingCluster makes h's cluster a creatingCluster and returns what it
// is asked to create.
func withCreatingCluster(h *Handlers) *[]controller.CreateTopic {
	asked := new([]controller.CreateTopic)
	h.cluster = creatingCluster{fakeCluster{img: h.cluster.Image()}, asked}
	return asked
}

// TestMetadataTopicIDsOverrideNames: on v12+, once one topic is given by a
// non-zero id, Kafka's handleTopicMetadataRequest looks up the ids only: the
// topics named without an id are neither answered nor auto-created, and a
// name beside an id is ignored.
func TestMetadataTopicIDsOverrideNames(t *testing.T) {
	unknownID := metadata.UUID{99}
	h := newErrorsHandlersWith(t, Config{AutoCreateTopics: true})
	asked := withCreatingCluster(h)
	req := metadataTopics(12, byName("t"), byID(compactedTopicID), byName("nope"),
		kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr("t"), TopicID: unknownID})
	req.AllowAutoTopicCreation = true
	got := answered(serve(t, h, req).(*kmsg.MetadataResponse))
	want := []string{"compacted/NONE", fmt.Sprint(unknownID) + "/UNKNOWN_TOPIC_ID"}
	if !slices.Equal(got, want) {
		t.Errorf("answered %q, want %q", got, want)
	}
	if len(*asked) != 0 {
		t.Errorf("auto-created %v, want nothing", *asked)
	}
}

// TestMetadataUnknownInternalTopic: an internal topic that does not exist yet
// is answered as internal, as Kafka marks it (Topic.isInternal) in every
// answer for a name the principal may DESCRIBE: unknown, being auto-created,
// or not created for want of CREATE. Auto-creation makes it as its
// coordinator would (Kafka's AutoTopicCreationManager): its own partition
// count, compacted.
func TestMetadataUnknownInternalTopic(t *testing.T) {
	describe := kmsg.ACLOperationDescribe
	for _, tc := range []struct {
		name       string
		autoCreate bool
		authorizer func() *acl.Authorizer
		code       string
		internal   bool
		created    bool
	}{
		{"no auto-creation", false, nil, "UNKNOWN_TOPIC_OR_PARTITION", true, false},
		{"auto-created", true, nil, "UNKNOWN_TOPIC_OR_PARTITION", true, true},
		{"no CREATE", true, allowAnonymous(describe, resTopic, txn.StateTopic), "TOPIC_AUTHORIZATION_FAILED", true, false},
		{"no DESCRIBE", true, allowAnonymous(describe, resTopic, "t"), "TOPIC_AUTHORIZATION_FAILED", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newErrorsHandlersWith(t, Config{AutoCreateTopics: tc.autoCreate, Authorizer: tc.authorizer,
				DefaultPartitions: 1, TransactionStatePartitions: 7})
			asked := withCreatingCluster(h)
			req := metadataTopics(12, byName(txn.StateTopic))
			req.AllowAutoTopicCreation = true
			resp := serve(t, h, req).(*kmsg.MetadataResponse)
			want := []string{txn.StateTopic + "/" + tc.code}
			if got := answered(resp); !slices.Equal(got, want) {
				t.Fatalf("answered %q, want %q", got, want)
			}
			if resp.Topics[0].IsInternal != tc.internal {
				t.Errorf("internal %t, want %t", resp.Topics[0].IsInternal, tc.internal)
			}
			switch {
			case !tc.created && len(*asked) != 0:
				t.Errorf("auto-created %v, want nothing", *asked)
			case tc.created && (len(*asked) != 1 || (*asked)[0].NumPartitions != 7 || (*asked)[0].Configs["cleanup.policy"] != "compact"):
				t.Errorf("auto-created %v, want %s with 7 partitions, compacted", *asked, txn.StateTopic)
			}
		})
	}
}

// TestMetadataAutoCreateInvalidName: with auto-creation on and asked for, a
// name Kafka's Topic.validate refuses (too long, an illegal character) is
// answered INVALID_TOPIC_EXCEPTION and never created; but without CREATE,
// Kafka's handleTopicMetadataRequest sets it aside as unauthorized before any
// validation: TOPIC_AUTHORIZATION_FAILED.
func TestMetadataAutoCreateInvalidName(t *testing.T) {
	long := strings.Repeat("x", 250)
	describe := kmsg.ACLOperationDescribe
	for _, tc := range []struct {
		name       string
		authorizer func() *acl.Authorizer
		code       string
	}{
		{"allowed", nil, "INVALID_TOPIC_EXCEPTION"},
		{"no CREATE", allowAnonymous(describe, resTopic, long, describe, resTopic, "a/b"), "TOPIC_AUTHORIZATION_FAILED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newErrorsHandlersWith(t, Config{AutoCreateTopics: true, Authorizer: tc.authorizer, DefaultPartitions: 1})
			asked := withCreatingCluster(h)
			req := metadataTopics(12, byName(long), byName("a/b"))
			req.AllowAutoTopicCreation = true
			got := answered(serve(t, h, req).(*kmsg.MetadataResponse))
			if want := []string{long + "/" + tc.code, "a/b/" + tc.code}; !slices.Equal(got, want) {
				t.Errorf("answered %q, want %q", got, want)
			}
			if len(*asked) != 0 {
				t.Errorf("auto-created %v, want nothing", *asked)
			}
		})
	}
}

// TestMetadataAutoCreatesInternalTopicsAsTheirCoordinators: as Kafka's
// AutoTopicCreationManager, a Metadata request that auto-creates an internal
// topic creates it with its coordinator's settings, the ones the coordinator
// itself creates it with: __share_group_state got the broker defaults (here 1
// partition, no configs), which the share coordinator, hashing keys over
// share.coordinator.state.topic.num.partitions, could not use.
func TestMetadataAutoCreatesInternalTopicsAsTheirCoordinators(t *testing.T) {
	const brokers = 2 // newErrorsHandlers registers two
	shareRF, shareConfigs := share.StateTopicSettings(brokers)
	for _, tc := range []struct {
		topic      string
		partitions int32
		rf         int16
		configs    map[string]string
	}{
		{txn.StateTopic, 7, -1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600",
			"compression.type": "uncompressed", "unclean.leader.election.enable": "false", "preallocate": "true"}},
		{share.StateTopic, 9, shareRF, shareConfigs},
	} {
		t.Run(tc.topic, func(t *testing.T) {
			h := newErrorsHandlersWith(t, Config{AutoCreateTopics: true, DefaultPartitions: 1,
				TransactionStatePartitions: 7, ShareStatePartitions: 9})
			asked := withCreatingCluster(h)
			req := metadataTopics(12, byName(tc.topic))
			req.AllowAutoTopicCreation = true
			serve(t, h, req)
			if len(*asked) != 1 {
				t.Fatalf("asked to create %v, want %s", *asked, tc.topic)
			}
			got := (*asked)[0]
			if got.Name != tc.topic || got.NumPartitions != tc.partitions || got.ReplicationFactor != tc.rf || !maps.Equal(got.Configs, tc.configs) {
				t.Errorf("created %+v, want %d partitions, replication factor %d, configs %v", got, tc.partitions, tc.rf, tc.configs)
			}
		})
	}
}

// TestMetadataAutoCreatePending: a topic Metadata asked to auto-create and
// not yet in the image is UNKNOWN_TOPIC_OR_PARTITION, as Kafka 4 answers every
// topic it sends to the controller for creation (AutoTopicCreationManager's
// sendCreateTopicRequest); it was LEADER_NOT_AVAILABLE, the answer of Kafka's
// ZooKeeper path. The client retries either way.
func TestMetadataAutoCreatePending(t *testing.T) {
	h := newErrorsHandlersWith(t, Config{AutoCreateTopics: true, DefaultPartitions: 1})
	asked := withCreatingCluster(h)
	req := metadataTopics(12, byName("new"))
	req.AllowAutoTopicCreation = true
	got := answered(serve(t, h, req).(*kmsg.MetadataResponse))
	if want := []string{"new/UNKNOWN_TOPIC_OR_PARTITION"}; !slices.Equal(got, want) {
		t.Errorf("answered %q, want %q", got, want)
	}
	if len(*asked) != 1 || (*asked)[0].Name != "new" {
		t.Errorf("asked to create %v, want new", *asked)
	}
}

// TestMetadataV0UnavailableReplicas: as Kafka's metadata cache answers v0
// (errorUnavailableEndpoints), a partition lists only the replicas and ISR
// members on live brokers, and REPLICA_NOT_AVAILABLE when it left one out
// while its leader is live; v1+ lists them all (the dead ones also as
// offline from v5) without an error. Topic "t" has partitions with replicas
// [1 2] ISR [1] leader 1, [2 1] ISR [2 1] leader 2, [2] leader 2 and [1 2]
// ISR [1 2] leader 1; broker 2 is fenced here, its partitions leaderless.
func TestMetadataV0UnavailableReplicas(t *testing.T) {
	h := newErrorsHandlers(t)
	img, err := metadata.ApplyAll(h.cluster.Image(), []metadata.Record{
		&metadata.FenceBrokerRecord{BrokerID: 2, Epoch: 1},
		&metadata.PartitionChangeRecord{TopicID: errTopicID, Partition: 1, Leader: metadata.NoLeader, LeaderEpoch: 1, ISR: []int32{2, 1}},
		&metadata.PartitionChangeRecord{TopicID: errTopicID, Partition: 2, Leader: metadata.NoLeader, LeaderEpoch: 6, ISR: []int32{2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.cluster = fakeCluster{img: img}
	describe := func(mp kmsg.MetadataResponseTopicPartition) string {
		code := "NONE"
		if mp.ErrorCode != 0 {
			code = kerr.ErrorForCode(mp.ErrorCode).(*kerr.Error).Message
		}
		return fmt.Sprintf("%d: leader %d replicas %v isr %v %s", mp.Partition, mp.Leader, mp.Replicas, mp.ISR, code)
	}
	for _, tc := range []struct {
		version int16
		want    []string
	}{
		{0, []string{
			"0: leader 1 replicas [1] isr [1] REPLICA_NOT_AVAILABLE",
			"1: leader -1 replicas [1] isr [1] LEADER_NOT_AVAILABLE",
			"2: leader -1 replicas [] isr [] LEADER_NOT_AVAILABLE",
			"3: leader 1 replicas [1] isr [1] REPLICA_NOT_AVAILABLE",
		}},
		{1, []string{
			"0: leader 1 replicas [1 2] isr [1] NONE",
			"1: leader -1 replicas [2 1] isr [2 1] LEADER_NOT_AVAILABLE",
			"2: leader -1 replicas [2] isr [2] LEADER_NOT_AVAILABLE",
			"3: leader 1 replicas [1 2] isr [1 2] NONE",
		}},
	} {
		resp := serve(t, h, metadataTopics(tc.version, byName("t"))).(*kmsg.MetadataResponse)
		var got []string
		for _, mp := range resp.Topics[0].Partitions {
			got = append(got, describe(mp))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("v%d:\n got %q\nwant %q", tc.version, got, tc.want)
		}
	}
}

// TestOffsetsTopicSettings: __consumer_offsets is created as Kafka's group
// coordinator creates it (groupMetadataTopicConfigs): compacted, 100 MiB
// segments, the producer's compression, its own partition count; and, unlike
// Kafka, preallocated.
func TestOffsetsTopicSettings(t *testing.T) {
	h := newErrorsHandlersWith(t, Config{OffsetsTopicPartitions: 5})
	got := h.internalTopic(OffsetsTopic)
	configs := map[string]string{}
	for _, c := range got.Configs {
		configs[c.Name] = nullable(c.Value)
	}
	want := map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer",
		"preallocate": "true"}
	if got.NumPartitions != 5 || got.ReplicationFactor != -1 || !maps.Equal(configs, want) {
		t.Errorf("%d partitions, replication factor %d, configs %v; want 5, -1, %v", got.NumPartitions, got.ReplicationFactor, configs, want)
	}
}

// TestFencedLeaderAsKafka: as Kafka 4.4's KRaftMetadataCache answers a
// partition, a leader that is registered but fenced is still named, without a
// partition error (Metadata v0, listing live replicas only, is
// REPLICA_NOT_AVAILABLE); only a leader that is not registered at all is
// LEADER_NOT_AVAILABLE with leader -1. Strata named neither, and the
// unregistered one with LEADER_NOT_AVAILABLE in Metadata. Topic c's partition 1 is led by broker 2, fenced; topic e's by
// broker 9, never registered.
func TestFencedLeaderAsKafka(t *testing.T) {
	h := newDTPHandlers(t, nil)
	eID := metadata.UUID{0xd7, 9}
	img, err := metadata.ApplyAll(h.cluster.Image(), []metadata.Record{
		&metadata.TopicRecord{Name: "e", ID: eID},
		&metadata.PartitionRecord{TopicID: eID, Partition: 0, Replicas: []int32{9}, ISR: []int32{9}, Leader: 9, LeaderEpoch: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.cluster = fakeCluster{img: img}
	code := func(c int16) string {
		if c == 0 {
			return "NONE"
		}
		return kerr.ErrorForCode(c).(*kerr.Error).Message
	}
	for _, tc := range []struct {
		version int16
		want    []string
	}{
		{0, []string{
			"c/0: leader 1 replicas [1] isr [1] offline [] NONE",
			"c/1: leader 2 replicas [] isr [] offline [2] REPLICA_NOT_AVAILABLE",
			"e/0: leader -1 replicas [] isr [] offline [9] LEADER_NOT_AVAILABLE",
		}},
		{12, []string{
			"c/0: leader 1 replicas [1] isr [1] offline [] NONE",
			"c/1: leader 2 replicas [2] isr [2] offline [2] NONE",
			"e/0: leader -1 replicas [9] isr [9] offline [9] LEADER_NOT_AVAILABLE",
		}},
	} {
		resp := serve(t, h, metadataTopics(tc.version, byName("c"), byName("e"))).(*kmsg.MetadataResponse)
		var got []string
		for _, mt := range resp.Topics {
			for _, mp := range mt.Partitions {
				got = append(got, fmt.Sprintf("%s/%d: leader %d replicas %v isr %v offline %v %s",
					nullable(mt.Topic), mp.Partition, mp.Leader, mp.Replicas, mp.ISR, mp.OfflineReplicas, code(mp.ErrorCode)))
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Metadata v%d:\n got %q\nwant %q", tc.version, got, tc.want)
		}
	}

	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = 10
	req.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "c"}, {Topic: "e"}}
	var got []string
	for _, rt := range serve(t, h, req).(*kmsg.DescribeTopicPartitionsResponse).Topics {
		for _, p := range rt.Partitions {
			got = append(got, fmt.Sprintf("%s/%d: leader %d %s", nullable(rt.Topic), p.Partition, p.LeaderID, code(p.ErrorCode)))
		}
	}
	if want := []string{"c/0: leader 1 NONE", "c/1: leader 2 NONE", "e/0: leader -1 NONE"}; !slices.Equal(got, want) {
		t.Errorf("DescribeTopicPartitions:\n got %q\nwant %q", got, want)
	}
}
