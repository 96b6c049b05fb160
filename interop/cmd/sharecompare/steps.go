package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Acknowledgement types (KIP-932).
const (
	ackAccept  = 1
	ackRelease = 2
	ackReject  = 3
	ackRenew   = 4
)

func heartbeat(group, member string, epoch int32, topics ...string) func(e *env) kmsg.Request {
	return func(e *env) kmsg.Request {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch = names(e, group), names(e, member), epoch
		for _, t := range topics {
			req.SubscribedTopicNames = append(req.SubscribedTopicNames, names(e, t))
		}
		return req
	}
}

// names maps the script's placeholders to this system's names.
func names(e *env, s string) string {
	switch s {
	case "G":
		return e.group
	case "C":
		return e.classic
	case "C2":
		return e.classic + "-2"
	case "A":
		return e.aliceGrp
	case "A2":
		return e.aliceGrp + "-2"
	case "T":
		return e.topic
	case "U":
		return e.other
	case "":
		return ""
	}
	return s + "-" + e.run
}

func topicID(e *env, t string) [16]byte {
	switch t {
	case "T":
		return e.topicID
	case "U":
		return e.otherID
	}
	return [16]byte{1, 2, 3}
}

// beat is one heartbeat of a member at the epoch it last had, as user.
func (s *system) beat(ctx context.Context, user, group, member string) (*kmsg.ShareGroupHeartbeatResponse, error) {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID = names(&s.env, group), names(&s.env, member)
	req.MemberEpoch = s.epochs[req.GroupID+"/"+req.MemberID]
	resp, err := s.send(ctx, user, 99, false, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.ShareGroupHeartbeatResponse), nil
}

// untilAssigned heartbeats member of group, at its epoch, until it has
// partitions, and shows how many. Kafka assigns a partition only once its group
// coordinator has initialized the share partition's state (asked for after the
// first heartbeat naming the topic, a target computed at most once a second), so
// this is also how the script knows Kafka's state is there before it fetches.
// The epoch it ends at is not shown: in Kafka it depends on whether that
// initialization was done before the group's last target was computed.
func untilAssigned(group, member string) func(ctx context.Context, s *system) string {
	return func(ctx context.Context, s *system) string {
		key := names(&s.env, group) + "/" + names(&s.env, member)
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := s.beat(ctx, "admin", group, member)
			switch {
			case err != nil:
				return "error: " + errText(err)
			case resp.ErrorCode != 0:
				return "error: " + kerr.ErrorForCode(resp.ErrorCode).Error()
			case s.parts[key] > 0:
				return fmt.Sprintf("partitions=%d", s.parts[key])
			case time.Now().After(deadline):
				return "no partitions in 30s"
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// keepAlive heartbeats the members (user, group, member triples) at their
// epochs, so that however slowly the script runs their sessions (45 s) never
// end before the steps that need them; it shows only the error codes (the
// epochs are untilAssigned's).
func keepAlive(members ...string) func(ctx context.Context, s *system) string {
	return func(ctx context.Context, s *system) string {
		var out []string
		for i := 0; i+2 < len(members); i += 3 {
			resp, err := s.beat(ctx, members[i], members[i+1], members[i+2])
			switch {
			case err != nil:
				out = append(out, "error: "+errText(err))
			case resp.ErrorCode != 0:
				out = append(out, kerr.ErrorForCode(resp.ErrorCode).Error())
			default:
				out = append(out, "NONE")
			}
		}
		return fmt.Sprint(out)
	}
}

// assignmentInterval is group.share.assignment.interval.ms (Kafka's and
// Strata's default): a step after it sees a new target assignment computed.
const assignmentInterval = time.Second

func describeGroups(ids ...string) func(e *env) kmsg.Request {
	return func(e *env) kmsg.Request {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.IncludeAuthorizedOperations = true
		for _, id := range ids {
			req.GroupIDs = append(req.GroupIDs, names(e, id))
		}
		return req
	}
}

// describeOffsets describes group's offsets of topic's partitions; no topic: all.
func describeOffsets(group, topic string, partitions ...int32) func(e *env) kmsg.Request {
	return func(e *env) kmsg.Request {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		g.GroupID = names(e, group)
		if topic != "" {
			t := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
			t.Topic, t.Partitions = names(e, topic), partitions
			g.Topics = append(g.Topics, t)
		}
		req.Groups = append(req.Groups, g)
		return req
	}
}

func alterOffsets(group, topic string, partition int32, offset int64) func(e *env) kmsg.Request {
	return func(e *env) kmsg.Request {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = names(e, group)
		t := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		t.Topic = names(e, topic)
		p := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		p.Partition, p.StartOffset = partition, offset
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		return req
	}
}

func deleteOffsets(group string, topics ...string) func(e *env) kmsg.Request {
	return func(e *env) kmsg.Request {
		req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		req.GroupID = names(e, group)
		for _, tn := range topics {
			t := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
			t.Topic = names(e, tn)
			req.Topics = append(req.Topics, t)
		}
		return req
	}
}

// readSummary is a ReadShareGroupStateSummary (key 87) of group's share
// partition of topic (its coordinator: both systems are one node).
func readSummary(group, topic string, partition int32) func(e *env) kmsg.Request {
	return func(e *env) kmsg.Request {
		req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		req.GroupID = names(e, group)
		t := kmsg.NewReadShareGroupStateSummaryRequestTopic()
		t.TopicID = topicID(e, topic)
		p := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
		p.Partition = partition
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		return req
	}
}

// shareFetch is a ShareFetch of member of group in session epoch for topic's
// partition, with acks (first, last, type) triples.
func shareFetch(group, member string, epoch int32, topic string, partition int32, acks ...int64) func(e *env) kmsg.Request {
	return shareFetchWait(100, group, member, epoch, topic, partition, acks...)
}

// shareFetchWait is shareFetch with a MaxWaitMillis of wait.
func shareFetchWait(wait int32, group, member string, epoch int32, topic string, partition int32, acks ...int64) func(e *env) kmsg.Request {
	return func(e *env) kmsg.Request {
		req := kmsg.NewPtrShareFetchRequest()
		g, m := names(e, group), names(e, member)
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &g, &m, epoch
		if member == "" {
			req.MemberID = nil
		}
		req.MaxRecords, req.BatchSize, req.MaxBytes, req.MaxWaitMillis, req.MinBytes = 5, 5, 1<<20, wait, 1
		t := kmsg.NewShareFetchRequestTopic()
		t.TopicID = topicID(e, topic)
		p := kmsg.NewShareFetchRequestTopicPartition()
		p.Partition = partition
		for i := 0; i+2 < len(acks); i += 3 {
			b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
			b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = acks[i], acks[i+1], []int8{int8(acks[i+2])}
			p.AcknowledgementBatches = append(p.AcknowledgementBatches, b)
		}
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		return req
	}
}

func shareAck(group, member string, epoch int32, topic string, first, last int64, ackType int8) func(e *env) kmsg.Request {
	return func(e *env) kmsg.Request {
		req := kmsg.NewPtrShareAcknowledgeRequest()
		g, m := names(e, group), names(e, member)
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &g, &m, epoch
		t := kmsg.NewShareAcknowledgeRequestTopic()
		t.TopicID = topicID(e, topic)
		p := kmsg.NewShareAcknowledgeRequestTopicPartition()
		b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = first, last, []int8{ackType}
		p.AcknowledgementBatches = append(p.AcknowledgementBatches, b)
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		return req
	}
}

// steps is the script. Placeholders: G the share group, C a classic group with a
// committed offset, A the group alice may READ, DESCRIBE and DELETE, T a topic of
// two partitions with ten records on 0 (alice: no ACL), U a topic of one partition
// (alice: READ, DESCRIBE); any other name gets the run's suffix.
func steps() []step {
	return []step{
		// ShareGroupHeartbeat (76).
		{name: "heartbeat: empty group id", req: heartbeat("", "m1", 0, "T")},
		{name: "heartbeat: empty member id", req: heartbeat("G", "", 0, "T")},
		{name: "heartbeat: epoch -2", req: heartbeat("G", "m1", -2, "T")},
		{name: "heartbeat: join without topics", req: heartbeat("G", "m1", 0)},
		{name: "heartbeat: unknown group, epoch 3", req: heartbeat("nogroup", "m1", 3, "T")},
		{name: "heartbeat: unknown group, leave", req: heartbeat("nogroup", "m1", -1)},
		{name: "heartbeat: classic group", req: heartbeat("C", "m1", 0, "T")},
		{name: "heartbeat: join m1", req: heartbeat("G", "m1", 0, "T")},
		{name: "heartbeat: m1 epoch 7", req: heartbeat("G", "m1", 7)},
		{name: "heartbeat: unknown member epoch 1", req: heartbeat("G", "m9", 1)},
		{name: "heartbeat: unknown member leaves", req: heartbeat("G", "m9", -1)},
		// At least the assignment interval after m1's join, so that m2's join
		// computes a new target (epoch 3) whatever the machine's speed.
		{name: "heartbeat: m2 joins an unknown topic", after: assignmentInterval + 200*time.Millisecond, req: heartbeat("G", "m2", 0, "notopic")},
		{name: "heartbeat: alice, group not allowed", user: "alice", req: heartbeat("G", "m3", 0, "U")},
		{name: "heartbeat: alice, topic not describable", user: "alice", req: heartbeat("A", "m3", 0, "T")},
		{name: "heartbeat: alice, allowed", user: "alice", req: heartbeat("A", "m4", 0, "U")},

		// ShareGroupDescribe (77).
		{name: "describe: unknown group", req: describeGroups("nogroup")},
		{name: "describe: classic group converted", req: describeGroups("C")},
		{name: "describe: classic group", req: describeGroups("C2")},
		{name: "describe: empty group id", req: describeGroups("")},
		{name: "describe: share group", req: describeGroups("G")},
		{name: "describe: alice, not allowed and allowed", user: "alice", req: describeGroups("G", "A")},

		// Kafka's state of T's partitions is there once m1 has them.
		{name: "heartbeat: m1 until it has partitions", do: untilAssigned("G", "m1")},

		// ShareFetch (78).
		{name: "fetch: no member id", req: shareFetch("G", "", 0, "T", 0)},
		{name: "fetch: acks when opening", req: shareFetch("G", "f1", 0, "T", 0, 0, 0, ackAccept)},
		{name: "fetch: no session", req: shareFetch("G", "f2", 3, "T", 0)},
		{name: "fetch: unknown topic id", req: shareFetch("G", "f3", 0, "X", 0)},
		{name: "fetch: partition out of range", req: shareFetch("G", "f4", 0, "T", 9)},
		{name: "fetch: empty group id", req: shareFetch("", "f5", 0, "T", 0)},
		{name: "fetch: alice, group not allowed", user: "alice", req: shareFetch("G", "f6", 0, "U", 0)},
		{name: "fetch: alice, topic not readable", user: "alice", req: shareFetch("A", "f7", 0, "T", 0)},
		{name: "fetch: open m1 (acquires)", req: shareFetchWait(5000, "G", "m1", 0, "T", 0)},
		{name: "fetch: session epoch out of step", req: shareFetch("G", "m1", 5, "T", 0)},
		{name: "fetch: ack past the log end", req: shareFetch("G", "m1", 1, "T", 0, 50, 60, ackAccept)},
		{name: "fetch: unknown ack type", req: shareFetch("G", "m1", 2, "T", 0, 0, 0, 9)},
		{name: "fetch: RENEW at v1", maxShare: 1, req: shareFetch("G", "m1", 3, "T", 0, 0, 0, ackRenew)},
		{name: "fetch: first after last", req: shareFetch("G", "m1", 4, "T", 0, 3, 2, ackAccept)},
		{name: "fetch: open n1", req: shareFetchWait(5000, "G", "n1", 0, "T", 0)},
		{name: "fetch: n1 acks an offset m1 holds", req: shareFetch("G", "n1", 1, "T", 0, 0, 0, ackAccept)},

		// ShareAcknowledge (79).
		{name: "ack: epoch 0", req: shareAck("G", "m1", 0, "T", 0, 0, ackAccept)},
		{name: "ack: no session", req: shareAck("G", "nosession", 1, "T", 0, 0, ackAccept)},
		{name: "ack: epoch out of step", req: shareAck("G", "m1", 9, "T", 0, 0, ackAccept)},
		{name: "ack: offset m1 holds, by n1", req: shareAck("G", "n1", 2, "T", 0, 0, ackAccept)},
		{name: "ack: past the log end", req: shareAck("G", "m1", 5, "T", 40, 41, ackAccept)},
		{name: "ack: unknown ack type", req: shareAck("G", "m1", 6, "T", 0, 0, 7)},
		{name: "ack: RENEW at v1", maxShare: 1, req: shareAck("G", "m1", 7, "T", 0, 0, ackRenew)},
		{name: "ack: first after last", req: shareAck("G", "m1", 8, "T", 1, 0, ackAccept)},
		{name: "ack: unknown topic id", req: shareAck("G", "m1", 9, "X", 0, 0, ackAccept)},
		{name: "ack: accept 0", req: shareAck("G", "m1", 10, "T", 0, 0, ackAccept)},
		{name: "ack: accept 0 again", req: shareAck("G", "m1", 11, "T", 0, 0, ackAccept)},
		{name: "ack: reject 1", req: shareAck("G", "m1", 12, "T", 1, 1, ackReject)},

		// DescribeShareGroupOffsets (90).
		{name: "offsets: unknown group", req: describeOffsets("nogroup", "T", 0)},
		{name: "offsets: unknown group, all", req: describeOffsets("nogroup", "")},
		{name: "offsets: classic group", req: describeOffsets("C2", "T", 0)},
		{name: "offsets: empty group id", req: describeOffsets("", "T", 0)},
		{name: "offsets: share group, T 0 and 1", req: describeOffsets("G", "T", 0, 1)},
		{name: "offsets: share group, unknown topic", req: describeOffsets("G", "notopic", 0)},
		{name: "offsets: share group, partition 9", own: true, req: describeOffsets("G", "T", 9)},
		{name: "offsets: share group, all", req: describeOffsets("G", "")},
		{name: "offsets: alice, group not allowed", user: "alice", req: describeOffsets("G", "U", 0)},
		{name: "offsets: alice, topic not describable", user: "alice", req: describeOffsets("A", "T", 0)},

		// ReadShareGroupStateSummary (87), the share coordinator's answer behind
		// DescribeShareGroupOffsets.
		{name: "summary: share partition", req: readSummary("G", "T", 0)},
		{name: "summary: unknown group", req: readSummary("nogroup", "T", 0)},
		{name: "summary: unknown topic id", req: readSummary("G", "X", 0)},
		{name: "summary: partition 9", req: readSummary("G", "T", 9)},
		{name: "summary: partition -1", req: readSummary("G", "T", -1)},
		{name: "summary: empty group id", req: readSummary("", "T", 0)},
		{name: "summary: alice, no CLUSTER_ACTION", user: "alice", req: readSummary("A", "U", 0)},

		// AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92).
		{name: "keepalive: m1 and alice's m4", do: keepAlive("admin", "G", "m1", "alice", "A", "m4")},
		{name: "alter: group with members", req: alterOffsets("G", "T", 0, 3)},
		{name: "delete: group with members", req: deleteOffsets("G", "T")},
		{name: "alter: classic group", req: alterOffsets("C2", "T", 0, 3)},
		{name: "delete: classic group", req: deleteOffsets("C2", "T")},
		{name: "alter: unknown group (created)", req: alterOffsets("newgroup", "T", 0, 3)},
		{name: "describe: the altered group", req: describeGroups("newgroup")},
		{name: "offsets: the altered group", req: describeOffsets("newgroup", "T", 0)},
		{name: "summary: the altered group", req: readSummary("newgroup", "T", 0)},
		{name: "alter: unknown topic", req: alterOffsets("newgroup", "notopic", 0, 3)},
		{name: "alter: partition 9", req: alterOffsets("newgroup", "T", 9, 3)},
		{name: "alter: negative offset", req: alterOffsets("newgroup", "T", 1, -5)},
		{name: "alter: past the end", req: alterOffsets("newgroup", "T", 0, 500)},
		{name: "offsets: after past the end", req: describeOffsets("newgroup", "T", 0)},
		{name: "alter: empty group id", req: alterOffsets("", "T", 0, 3)},
		{name: "delete: unknown group", req: deleteOffsets("nogroup", "T")},
		{name: "delete: empty group id", req: deleteOffsets("", "T")},
		{name: "delete: unknown topic", req: deleteOffsets("newgroup", "notopic")},
		{name: "delete: topic the group has no state for", req: deleteOffsets("newgroup", "U")},
		{name: "delete: T", req: deleteOffsets("newgroup", "T")},
		{name: "offsets: after delete", req: describeOffsets("newgroup", "T", 0)},
		{name: "alter: alice, group not allowed", user: "alice", req: alterOffsets("G", "U", 0, 0)},
		{name: "alter: alice, topic not readable", user: "alice", req: alterOffsets("A2", "T", 0, 0)},
		{name: "alter: alice, group with members", user: "alice", req: alterOffsets("A", "T", 0, 0)},
		{name: "alter: alice, allowed", user: "alice", req: alterOffsets("A2", "U", 0, 0)},
		{name: "offsets: alice, allowed", user: "alice", req: describeOffsets("A2", "U", 0)},
		{name: "describe: alice, authorized operations", user: "alice", req: describeGroups("A2")},
		{name: "delete: alice, group not allowed", user: "alice", req: deleteOffsets("G", "U")},
		{name: "delete: alice, topic not readable", user: "alice", req: deleteOffsets("A2", "T")},
		{name: "delete: alice, group with members", user: "alice", req: deleteOffsets("A", "U")},
		{name: "delete: alice, allowed", user: "alice", req: deleteOffsets("A2", "U")},

		// Leaving.
		{name: "heartbeat: m1 leaves", req: heartbeat("G", "m1", -1)},
		{name: "heartbeat: m1 leaves again", req: heartbeat("G", "m1", -1)},
	}
}
