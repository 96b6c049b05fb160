package group

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"
)

// kafkaConsumerRecords are consumer group records as Kafka 4.4's own classes
// write them (the generated ConsumerGroup*Key/Value of
// kafka-group-coordinator 4.4.0, serialized with
// MessageUtil.toCoordinatorTypePrefixedBytes and toVersionPrefixedBytes; topic
// ids 0102...10 and 1112...20; strings not set are Kafka's default "", not
// null): name, key, value. A null ClassicMemberMetadata and a metadata hash of
// 0 are left out of the tagged fields, a null AssignmentEpochs is not (a null
// array); a classic member's metadata is a present nullable struct (a leading
// 1). The pattern records are ConsumerGroupRegularExpressionKey/Value for
// pattern t.*: topics t1 and t2 at version 42 and time 1,700,000,000,000 ms,
// and a value with nothing set.
var kafkaConsumerRecords = [][3]string{
	{"metadata", "000300026367", "000000000007010008ffffffffffffffd6"},
	{"metadata-unhashed", "000300026367", "00000000000200"},
	{"member", "00050002636700026d31", "00000369310372310363310b2f3132372e302e302e3103037431037432010000afc80672616e676500"},
	{"member-regex", "00050002636700026d32", "0000010103633202680104742e2a000493e00100"},
	{"member-classic", "00050002636700026d33", "00000101036333026802037431010000ea6001010028010000afc8030672616e676505000300000013636f6f70657261746976652d737469636b79010000"},
	{"target-metadata", "000600026367", "0000000000070100080000018bcfe56800"},
	{"target-metadata-untimed", "000600026367", "00000000000300"},
	{"target", "00070002636700026d31", "0000030102030405060708090a0b0c0d0e0f10030000000000000002001112131415161718191a1b1c1d1e1f2002000000010000"},
	{"current", "00080002636700026d31", "0000000000070000000602020102030405060708090a0b0c0d0e0f10030000000000000002010009030000000500000007021112131415161718191a1b1c1d1e1f2002000000010100010000"},
	{"current-empty", "00080002636700026d32", "0000fffffffe0000000401010100"},
	{"regex", "0010000263670003742e2a", "000003037431037432000000000000002a0000018bcfe5680000"},
	{"regex-unset", "0010000263670003742e2a", "0000010000000000000000000000000000000000"},
}

// TestConsumerRecordsAsKafka decodes each record Kafka 4.4 wrote and encodes
// it again: the bytes must be Kafka's.
func TestConsumerRecordsAsKafka(t *testing.T) {
	checkRecordsAsKafka(t, kafkaConsumerRecords, kindConsumer, "cg", map[int16]func([]byte) ([]byte, error){
		typeConsumerMetadata: reencode(decodeConsumerMetadata),
		typeConsumerMember:   reencode(decodeConsumerMember),
		typeConsumerTargetMetadata: reencode(func(b []byte) (targetMetaValue, error) {
			return decodeTargetMeta(typeConsumerTargetMetadata, b)
		}),
		typeConsumerTargetMember: reencode(func(b []byte) (targetMemberValue, error) {
			return decodeTargetMember(typeConsumerTargetMember, b)
		}),
		typeConsumerCurrent: reencode(decodeConsumerCurrent),
		typeConsumerRegex:   reencode(decodeConsumerRegex),
	})
}

// TestConsumerRecordsFromSchema pins what the encoders write for values built
// by hand, byte by byte from the schemas, so that the round trip above cannot
// hide a field that decodes and encodes alike but wrongly.
func TestConsumerRecordsFromSchema(t *testing.T) {
	t1 := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"metadata", consumerMetadataValue{epoch: 7, metadataHash: -42}.appendTo(nil),
			"0000" + "00000007" + "01" + "00" + "08" + "ffffffffffffffd6"},
		{"member-classic", consumerMemberValue{
			clientID: "c3", clientHost: "h", topics: []string{"t1"}, rebalanceTimeoutMs: 60000,
			classic: &classicMemberValue{sessionTimeoutMs: 45000, protocols: []protocol{
				{name: "range", metadata: []byte{0, 3, 0, 0}}, {name: "cooperative-sticky", metadata: []byte{}},
			}},
		}.appendTo(nil),
			"0000" + "00" + "00" + "03" + "6333" + "02" + "68" + "02" + "03" + "7431" + "00" + "0000ea60" + "00" +
				"01" + "00" + "28" + "01" + "0000afc8" + "03" + "06" + "72616e6765" + "05" + "00030000" + "00" +
				"13" + hex.EncodeToString([]byte("cooperative-sticky")) + "01" + "00" + "00"},
		{"current", consumerCurrentValue{epoch: 7, prevEpoch: 6, state: kafkaMemberUnrevoked,
			assigned: []epochPartitions{{topicID: t1, partitions: []int32{0, 2}, epochs: []int32{5, 7}}},
			revoking: []epochPartitions{{topicID: t1, partitions: []int32{1}}},
		}.appendTo(nil),
			"0000" + "00000007" + "00000006" + "02" +
				"02" + hex.EncodeToString(t1[:]) + "03" + "00000000" + "00000002" + "01" + "00" + "09" + "03" + "00000005" + "00000007" +
				"02" + hex.EncodeToString(t1[:]) + "02" + "00000001" + "01" + "00" + "01" + "00" +
				"00"},
		{"regex", consumerRegexValue{topics: []string{"t1", "t2"}, version: 42, timestampMs: 1_700_000_000_000}.appendTo(nil),
			"0000" + "03" + "037431" + "037432" + "000000000000002a" + "0000018bcfe56800" + "00"},
	}
	for _, tt := range tests {
		if got := hex.EncodeToString(tt.got); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestConsumerRecordErrors: a truncated consumer value, one with bytes left
// over, one of another version, a classic member's metadata cut short and a
// key with trailing bytes are ErrCorruptRecord, and a partition holding one
// does not load.
func TestConsumerRecordErrors(t *testing.T) {
	key, _ := hex.DecodeString(kafkaConsumerRecords[4][1])
	value, _ := hex.DecodeString(kafkaConsumerRecords[4][2])
	classicCut := bytes.Clone(value)
	classicCut[bytes.Index(classicCut, []byte{0x01, 0x00, 0x28})+2] = 0x05 // the classic field's length
	version1 := append([]byte{0, 1}, value[2:]...)
	for name, rec := range map[string]Record{
		"truncated":   {Key: key, Value: value[:6]},
		"trailing":    {Key: key, Value: append(bytes.Clone(value), 0)},
		"version 1":   {Key: key, Value: version1},
		"classic cut": {Key: key, Value: classicCut},
		"key":         {Key: append(bytes.Clone(key), 0), Value: value},
	} {
		if err := newReplayed().apply(rec); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: replayed with %v", name, err)
		}
		store := newMemStore()
		c := New(DefaultConfig(), store, nil)
		store.logs[0] = []Record{rec}
		if err := c.LoadPartitionAt(context.Background(), 0, 0, store.records(0)); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: the partition loaded with %v", name, err)
		}
		c.Close()
	}
}

// TestConsumerRecordsFollowChanges drives a consumer group through random
// joins (static members and patterns among them, classic members once it is
// a consumer group), heartbeats reporting what the members own (so that
// revocations complete), leaves, static members leaving for now, session
// expiries, topics changing, failed appends and restarts. Each change must
// append exactly what comparing the whole group would have, byte for byte and
// in order, and a restart must bring back the group as it was: epochs,
// members, their states, assignments with the epochs they were assigned in,
// pending revocations, targets and classic members.
func TestConsumerRecordsFollowChanges(t *testing.T) {
	topicNames := []string{"a", "b", "c"}
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultConfig()
		cfg.GroupInitialRebalanceDelay = 0 // a classic join to an Empty group, turning it classic, is answered at once
		r := newRecordsRig(rt, cfg, map[string]int32{"a": 3, "b": 2, "c": 1})
		defer r.close()
		members := map[string]*consumerTestMember{}
		var classic []string // classic members' ids
		// inSync: the log holds the whole group as the catalog says now (the
		// last change was written, and no topic changed since).
		persisted, inSync := false, true
		heartbeat := func(m *consumerTestMember, epoch int32, join bool) kmsg.ConsumerGroupHeartbeatResponse {
			persisted = true
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			req.Version = 1
			req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = "g", m.id, epoch, optional(m.instance)
			switch {
			case join:
				req.RebalanceTimeoutMillis, req.Topics = 60000, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				if rapid.Bool().Draw(rt, "pattern") {
					req.SubscribedTopicRegex = ptr(rapid.SampledFrom([]string{"a|b", "c.*"}).Draw(rt, "regex"))
				} else {
					req.SubscribedTopicNames = rapid.SliceOfNDistinct(rapid.SampledFrom(topicNames), 1, 3, rapid.ID[string]).Draw(rt, "names")
				}
			case epoch >= 0 && rapid.Bool().Draw(rt, "report owned"):
				req.Topics = m.owned
			}
			resp := r.c.ConsumerGroupHeartbeat(context.Background(), req)
			m.take(resp)
			return *resp
		}
		for step := range 40 {
			before := r.logLen()
			failed := false
			persisted = false
			switch op := rapid.IntRange(0, 10).Draw(rt, "op"); op {
			case 0, 1: // a member joins, perhaps static
				id := fmt.Sprintf("m%d", rapid.IntRange(0, 4).Draw(rt, "member"))
				m := members[id]
				if m == nil {
					m = &consumerTestMember{id: id}
					if rapid.Bool().Draw(rt, "static") {
						m.instance = "i-" + id
					}
					members[id] = m
				}
				heartbeat(m, joinEpoch, true)
			case 2, 3: // a member heartbeats at its epoch (joins again when fenced)
				if m := drawMember(rt, members); m != nil {
					heartbeat(m, m.epoch, m.epoch == joinEpoch)
				}
			case 4: // a member leaves, or a static one leaves for now
				if m := drawMember(rt, members); m != nil {
					epoch := int32(leaveEpoch)
					if m.instance != "" && rapid.Bool().Draw(rt, "for now") {
						epoch = staticLeaveEpoch
					}
					heartbeat(m, epoch, false)
					if epoch == leaveEpoch {
						delete(members, m.id)
					}
				}
			case 5: // time passes; a topic is deleted, created (again) or grows
				r.clock.add(time.Duration(rapid.IntRange(0, 1500).Draw(rt, "ms")) * time.Millisecond)
				r.topics.set(rapid.SampledFrom(topicNames).Draw(rt, "topic"), int32(rapid.IntRange(0, 3).Draw(rt, "partitions")))
				inSync = false
			case 6: // a heartbeat whose append fails
				if m := drawMember(rt, members); m != nil {
					r.store.setFail(errors.New("injected"))
					heartbeat(m, m.epoch, m.epoch == joinEpoch)
					r.store.setFail(nil)
					failed = true
				}
			case 7: // the coordinator restarts from the log
				want := consumerSnapshot(r.c, "g")
				r.restart()
				if got := consumerSnapshot(r.c, "g"); inSync && got != want {
					rt.Fatalf("step %d: after a restart\n%s\nbefore it\n%s", step, got, want)
				}
				continue
			case 8: // a member's session expires, as its timer removes it
				if m := drawMember(rt, members); m != nil {
					expireMember(r.c, "g", func(g *group) {
						if cm := g.cg.members[m.id]; cm != nil {
							g.fenceConsumerMemberLocked(cm)
						}
					})
					persisted = true
					delete(members, m.id)
				}
			case 9: // a classic member joins (an Empty consumer group turns classic)
				if isConsumerGroup(r.c, "g") {
					if id := classicJoinConsumerGroup(r.c, rapid.SliceOfNDistinct(rapid.SampledFrom(topicNames), 1, 3, rapid.ID[string]).Draw(rt, "classic topics")); id != "" {
						classic = append(classic, id)
					}
					awaitGroupWrites(rt, r.c, "g")
					persisted = true
				}
			case 10: // a classic member leaves
				if len(classic) > 0 {
					i := rapid.IntRange(0, len(classic)-1).Draw(rt, "classic member")
					leave := kmsg.NewPtrLeaveGroupRequest()
					leave.Version = 3
					leave.Group, leave.Members = "g", []kmsg.LeaveGroupRequestMember{{MemberID: classic[i]}}
					resp := r.c.LeaveGroup(context.Background(), leave)
					classic = slices.Delete(classic, i, i+1)
					awaitGroupWrites(rt, r.c, "g")
					// It reached the group unless refused as a whole: a member
					// unknown there still has the group compare its records.
					persisted = resp.ErrorCode == 0
				}
			}
			r.check(step, before, persisted, failed)
			if persisted {
				inSync = !failed
			}
		}
	})
}

// classicJoinConsumerGroup joins group "g" with the classic protocol,
// subscribed to topics, and returns the member id ("" when refused).
func classicJoinConsumerGroup(c *Coordinator, topics []string) string {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version, meta.Topics = 3, topics
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 3
	join.Group, join.ProtocolType = "g", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 300000, 300000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	if resp := c.JoinGroup(context.Background(), join); resp.ErrorCode == 0 {
		return resp.MemberID
	}
	return ""
}

// awaitGroupWrites waits until group id has no writes queued or in flight
// (a classic request's records are written without the answer waiting).
func awaitGroupWrites(rt *rapid.T, c *Coordinator, id string) {
	for deadline := time.Now().Add(30 * time.Second); ; {
		idle := true
		withGroupLocked(c, id, func(g *group) { idle = !g.writing && len(g.writeQ) == 0 })
		if idle {
			return
		}
		if time.Now().After(deadline) {
			rt.Fatalf("group %s still writing after 30s", id)
		}
		runtime.Gosched()
	}
}

// consumerTestMember is what a test's KIP-848 consumer knows of itself.
type consumerTestMember struct {
	id, instance string
	epoch        int32
	owned        []kmsg.ConsumerGroupHeartbeatRequestTopic
}

// take applies a heartbeat's answer: being fenced or leaving sends the
// member back to joining with nothing; after another error it tries again at
// its epoch.
func (m *consumerTestMember) take(resp *kmsg.ConsumerGroupHeartbeatResponse) {
	switch {
	case resp.ErrorCode == kerr.FencedMemberEpoch.Code || resp.ErrorCode == kerr.UnknownMemberID.Code || resp.MemberEpoch < 0:
		m.epoch, m.owned = joinEpoch, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return
	case resp.ErrorCode != 0:
		return
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, t := range resp.Assignment.Topics {
			m.owned = append(m.owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
}

func drawMember(rt *rapid.T, members map[string]*consumerTestMember) *consumerTestMember {
	if len(members) == 0 {
		return nil
	}
	return members[rapid.SampledFrom(slices.Sorted(maps.Keys(members))).Draw(rt, "member")]
}

// consumerSnapshot prints what a restart must keep of consumer group id: its
// describe answer and, per member, the state the coordinator holds beyond it;
// partitions of topics that no longer exist are left out (a load drops them).
func consumerSnapshot(c *Coordinator, id string) string {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{id}
	d := c.ConsumerGroupDescribe(context.Background(), req).Groups[0]
	s := fmt.Sprintf("%s code=%d state=%s epoch=%d assignment-epoch=%d assignor=%s\n", d.Group, d.ErrorCode, d.State, d.Epoch, d.AssignmentEpoch, d.AssignorName)
	withGroupLocked(c, id, func(g *group) {
		if g.cg == nil {
			return
		}
		cg := g.cg
		live := func(ps partSet) []topicPartition {
			return slices.DeleteFunc(ps.sorted(), func(tp topicPartition) bool {
				_, _, ok := g.topicsLocked().Topic(tp.topic)
				return !ok
			})
		}
		owners := maps.Clone(cg.owners)
		maps.DeleteFunc(owners, func(tp topicPartition, _ string) bool { return len(live(partSet{tp: {}})) == 0 })
		s += fmt.Sprintf("target at %d static %v owners %v classic state %s\n",
			cg.targetAt.UnixMilli(), cg.static, owners, g.state)
		for _, m := range cg.sortedMembers() {
			s += fmt.Sprintf("  %s instance=%q rack=%q client=%s/%s epoch=%d prev=%d state=%d rebalance=%v names=%v regex=%q assignor=%q assigned=%v revoking=%v target=%v",
				m.id, m.instanceID, m.rackID, m.clientID, m.clientHost, m.epoch, m.prevEpoch, m.state, m.rebalanceTimeout,
				m.topicNames, m.regex, m.serverAssignor, assignedEpochs(m, live(m.assignedSet())), live(m.revoking), live(cg.target[m.id]))
			if m.classic != nil {
				s += fmt.Sprintf(" classic session=%v protocols=%v", m.classic.sessionTimeout, m.classic.protocols)
			}
			s += "\n"
		}
	})
	return s
}

// assignedEpochs lists partitions tps of m with the epochs it was assigned them in.
func assignedEpochs(m *cmember, tps []topicPartition) []string {
	var out []string
	for _, tp := range tps {
		out = append(out, fmt.Sprintf("%s/%d@%d", tp.topic, tp.partition, m.assigned[tp]))
	}
	return out
}

// TestConsumerSteadyHeartbeatEncodesNothing: in a settled consumer group a
// heartbeat that changes nothing encodes no record, neither its member's nor
// the group's, and appends nothing; one that changes the member's rebalance
// timeout encodes that member's records only.
func TestConsumerSteadyHeartbeatEncodesNothing(t *testing.T) {
	for _, subs := range []string{"names", "mixed"} {
		t.Run(subs, func(t *testing.T) {
			r := newConsumerBenchRig(t, subs, 8)
			defer r.c.Close()
			groups, members := checkSteadyHeartbeats(t, &consumerKind, r.c, r.store, r.topics, len(r.members),
				func(i int) { r.heartbeat(t, &r.members[i], i%2 == 0) })
			req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			m := r.members[0]
			req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "g", m.id, m.epoch, 45000
			if resp := r.c.ConsumerGroupHeartbeat(context.Background(), req); resp.ErrorCode != 0 {
				t.Fatal(kerr.ErrorForCode(resp.ErrorCode))
			}
			if *groups != 0 || *members != 1 {
				t.Fatalf("a new rebalance timeout encoded the group's records %d times and members' %d times, want 0 and 1", *groups, *members)
			}
		})
	}
}

// TestConsumerMetadataHashFollowsTopics: the metadata hash a consumer group
// keeps is written again, that of the topics as they are, after a subscribed
// topic grows, and only then.
func TestConsumerMetadataHashFollowsTopics(t *testing.T) {
	r := newConsumerBenchRig(t, "mixed", 4)
	defer r.c.Close()
	part := PartitionFor("g", r.c.cfg.OffsetsTopicPartitions)
	hash := func() int64 {
		t.Helper()
		var last []byte
		for _, rec := range r.store.log(part) {
			if bytes.Equal(rec.Key, recordKey(typeConsumerMetadata, "g", "")) {
				last = rec.Value
			}
		}
		v, err := decodeConsumerMetadata(last)
		if err != nil {
			t.Fatal(err)
		}
		return v.metadataHash
	}
	before := hash()
	r.topics.set("t", 65)
	r.heartbeat(t, &r.members[0], false)
	id, _, _ := r.topics.Topic("t")
	if got, want := hash(), topicsHash(map[string]topicMeta{"t": {id: id, partitions: 65}}); got != want || got == before {
		t.Fatalf("metadata hash %d after t grew, want %d (before %d)", got, want, before)
	}
}

// TestConsumerPatternsLoadResolved: a consumer group loaded from the log takes
// its patterns' topics from their records (type 16), so that neither the load
// nor the heartbeats after it list the catalog's topics while the catalog
// stays as it was, and nothing is written.
func TestConsumerPatternsLoadResolved(t *testing.T) {
	r := newConsumerBenchRig(t, "mixed", 8)
	r.c.Close()
	listed := r.topics.timesListed()
	r.c = New(r.cfg, r.store, nil)
	defer r.c.Close()
	if err := loadAll(context.Background(), r.c, r.store); err != nil {
		t.Fatal(err)
	}
	func() {
		defer checkNothingWritten(t, r.c, r.store)()
		for i := range r.members {
			r.heartbeat(t, &r.members[i], true)
		}
	}()
	if n := r.topics.timesListed() - listed; n != 0 {
		t.Fatalf("the catalog's topics were listed %d times after the load", n)
	}
}

// checkSteadyHeartbeats fails t unless n members' heartbeats (heartbeat(i)),
// each twice, the second time after a topic nobody reads was created, encode
// no record of group "g", of kind, and append nothing. It returns the counts
// of encodings (countRecordEncodings) for the test to go on with.
func checkSteadyHeartbeats(t *testing.T, kind *modernKind, c *Coordinator, store *memStore, topics *fakeTopics, n int, heartbeat func(i int)) (groups, members *int) {
	t.Helper()
	groups, members = countRecordEncodings(t, kind)
	func() {
		defer checkNothingWritten(t, c, store)()
		for i := range n {
			heartbeat(i)
		}
		topics.set("unread", 2)
		for i := range n {
			heartbeat(i)
		}
	}()
	if *groups != 0 || *members != 0 {
		t.Fatalf("steady heartbeats encoded the group's records %d times and members' %d times", *groups, *members)
	}
	return groups, members
}

// countRecordEncodings counts, until the test ends, how often the
// group-level records and a member's records of a group of kind are encoded.
func countRecordEncodings(t *testing.T, kind *modernKind) (groups, members *int) {
	groups, members = new(int), new(int)
	saved := *kind
	t.Cleanup(func() { *kind = saved })
	kind.groupRecords = func(g *group, s stateRecords) {
		*groups++
		saved.groupRecords(g, s)
	}
	kind.memberRecords = func(g *group, s stateRecords, id string) {
		*members++
		saved.memberRecords(g, s, id)
	}
	return groups, members
}
