package group

import (
	"context"
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupHeartbeat serves ConsumerGroupHeartbeat v0-v1 (KIP-848): joining
// (epoch 0), heartbeating with the member's epoch and owned partitions, and leaving
// (epoch -1, or -2 for a static member that comes back). It waits for no other
// member, only for the group's records the heartbeat changed to be appended
// (consumer_records.go; a failed append answers Kafka's code for it): the answer
// carries the member's epoch and, when it changed or was asked for, its assignment.
// v0 hands out member ids; v1 members bring their own. Put the client in ctx with
// WithClient.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	r := c.consumerHeartbeat(ctx, req)
	resp.ErrorCode = r.code
	if r.code != 0 {
		resp.ErrorMessage = ptr(r.msg)
		return resp
	}
	resp.MemberID = ptr(r.memberID)
	resp.MemberEpoch = r.epoch
	_, interval := c.consumerTimeouts(req.Group)
	resp.HeartbeatIntervalMillis = int32(interval.Milliseconds())
	if r.assignment != nil {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, t := range c.assignmentTopics(r.assignment) {
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = t.TopicID, t.Partitions
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
	}
	return resp
}

func (c *Coordinator) consumerHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest) heartbeatResult {
	r, re := validateConsumerHeartbeat(req)
	if r.code != 0 {
		return r
	}
	p, code := c.partitionOf(req.Group)
	if code != 0 {
		return hbError(code, "%s", kerr.ErrorForCode(code))
	}
	g := p.lookup(c, req.Group, req.MemberEpoch == joinEpoch)
	if g == nil {
		return hbError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, req.Group)
	}
	var done <-chan error
	g.withLock(func() {
		r = g.consumerHeartbeatLocked(req, re, clientFrom(ctx))
		done = g.persistAwaitedLocked()
	})
	c.flush(g) // an upgrade or downgrade may have queued the classic record
	if code := c.awaitRecords(ctx, g, done != nil, done); code != 0 {
		return hbError(code, "%s", kerr.ErrorForCode(code))
	}
	return r
}

// assignmentTopics groups partitions by topic, with the topics' ids, sorted; topics
// that no longer exist are left out.
func (c *Coordinator) assignmentTopics(ps partSet) []kmsg.AssignmentTopicPartition {
	var out []kmsg.AssignmentTopicPartition
	for _, tp := range ps.sorted() {
		if n := len(out); n > 0 && out[n-1].Topic == tp.topic {
			out[n-1].Partitions = append(out[n-1].Partitions, tp.partition)
			continue
		}
		id, _, ok := c.cfg.Topics.Topic(tp.topic)
		if !ok {
			continue
		}
		t := kmsg.NewAssignmentTopicPartition()
		t.TopicID, t.Topic, t.Partitions = id, tp.topic, []int32{tp.partition}
		out = append(out, t)
	}
	if out == nil {
		out = []kmsg.AssignmentTopicPartition{}
	}
	return out
}

// consumerMemberType is ConsumerGroupDescribe v1's member type of a KIP-848 member.
const consumerMemberType = 1

// ConsumerGroupDescribe serves ConsumerGroupDescribe v0-v1. A group that does not
// exist, or is not a consumer group, answers GROUP_ID_NOT_FOUND (admin clients then
// fall back to DescribeGroups).
func (c *Coordinator) ConsumerGroupDescribe(_ context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = id
		c.describeConsumer(id, &dg)
		if dg.ErrorCode != 0 {
			dg.State = stateDead.String()
		} else if req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = groupOperations
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// describeGroupOf runs describeLocked with group id locked when it exists and
// is of the kind is accepts; otherwise it returns the error code and message
// the describe APIs answer (kind names the group type in the message).
func (c *Coordinator) describeGroupOf(id, kind string, is func(*group) bool, describeLocked func(*group)) (int16, *string) {
	p, code := c.partitionOf(id)
	if code != 0 {
		return code, ptr(kerr.ErrorForCode(code).Error())
	}
	g := p.lookup(c, id, false)
	if g == nil {
		return kerr.GroupIDNotFound.Code, ptr(fmt.Sprintf("Group %s not found.", id))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == stateDead || !is(g) {
		return kerr.GroupIDNotFound.Code, ptr(fmt.Sprintf("Group %s is not a %s group.", id, kind))
	}
	describeLocked(g)
	return 0, nil
}

func (c *Coordinator) describeConsumer(id string, dg *kmsg.ConsumerGroupDescribeResponseGroup) {
	dg.ErrorCode, dg.ErrorMessage = c.describeGroupOf(id, "consumer", func(g *group) bool { return g.cg != nil },
		func(g *group) { g.describeConsumerLocked(dg) })
}

// describeConsumerLocked fills dg with the consumer group's state and members.
func (g *group) describeConsumerLocked(dg *kmsg.ConsumerGroupDescribeResponseGroup) {
	cg := g.cg
	dg.State = cg.stateName()
	dg.Epoch = cg.epoch
	dg.AssignmentEpoch = cg.targetEpoch
	dg.AssignorName = preferredAssignor(cg.members) // as Kafka, the members' current choice
	for _, m := range cg.sortedMembers() {
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID = optional(m.instanceID)
		dm.RackID = optional(m.rackID)
		dm.MemberEpoch = m.epoch
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		dm.SubscribedTopics = m.topicNames
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		dm.SubscribedTopicRegex = optional(m.regex)
		// What the member owns: partitions it is still revoking included, as a
		// Kafka 4.4 node describes them.
		owns := m.assignedSet()
		maps.Copy(owns, m.revoking)
		dm.Assignment.TopicPartitions = g.c.assignmentTopics(owns)
		dm.TargetAssignment.TopicPartitions = g.c.assignmentTopics(cg.target[m.id])
		dm.MemberType = consumerMemberType
		if m.classic != nil {
			dm.MemberType = classicMemberType
		}
		dg.Members = append(dg.Members, dm)
	}
}

// validateFetchMember is OffsetFetch v9's check of a KIP-848 member: a request with a
// member id or epoch must come from a member at its current epoch (Kafka's
// ConsumerGroup.validateOffsetFetch). Requests without them (admin clients) and
// classic groups are not checked.
func (c *Coordinator) validateFetchMember(groupID string, memberID *string, epoch int32) int16 {
	if memberID == nil && epoch < 0 {
		return 0
	}
	p, code := c.partitionOf(groupID)
	if code != 0 {
		return code
	}
	g := p.lookup(c, groupID, false)
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.st != nil && g.state != stateDead {
		return g.validateStreamsFetchMemberLocked(deref(memberID), epoch)
	}
	if g.cg == nil || g.state == stateDead {
		return 0
	}
	m := g.cg.members[deref(memberID)]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case epoch != m.epoch && m.classic != nil:
		return kerr.IllegalGeneration.Code
	case epoch != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}
