package handlers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/txn"
)

// The topic-id versions' expected answers are a Kafka 4.4.0 node's to the
// same requests (interop/cmd/topicidcompare, testdata/kafka-4.4.txt): an id no
// topic has (zero, unknown, a deleted topic's) is UNKNOWN_TOPIC_ID, resolved
// before the topic's ACLs; a known id's unknown partition
// UNKNOWN_TOPIC_OR_PARTITION; answers carry ids.

var (
	goneTopicID    = metadata.UUID{12} // a topic created and deleted (withGoneTopic)
	unknownTopicID = metadata.UUID{0xde, 0xad}
)

// topicIDs names the ids of the tests' topics: t, compacted, gone, zero and
// unknown.
var topicIDs = map[string][16]byte{"t": errTopicID, "compacted": compactedTopicID, "gone": goneTopicID, "zero": {}, "unknown": unknownTopicID}

func topicIDName(id [16]byte) string {
	for name, x := range topicIDs {
		if x == id {
			return name
		}
	}
	return fmt.Sprintf("%x", id)
}

// withGoneTopic is h's image with topic "gone" created and deleted.
func withGoneTopic(t *testing.T, img *metadata.Image) *metadata.Image {
	t.Helper()
	img, err := metadata.ApplyAll(img, []metadata.Record{
		&metadata.TopicRecord{Name: "gone", ID: goneTopicID},
		&metadata.PartitionRecord{TopicID: goneTopicID, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		&metadata.RemoveTopicRecord{TopicID: goneTopicID},
	})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// overWire is req as the broker decodes it: encoded and read back at its
// version, so that fields the version does not carry (a topic's name from
// the id versions) are empty.
func overWire[R kmsg.Request](t *testing.T, req R) R {
	t.Helper()
	out := kmsg.RequestForKey(req.Key())
	out.SetVersion(req.GetVersion())
	if err := out.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	return out.(R)
}

// topicSpec is "topic/partition ..." with topics named as in topicIDs; "+"
// starts a new entry for the next topic even if it is the same.
func topicSpec(spec string) (topics []string, parts [][]int32) {
	for _, f := range strings.Fields(spec) {
		if f == "+" {
			topics, parts = append(topics, ""), append(parts, nil)
			continue
		}
		name, idx, _ := strings.Cut(f, "/")
		var p int32
		fmt.Sscan(idx, &p)
		if n := len(topics); n > 0 && (topics[n-1] == name || topics[n-1] == "") {
			topics[n-1], parts[n-1] = name, append(parts[n-1], p)
			continue
		}
		topics, parts = append(topics, name), append(parts, []int32{p})
	}
	return topics, parts
}

// idAnswer renders one answered topic: "name[p:CODE ...]", partitions in order.
func idAnswer(id [16]byte, name string, codes map[int32]string) string {
	ps := slices.Sorted(func(yield func(int32) bool) {
		for p := range codes {
			if !yield(p) {
				return
			}
		}
	})
	var b strings.Builder
	if name != "" {
		b.WriteString("name:" + name + " ")
	}
	b.WriteString(topicIDName(id) + "[")
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%s", p, codes[p])
	}
	return b.String() + "]"
}

// TestProduceTopicIDs: Produce v13 names topics by id.
func TestProduceTopicIDs(t *testing.T) {
	write := kmsg.ACLOperationWrite
	for _, tc := range []struct {
		name   string
		acl    bool // WRITE on t only
		spec   string
		want   []string // topics in order, partitions "index:CODE,base"
		nilMsg bool     // every refused partition has a null message, as Kafka's
	}{
		{"known id", false, "t/0", []string{"t[0:NONE,10]"}, true},
		{"zero id", false, "zero/0", []string{"zero[0:UNKNOWN_TOPIC_ID,-1]"}, true},
		{"unknown id", false, "unknown/0 unknown/1", []string{"unknown[0:UNKNOWN_TOPIC_ID,-1 1:UNKNOWN_TOPIC_ID,-1]"}, true},
		{"deleted topic's id", false, "gone/0", []string{"gone[0:UNKNOWN_TOPIC_ID,-1]"}, true},
		{"unknown partition", false, "t/9", []string{"t[9:UNKNOWN_TOPIC_OR_PARTITION,-1]"}, true},
		{"mixed", false, "unknown/0 t/0 t/9 t/3 zero/0",
			[]string{"unknown[0:UNKNOWN_TOPIC_ID,-1]", "t[0:NONE,10 9:UNKNOWN_TOPIC_OR_PARTITION,-1 3:NONE,0]", "zero[0:UNKNOWN_TOPIC_ID,-1]"}, true},
		{"refused topic, unknown id", true, "compacted/0 unknown/0 t/0",
			[]string{"compacted[0:TOPIC_AUTHORIZATION_FAILED,-1]", "unknown[0:UNKNOWN_TOPIC_ID,-1]", "t[0:NONE,10]"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg Config
			if tc.acl {
				cfg.Authorizer = allowAnonymous(write, resTopic, "t")
			}
			base := newErrorsHandlersWith(t, cfg)
			h := New(base.cfg, fakeCluster{img: withGoneTopic(t, base.cluster.Image())}, base.replicas, nil, nil, base.log)
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(13)
			req.Acks, req.TimeoutMillis = 1, 5000
			topics, parts := topicSpec(tc.spec)
			for i, name := range topics {
				rt := kmsg.NewProduceRequestTopic()
				rt.TopicID = topicIDs[name]
				for _, p := range parts[i] {
					rp := kmsg.NewProduceRequestTopicPartition()
					rp.Partition, rp.Records = p, batchtest.Build(batchtest.Options{Records: batchtest.Values(1, 8)})
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
			}
			resp := serve(t, h, overWire(t, req)).(*kmsg.ProduceResponse)
			var got []string
			for _, rt := range resp.Topics {
				var ps []string
				for _, p := range rt.Partitions {
					ps = append(ps, fmt.Sprintf("%d:%s,%d", p.Partition, codeName(p.ErrorCode), p.BaseOffset))
					if p.ErrorCode != 0 && tc.nilMsg && p.ErrorMessage != nil {
						t.Errorf("%s-%d: message %q, Kafka's is null", topicIDName(rt.TopicID), p.Partition, *p.ErrorMessage)
					}
				}
				got = append(got, topicIDName(rt.TopicID)+"["+strings.Join(ps, " ")+"]")
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("answered %q, want %q", got, tc.want)
			}
		})
	}
}

// topicIDGroups is a group coordinator for the id versions' tests: it
// commits every partition it is given (committingGroups) and answers an
// OffsetFetch with offset 5 for each partition asked for, and for every topic
// with the commits of t-0, gone-0 (a topic deleted since) and compacted-0.
type topicIDGroups struct{ committingGroups }

func (g *topicIDGroups) OffsetFetch(_ context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	for _, rg := range req.Groups {
		sg := kmsg.NewOffsetFetchResponseGroup()
		sg.Group = rg.Group
		topics := rg.Topics
		if topics == nil {
			for _, name := range []string{"compacted", "gone", "t"} {
				topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: name, Partitions: []int32{0}})
			}
		}
		for _, t := range topics {
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				sp.Partition, sp.Offset, sp.Metadata = p, 5, ptr("")
				st.Partitions = append(st.Partitions, sp)
			}
			sg.Topics = append(sg.Topics, st)
		}
		resp.Groups = append(resp.Groups, sg)
	}
	return resp
}

// TestOffsetCommitTopicIDs: OffsetCommit v10 names topics by id; the
// coordinator sees names, and only those of known topics.
func TestOffsetCommitTopicIDs(t *testing.T) {
	read := kmsg.ACLOperationRead
	for _, tc := range []struct {
		name      string
		acl       bool // READ on group g and topic t only
		group     string
		spec      string
		want      []string // answered topics, sorted
		committed []string
	}{
		{"known id", false, "g", "t/0 t/3", []string{"name:t t[0:NONE 3:NONE]"}, []string{"t/0", "t/3"}},
		{"zero id", false, "g", "zero/0", []string{"zero[0:UNKNOWN_TOPIC_ID]"}, nil},
		{"unknown id", false, "g", "unknown/0", []string{"unknown[0:UNKNOWN_TOPIC_ID]"}, nil},
		{"deleted topic's id", false, "g", "gone/0", []string{"gone[0:UNKNOWN_TOPIC_ID]"}, nil},
		{"mixed: a known id's unknown partition answered in its entry", false, "g", "unknown/0 t/0 t/9 zero/1",
			[]string{"name:t t[0:NONE 9:UNKNOWN_TOPIC_OR_PARTITION]", "unknown[0:UNKNOWN_TOPIC_ID]", "zero[1:UNKNOWN_TOPIC_ID]"}, []string{"t/0"}},
		{"a topic twice", false, "g", "t/0 + t/1", []string{"name:t t[0:NONE]", "name:t t[1:NONE]"}, []string{"t/0", "t/1"}},
		{"refused topic, unknown id", true, "g", "compacted/0 unknown/0 t/0",
			[]string{"name:compacted compacted[0:TOPIC_AUTHORIZATION_FAILED]", "name:t t[0:NONE]", "unknown[0:UNKNOWN_TOPIC_ID]"}, []string{"t/0"}},
		{"refused group", true, "g2", "t/0 unknown/0",
			[]string{"name:t t[0:GROUP_AUTHORIZATION_FAILED]", "unknown[0:GROUP_AUTHORIZATION_FAILED]"}, nil},
		{"refused group, unknown ids only", true, "g2", "unknown/0", []string{"unknown[0:GROUP_AUTHORIZATION_FAILED]"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg Config
			if tc.acl {
				cfg.Authorizer = allowAnonymous(read, resGroup, "g", read, resTopic, "t")
			}
			base := newErrorsHandlersWith(t, cfg)
			groups := &topicIDGroups{}
			h := New(base.cfg, fakeCluster{img: withGoneTopic(t, base.cluster.Image())}, base.replicas, groups, nil, base.log)
			req := kmsg.NewPtrOffsetCommitRequest()
			req.SetVersion(10)
			req.Group, req.Generation = tc.group, -1
			topics, parts := topicSpec(tc.spec)
			for i, name := range topics {
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.TopicID = topicIDs[name]
				for _, p := range parts[i] {
					rp := kmsg.NewOffsetCommitRequestTopicPartition()
					rp.Partition, rp.Offset = p, 1
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
			}
			var got []string
			for _, rt := range serve(t, h, overWire(t, req)).(*kmsg.OffsetCommitResponse).Topics {
				codes := map[int32]string{}
				for _, p := range rt.Partitions {
					codes[p.Partition] = codeName(p.ErrorCode)
				}
				got = append(got, idAnswer(rt.TopicID, rt.Topic, codes))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("answered %q, want %q", got, tc.want)
			}
			if !slices.Equal(groups.got, tc.committed) {
				t.Errorf("the coordinator committed %q, want %q", groups.got, tc.committed)
			}
		})
	}
}

// TestOffsetFetchTopicIDs: OffsetFetch v10 names topics by id; an unknown id
// is UNKNOWN_TOPIC_ID with offset -1, epoch -1 and empty metadata; every
// topic's commits leave out the topics that no longer exist; a refused group
// answers no topics.
func TestOffsetFetchTopicIDs(t *testing.T) {
	describe := kmsg.ACLOperationDescribe
	type group struct{ name, spec string } // spec "*": every topic
	for _, tc := range []struct {
		name   string
		acl    bool // DESCRIBE on group g and topic t only
		groups []group
		want   []string // per group, "group:CODE topics..." with topics sorted
	}{
		{"known id", false, []group{{"g", "t/0 t/1"}}, []string{"g:NONE name:t t[0:NONE,5 1:NONE,5]"}},
		{"unknown, zero and deleted topic's ids", false, []group{{"g", "unknown/0 zero/0 gone/0"}},
			[]string{"g:NONE gone[0:UNKNOWN_TOPIC_ID,-1] unknown[0:UNKNOWN_TOPIC_ID,-1] zero[0:UNKNOWN_TOPIC_ID,-1]"}},
		{"every topic", false, []group{{"g", "*"}}, []string{"g:NONE name:compacted compacted[0:NONE,5] name:t t[0:NONE,5]"}},
		{"two groups", false, []group{{"g", "t/0"}, {"h", "unknown/3 t/1"}},
			[]string{"g:NONE name:t t[0:NONE,5]", "h:NONE name:t t[1:NONE,5] unknown[3:UNKNOWN_TOPIC_ID,-1]"}},
		{"refused topic, unknown id", true, []group{{"g", "compacted/0 unknown/0 t/0"}},
			[]string{"g:NONE name:compacted compacted[0:TOPIC_AUTHORIZATION_FAILED,-1] name:t t[0:NONE,5] unknown[0:UNKNOWN_TOPIC_ID,-1]"}},
		{"refused group", true, []group{{"g2", "t/0 unknown/0"}, {"g", "t/0"}},
			[]string{"g2:GROUP_AUTHORIZATION_FAILED", "g:NONE name:t t[0:NONE,5]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg Config
			if tc.acl {
				cfg.Authorizer = allowAnonymous(describe, resGroup, "g", describe, resTopic, "t")
			}
			base := newErrorsHandlersWith(t, cfg)
			h := New(base.cfg, fakeCluster{img: withGoneTopic(t, base.cluster.Image())}, base.replicas, &topicIDGroups{}, nil, base.log)
			req := kmsg.NewPtrOffsetFetchRequest()
			req.SetVersion(10)
			for _, g := range tc.groups {
				rg := kmsg.NewOffsetFetchRequestGroup()
				rg.Group = g.name
				if g.spec != "*" {
					rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
					topics, parts := topicSpec(g.spec)
					for i, name := range topics {
						rt := kmsg.NewOffsetFetchRequestGroupTopic()
						rt.TopicID, rt.Partitions = topicIDs[name], parts[i]
						rg.Topics = append(rg.Topics, rt)
					}
				}
				req.Groups = append(req.Groups, rg)
			}
			var got []string
			for _, g := range serve(t, h, overWire(t, req)).(*kmsg.OffsetFetchResponse).Groups {
				var topics []string
				for _, rt := range g.Topics {
					codes := map[int32]string{}
					for _, p := range rt.Partitions {
						codes[p.Partition] = fmt.Sprintf("%s,%d", codeName(p.ErrorCode), p.Offset)
						if p.ErrorCode != 0 && (p.LeaderEpoch != -1 || p.Metadata == nil || *p.Metadata != "") {
							t.Errorf("%s-%d: epoch %d, metadata %v; Kafka's are -1 and empty", topicIDName(rt.TopicID), p.Partition, p.LeaderEpoch, p.Metadata)
						}
					}
					topics = append(topics, idAnswer(rt.TopicID, rt.Topic, codes))
				}
				slices.Sort(topics)
				got = append(got, strings.Join(append([]string{g.Group + ":" + codeName(g.ErrorCode)}, topics...), " "))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("answered %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTxnOffsetCommitTopicIDs: TxnOffsetCommit v6 names topics by id, checked
// after the transactional id and the group: a refused group answers every
// partition GROUP_AUTHORIZATION_FAILED, its unknown ids too.
func TestTxnOffsetCommitTopicIDs(t *testing.T) {
	write, read := kmsg.ACLOperationWrite, kmsg.ACLOperationRead
	for _, tc := range []struct {
		name      string
		txnID     string
		group     string
		spec      string
		want      []string
		committed bool // the coordinator got t-0
	}{
		{"known id", "tx", "g", "t/0", []string{"name:t t[0:NONE]"}, true},
		{"unknown, zero and deleted topic's ids", "tx", "g", "unknown/0 zero/0 gone/0",
			[]string{"gone[0:UNKNOWN_TOPIC_ID]", "unknown[0:UNKNOWN_TOPIC_ID]", "zero[0:UNKNOWN_TOPIC_ID]"}, false},
		{"mixed", "tx", "g", "compacted/0 unknown/0 t/0 t/9",
			[]string{"name:compacted compacted[0:TOPIC_AUTHORIZATION_FAILED]", "name:t t[0:NONE 9:UNKNOWN_TOPIC_OR_PARTITION]", "unknown[0:UNKNOWN_TOPIC_ID]"}, true},
		{"refused group", "tx", "g2", "t/0 unknown/0",
			[]string{"name:t t[0:GROUP_AUTHORIZATION_FAILED]", "unknown[0:GROUP_AUTHORIZATION_FAILED]"}, false},
		{"refused transactional id", "tx2", "g", "t/0 unknown/0",
			[]string{"t[0:TRANSACTIONAL_ID_AUTHORIZATION_FAILED]", "unknown[0:TRANSACTIONAL_ID_AUTHORIZATION_FAILED]"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := newErrorsHandlersWith(t, Config{Authorizer: allowAnonymous(
				write, resTxnID, "tx", read, resGroup, "g", read, resTopic, "t")})
			img, err := metadata.ApplyAll(withGoneTopic(t, base.cluster.Image()), []metadata.Record{
				&metadata.TopicRecord{Name: txn.StateTopic, ID: metadata.UUID{8}},
				&metadata.PartitionRecord{TopicID: metadata.UUID{8}, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
			})
			if err != nil {
				t.Fatal(err)
			}
			cfg := base.cfg
			cfg.Transactions = &codeTxns{}
			groups := &txnCommittingGroups{}
			h := New(cfg, fakeCluster{img: img}, base.replicas, groups, nil, base.log)
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.SetVersion(6)
			req.TransactionalID, req.Group, req.ProducerID, req.Generation = tc.txnID, tc.group, 5, -1
			topics, parts := topicSpec(tc.spec)
			for i, name := range topics {
				rt := kmsg.NewTxnOffsetCommitRequestTopic()
				rt.TopicID = topicIDs[name]
				for _, p := range parts[i] {
					rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
					rp.Partition, rp.Offset = p, 1
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
			}
			var got []string
			for _, rt := range serve(t, h, overWire(t, req)).(*kmsg.TxnOffsetCommitResponse).Topics {
				codes := map[int32]string{}
				for _, p := range rt.Partitions {
					codes[p.Partition] = codeName(p.ErrorCode)
				}
				got = append(got, idAnswer(rt.TopicID, rt.Topic, codes))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("answered %q, want %q", got, tc.want)
			}
			if committed := slices.Equal(groups.got, []string{"t/0"}); committed != tc.committed {
				t.Errorf("the coordinator committed %q", groups.got)
			}
		})
	}
}
