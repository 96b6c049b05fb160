package handlers

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/metadata"
)

// newDTPHandlers serves an image of topics a (3 partitions), b (1), c (2: the
// leader of partition 1 is broker 2, fenced) and d (1), with authorizer (none
// when nil).
func newDTPHandlers(t *testing.T, authorizer func() *acl.Authorizer) *Handlers {
	t.Helper()
	recs := []metadata.Record{
		&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1, Host: "127.0.0.1", Port: 9092},
		&metadata.RegisterBrokerRecord{BrokerID: 2, Epoch: 1, Host: "127.0.0.1", Port: 9093},
		&metadata.FenceBrokerRecord{BrokerID: 2, Epoch: 1},
	}
	for i, tp := range []struct {
		name string
		n    int32
	}{{"a", 3}, {"b", 1}, {"c", 2}, {"d", 1}} {
		id := metadata.UUID{0xd7, byte(i + 1)}
		recs = append(recs, &metadata.TopicRecord{Name: tp.name, ID: id})
		for p := range tp.n {
			leader := int32(1)
			if tp.name == "c" && p == 1 {
				leader = 2
			}
			recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: p, Replicas: []int32{leader}, ISR: []int32{leader}, Leader: leader, LeaderEpoch: 4})
		}
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), recs)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeID: 1, Authorizer: authorizer}
	return New(cfg, fakeCluster{img: img}, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// dtpSummary is an answer in short: each topic as name[!ERROR][:partitions],
// then the next cursor.
func dtpSummary(resp *kmsg.DescribeTopicPartitionsResponse) string {
	var parts []string
	for _, t := range resp.Topics {
		s := nullable(t.Topic)
		if t.ErrorCode != 0 {
			s += "!" + kerr.ErrorForCode(t.ErrorCode).(*kerr.Error).Message
		}
		if len(t.Partitions) > 0 {
			var ps []string
			for _, p := range t.Partitions {
				ps = append(ps, fmt.Sprint(p.Partition))
			}
			s += ":" + strings.Join(ps, ",")
		}
		parts = append(parts, s)
	}
	next := "-"
	if c := resp.NextCursor; c != nil {
		next = fmt.Sprintf("%s/%d", c.Topic, c.Partition)
	}
	return strings.Join(parts, " ") + " next " + next
}

// TestDescribeTopicPartitions: which topics and partitions a page holds, in
// what order, and the cursor to the next. The expected answers are Kafka
// 4.4.0's to the same requests (interop/cmd/dtpcompare, run against a Kafka
// 4.4.0 KRaft node and Strata: 18 cases, 0 differ), with alice's DESCRIBE ACLs
// on a, b and c given here to the anonymous user. Kafka lists the denied topics
// last in a hash set's order; Strata sorts them.
func TestDescribeTopicPartitions(t *testing.T) {
	type cursor struct {
		topic     string
		partition int32
	}
	describe := kmsg.ACLOperationDescribe
	alice := allowAnonymous(describe, resTopic, "a", describe, resTopic, "b", describe, resTopic, "c")
	for _, tc := range []struct {
		name   string
		alice  bool // with alice's ACLs; else no authorizer
		topics []string
		limit  int32
		cursor *cursor
		want   string
	}{
		{"named, unordered, a duplicate", false, []string{"c", "a", "b", "a"}, 100, nil, "a:0,1,2 b:0 c:0,1 next -"},
		{"limit inside a topic", false, []string{"a", "b", "c"}, 2, nil, "a:0,1 next a/2"},
		{"limit at a topic's end", false, []string{"a", "b", "c"}, 3, nil, "a:0,1,2 next b/0"},
		{"from a cursor", false, []string{"a", "b", "c"}, 2, &cursor{"a", 2}, "a:2 b:0 next c/0"},
		{"cursor past the last partition", false, []string{"a", "b"}, 10, &cursor{"a", 7}, "a b:0 next -"},
		{"limit reached before an unknown topic", false, []string{"a", "x", "b"}, 3, nil, "a:0,1,2 next b/0"},
		{"unknown and invalid topics", false, []string{"x", "bad name", "b"}, 10, nil,
			"b:0 bad name!INVALID_TOPIC_EXCEPTION x!UNKNOWN_TOPIC_OR_PARTITION next -"},
		{"limit 0 is 1", false, []string{"a"}, 0, nil, "a:0 next a/1"},
		{"negative limit is 1", false, []string{"b", "a"}, -5, nil, "a:0 next a/1"},
		{"limit above Kafka's maximum", false, []string{"a"}, 1 << 30, nil, "a:0,1,2 next -"},
		{"cursor topic not named", false, []string{"a", "b", "a"}, 10, &cursor{"c", 0},
			"a!INVALID_REQUEST b!INVALID_REQUEST a!INVALID_REQUEST next -"},
		{"negative cursor partition", false, []string{"a", "b"}, 10, &cursor{"a", -1}, "a!INVALID_REQUEST b!INVALID_REQUEST next -"},
		{"every topic", false, nil, 100, &cursor{"a", 0}, "a:0,1,2 b:0 c:0,1 d:0 next -"},
		{"every topic, paged", false, nil, 4, &cursor{"a", 1}, "a:1,2 b:0 c:0 next c/1"},
		{"every topic, negative cursor partition", false, nil, 10, &cursor{"a", -1}, " next -"},
		{"alice: named, one denied", true, []string{"d", "a", "x", "b"}, 100, nil,
			"a:0,1,2 b:0 d!TOPIC_AUTHORIZATION_FAILED x!TOPIC_AUTHORIZATION_FAILED next -"},
		{"alice: denied topics after the page", true, []string{"a", "b", "d"}, 2, nil, "a:0,1 d!TOPIC_AUTHORIZATION_FAILED next a/2"},
		{"alice: every topic", true, nil, 100, &cursor{"a", 0}, "a:0,1,2 b:0 c:0,1 next -"},
		{"alice: denied cursor topic", true, []string{"a", "d"}, 100, &cursor{"d", 0}, "d!TOPIC_AUTHORIZATION_FAILED next -"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *Handlers
			if tc.alice {
				h = newDTPHandlers(t, alice)
			} else {
				h = newDTPHandlers(t, nil)
			}
			req := kmsg.NewPtrDescribeTopicPartitionsRequest()
			req.ResponsePartitionLimit = tc.limit
			for _, name := range tc.topics {
				req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: name})
			}
			if tc.cursor != nil {
				req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: tc.cursor.topic, Partition: tc.cursor.partition}
			}
			resp := serve(t, h, req).(*kmsg.DescribeTopicPartitionsResponse)
			if got := dtpSummary(resp); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestDescribeTopicPartitionsFields: a partition's fields and a topic's, as
// they reach the client (encoded and read back): ELR lists empty, not null
// (Kafka's AdminClient reads them as lists); a partition whose leader is fenced
// names it, its replica offline, and no error (Kafka 4.4's KRaftMetadataCache); authorized operations
// are every topic operation without an authorizer, DESCRIBE alone with
// alice's ACL (Kafka 4.4: 0xdf8 and 0x100), and unset on denied topics.
func TestDescribeTopicPartitionsFields(t *testing.T) {
	for _, tc := range []struct {
		name       string
		authorizer func() *acl.Authorizer
		ops        int32
		deniedOps  int32
	}{
		{"no authorizer", nil, 0xdf8, 0xdf8},
		{"alice", allowAnonymous(kmsg.ACLOperationDescribe, resTopic, "c"), 0x100, -2147483648},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newDTPHandlers(t, tc.authorizer)
			req := kmsg.NewPtrDescribeTopicPartitionsRequest()
			req.ResponsePartitionLimit = 10
			req.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "c"}, {Topic: "d"}}
			served := serve(t, h, req)
			resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
			if err := resp.ReadFrom(served.AppendTo(nil)); err != nil {
				t.Fatal(err)
			}
			if len(resp.Topics) != 2 {
				t.Fatalf("%d topics answered, want 2", len(resp.Topics))
			}
			c, d := resp.Topics[0], resp.Topics[1]
			if c.TopicID != (metadata.UUID{0xd7, 3}) || c.IsInternal || c.AuthorizedOperations != tc.ops || len(c.Partitions) != 2 {
				t.Fatalf("topic c: id %x internal %t operations %#x, %d partitions; want %#x, 2 partitions",
					c.TopicID, c.IsInternal, c.AuthorizedOperations, len(c.Partitions), tc.ops)
			}
			if d.AuthorizedOperations != tc.deniedOps {
				t.Errorf("topic d: operations %#x, want %#x", d.AuthorizedOperations, tc.deniedOps)
			}
			for _, p := range c.Partitions {
				wantLeader, wantOffline := int32(1), 0
				if p.Partition == 1 {
					wantLeader, wantOffline = 2, 1
				}
				if p.ErrorCode != 0 || p.LeaderID != wantLeader || p.LeaderEpoch != 4 || len(p.Replicas) != 1 || len(p.ISR) != 1 ||
					len(p.OfflineReplicas) != wantOffline || p.EligibleLeaderReplicas == nil || p.LastKnownELR == nil ||
					len(p.EligibleLeaderReplicas)+len(p.LastKnownELR) != 0 {
					t.Errorf("partition %d: %+v; want leader %d, epoch 4, %d offline, empty ELR lists", p.Partition, p, wantLeader, wantOffline)
				}
			}
		})
	}
}
