package handlers

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
)

// TestDescribeProducersErrors: each topic is checked as Kafka checks it
// before its partitions: an invalid name is INVALID_TOPIC_EXCEPTION, a topic
// the principal may not READ TOPIC_AUTHORIZATION_FAILED (it needed DESCRIBE
// on the cluster instead, and READ on the topic did not do); then unknown
// topics and partitions, and partitions led elsewhere.
func TestDescribeProducersErrors(t *testing.T) {
	h := newErrorsHandlersWith(t, Config{Authorizer: allowAnonymous(kmsg.ACLOperationRead, resTopic, "t")})
	req := kmsg.NewPtrDescribeProducersRequest()
	for _, rt := range []struct {
		topic string
		parts []int32
	}{{"t", []int32{0, 1, 2, 9}}, {"compacted", []int32{0}}, {"bad name!", []int32{0}}, {"", []int32{0}}} {
		t := kmsg.NewDescribeProducersRequestTopic()
		t.Topic, t.Partitions = rt.topic, rt.parts
		req.Topics = append(req.Topics, t)
	}
	var got []string
	for _, rt := range serve(t, h, req).(*kmsg.DescribeProducersResponse).Topics {
		for _, p := range rt.Partitions {
			got = append(got, fmt.Sprintf("%s/%d=%s", rt.Topic, p.Partition, codeName(p.ErrorCode)))
			if p.ErrorCode != 0 && (p.ErrorMessage == nil || *p.ErrorMessage == "") {
				t.Errorf("%s/%d: %s without a message", rt.Topic, p.Partition, codeName(p.ErrorCode))
			}
		}
	}
	want := []string{
		"t/0=NONE", "t/1=NOT_LEADER_FOR_PARTITION", "t/2=NOT_LEADER_FOR_PARTITION", "t/9=UNKNOWN_TOPIC_OR_PARTITION",
		"compacted/0=TOPIC_AUTHORIZATION_FAILED", "bad name!/0=INVALID_TOPIC_EXCEPTION", "/0=INVALID_TOPIC_EXCEPTION",
	}
	if !slices.Equal(got, want) {
		t.Errorf("answers %q\nwant %q", got, want)
	}
}

// codeName is an error code's Kafka name, NONE for 0.
func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	name, _, _ := strings.Cut(kerr.ErrorForCode(code).Error(), ":")
	return name
}

// TestDescribeClusterErrors: as Kafka, DescribeCluster needs no ACL (it was
// refused CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the cluster):
// DESCRIBE on the cluster only decides what IncludeClusterAuthorizedOperations
// answers (0 without it, else the permitted cluster operations; all seven
// without an authorizer, where it was left unset). An endpoint type that is
// neither broker nor controller is UNSUPPORTED_ENDPOINT_TYPE (it was
// MISMATCHED_ENDPOINT_TYPE).
func TestDescribeClusterErrors(t *testing.T) {
	describe, alter := kmsg.ACLOperationDescribe, kmsg.ACLOperationAlter
	allCluster := opBits(kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite, alter, describe)
	for _, tc := range []struct {
		name         string
		authorizer   func() *acl.Authorizer
		endpointType int8
		includeOps   bool
		want         *kerr.Error
		wantOps      int32
	}{
		{"no ACLs", allowAnonymous(), 1, false, nil, -2147483648},
		{"no ACLs, operations asked for", allowAnonymous(), 1, true, nil, 0},
		{"idempotent write without describe", allowAnonymous(kmsg.ACLOperationIdempotentWrite, resCluster, acl.ClusterName), 1, true, nil, 0},
		{"alter (implies describe)", allowAnonymous(alter, resCluster, acl.ClusterName), 1, true, nil, opBits(describe, alter)},
		{"no authorizer", nil, 1, true, nil, allCluster},
		{"controller endpoint", nil, 2, false, kerr.MismatchedEndpointType, -2147483648},
		{"unknown endpoint type", nil, 7, false, kerr.UnsupportedEndpointType, -2147483648},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newErrorsHandlersWith(t, Config{Authorizer: tc.authorizer, ClusterID: "c"})
			req := kmsg.NewPtrDescribeClusterRequest()
			req.SetVersion(2)
			req.EndpointType, req.IncludeClusterAuthorizedOperations = tc.endpointType, tc.includeOps
			resp := serve(t, h, req).(*kmsg.DescribeClusterResponse)
			want := int16(0)
			if tc.want != nil {
				want = tc.want.Code
			}
			if resp.ErrorCode != want || resp.ClusterAuthorizedOperations != tc.wantOps {
				t.Errorf("%v, operations %b; want %v, operations %b", kerr.ErrorForCode(resp.ErrorCode), resp.ClusterAuthorizedOperations, tc.want, tc.wantOps)
			}
			if want != 0 && resp.ErrorMessage == nil {
				t.Errorf("%v without a message", tc.want)
			}
			if want == 0 && (resp.ClusterID != "c" || len(resp.Brokers) != 2) {
				t.Errorf("cluster %q with %d brokers, want c with 2", resp.ClusterID, len(resp.Brokers))
			}
		})
	}
}

// TestDescribeLogDirsErrors: named topics and partitions this broker does
// not host, or that do not exist, are left out of the one log dir (Kafka
// answers only what its log dirs hold); null topics lists every hosted
// partition; v3+ carries no error when allowed.
func TestDescribeLogDirsErrors(t *testing.T) {
	h := newErrorsHandlers(t)
	list := func(topics map[string][]int32, null bool) []string {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.SetVersion(4)
		if !null {
			req.Topics = []kmsg.DescribeLogDirsRequestTopic{}
		}
		for topic, parts := range topics {
			req.Topics = append(req.Topics, kmsg.DescribeLogDirsRequestTopic{Topic: topic, Partitions: parts})
		}
		resp := serve(t, h, req).(*kmsg.DescribeLogDirsResponse)
		if resp.ErrorCode != 0 || len(resp.Dirs) != 1 || resp.Dirs[0].ErrorCode != 0 {
			t.Fatalf("answer %v with %d dirs", kerr.ErrorForCode(resp.ErrorCode), len(resp.Dirs))
		}
		var got []string
		for _, rt := range resp.Dirs[0].Topics {
			for _, p := range rt.Partitions {
				got = append(got, fmt.Sprintf("%s/%d", rt.Topic, p.Partition))
			}
		}
		slices.Sort(got)
		return got
	}
	if got, want := list(nil, true), []string{OffsetsTopic + "/0", "compacted/0", "t/0", "t/1", "t/3"}; !slices.Equal(got, want) {
		t.Errorf("every partition: %q, want %q", got, want)
	}
	if got, want := list(map[string][]int32{"t": {0, 2, 9}, "nope": {0}}, false), []string{"t/0"}; !slices.Equal(got, want) {
		t.Errorf("t/0, t/2 (not hosted), t/9 and nope/0 (unknown): %q, want %q", got, want)
	}
	if got := list(nil, false); len(got) != 0 {
		t.Errorf("no topics: %q, want none", got)
	}
}

// TestAlterReplicaLogDirsErrors: the answers of a Kafka broker with one log
// dir, in Kafka's order of checks: a topic name too long for Kafka's
// "-future" directory, a path other than the log dir, an unknown partition,
// one this broker holds no replica of (REPLICA_NOT_AVAILABLE, which
// kafka-reassign-partitions retries), and a hosted replica (already there);
// ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED everywhere.
func TestAlterReplicaLogDirsErrors(t *testing.T) {
	// "<topic>-0.<32 hex digits>-future" is 256 characters with long, 255 with
	// shorter.
	long, shorter := strings.Repeat("x", 214), strings.Repeat("x", 213)
	alter := func(h *Handlers) []string {
		req := kmsg.NewPtrAlterReplicaLogDirsRequest()
		for _, d := range []struct {
			dir    string
			topics map[string][]int32
		}{
			{"/logs", map[string][]int32{"t": {0, 1, 2, 9}, "nope": {0}, long: {0}, shorter: {0}}},
			{"/logs/", map[string][]int32{"t": {3}}},
			{"/elsewhere", map[string][]int32{"t": {0}}},
			{"logs", map[string][]int32{"compacted": {0}}},
		} {
			rd := kmsg.NewAlterReplicaLogDirsRequestDir()
			rd.Dir = d.dir
			for topic, parts := range d.topics {
				rd.Topics = append(rd.Topics, kmsg.AlterReplicaLogDirsRequestDirTopic{Topic: topic, Partitions: parts})
			}
			req.Dirs = append(req.Dirs, rd)
		}
		var got []string
		for _, rt := range serve(t, h, req).(*kmsg.AlterReplicaLogDirsResponse).Topics {
			for _, p := range rt.Partitions {
				name := rt.Topic
				switch name {
				case long:
					name = "long"
				case shorter:
					name = "shorter"
				}
				got = append(got, fmt.Sprintf("%s/%d=%s", name, p.Partition, codeName(p.ErrorCode)))
			}
		}
		slices.Sort(got)
		return got
	}
	want := []string{
		"compacted/0=LOG_DIR_NOT_FOUND", "long/0=INVALID_TOPIC_EXCEPTION", "nope/0=UNKNOWN_TOPIC_OR_PARTITION",
		"shorter/0=UNKNOWN_TOPIC_OR_PARTITION", "t/0=LOG_DIR_NOT_FOUND", "t/0=NONE", "t/1=NONE", "t/2=REPLICA_NOT_AVAILABLE", "t/3=LOG_DIR_NOT_FOUND",
		"t/9=UNKNOWN_TOPIC_OR_PARTITION",
	}
	if got := alter(newErrorsHandlers(t)); !slices.Equal(got, want) {
		t.Errorf("answers %q\nwant %q", got, want)
	}
	denied := newErrorsHandlersWith(t, Config{Authorizer: allowAnonymous(kmsg.ACLOperationDescribe, resCluster, acl.ClusterName)})
	got := alter(denied)
	for _, g := range got {
		if !strings.HasSuffix(g, "=CLUSTER_AUTHORIZATION_FAILED") {
			t.Errorf("without ALTER on the cluster: %s", g)
		}
	}
	if len(got) != len(want) {
		t.Errorf("without ALTER on the cluster: %d answers, want %d", len(got), len(want))
	}
}
