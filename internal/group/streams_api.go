package group

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StreamsGroupHeartbeat serves StreamsGroupHeartbeat v0-v1 (KIP-1071): joining
// with the application's topology (epoch 0), heartbeating with the member's
// epoch and owned tasks, and leaving (epoch -1). It also returns
// the internal topics the broker is to create for the group (repartition and
// changelog topics that do not exist yet); the answer's status says
// MISSING_INTERNAL_TOPICS until they do. It answers once the group's records
// are appended (a failed append: COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR).
// Put the client in ctx with WithClient.
func (c *Coordinator) StreamsGroupHeartbeat(ctx context.Context, req *kmsg.StreamsGroupHeartbeatRequest) (*kmsg.StreamsGroupHeartbeatResponse, []kmsg.CreateTopicsRequestTopic) {
	resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
	r := c.streamsHeartbeat(ctx, req)
	resp.ErrorCode = r.code
	resp.Status = []kmsg.StreamsGroupHeartbeatResponseStatus{}
	if r.code != 0 {
		resp.ErrorMessage = ptr(r.msg)
		return resp, nil
	}
	resp.MemberID = r.memberID
	resp.MemberEpoch = r.epoch
	if r.epoch < 0 { // left: nothing more, as Kafka answers
		return resp, nil
	}
	_, interval := c.streamsTimeouts(req.Group)
	resp.HeartbeatIntervalMillis = int32(interval.Milliseconds())
	resp.TaskOffsetIntervalMillis = int32(streamsTaskOffsetInterval.Milliseconds())
	resp.AcceptableRecoveryLag = r.lag
	resp.AcceptableRecoveryLagLegacy = int32(min(r.lag, math.MaxInt32))
	if r.status != nil {
		resp.Status = r.status
	}
	if r.active != nil {
		resp.ActiveTasks, resp.StandbyTasks, resp.WarmupTasks = taskIDs(r.active), taskIDs(r.standby), taskIDs(r.warmup)
	}
	resp.EndpointInformationEpoch = r.endpointEp
	resp.PartitionsByUserEndpoint = r.endpoints
	return resp, r.create
}

func (c *Coordinator) streamsHeartbeat(ctx context.Context, req *kmsg.StreamsGroupHeartbeatRequest) streamsResult {
	if r := validateStreamsHeartbeat(req); r.code != 0 {
		return r
	}
	p, code := c.partitionOf(req.Group)
	if code != 0 {
		return streamsError(code, "%s", kerr.ErrorForCode(code))
	}
	g := p.lookup(c, req.Group, req.MemberEpoch == joinEpoch)
	if g == nil && req.MemberEpoch < 0 {
		return streamsError(kerr.GroupIDNotFound.Code, "Group %s not found.", req.Group)
	}
	if g == nil {
		// Kafka answers GROUP_ID_NOT_FOUND, which Kafka Streams takes as fatal;
		// a group written by a Strata that did not persist streams groups has
		// no records, so a member of one is told to rejoin instead.
		return streamsError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, req.Group)
	}
	var r streamsResult
	var done <-chan error
	g.withLock(func() {
		r = g.streamsHeartbeatLocked(req, clientFrom(ctx))
		done = g.persistAwaitedLocked()
	})
	if code := c.awaitRecords(ctx, g, done != nil, done); code != 0 {
		return streamsError(code, "%s", kerr.ErrorForCode(code))
	}
	return r
}

// awaitRecords flushes g and waits for the records a heartbeat's
// persistRecordsLocked queued (queued false: nothing to wait for), so that
// the heartbeat is answered once the log holds what the answer says, as Kafka
// does. It returns 0, or the code Kafka answers a failed or timed-out write
// with.
func (c *Coordinator) awaitRecords(ctx context.Context, g *group, queued bool, done <-chan error) int16 {
	if !queued {
		return 0
	}
	c.flush(g)
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	return AppendErrorCode(err)
}

// StreamsGroupTopologyDescriptionUpdate serves StreamsGroupTopologyDescriptionUpdate
// v0 (KIP-1331), a member pushing its topology description for the broker's
// description plugin. Strata has none; like a Kafka 4.4 broker without one it
// answers UNSUPPORTED_VERSION, and never asks members to push
// (StreamsGroupHeartbeat v1's TopologyDescriptionRequired stays false).
func (c *Coordinator) StreamsGroupTopologyDescriptionUpdate(_ context.Context, req *kmsg.StreamsGroupTopologyDescriptionUpdateRequest) *kmsg.StreamsGroupTopologyDescriptionUpdateResponse {
	resp := req.ResponseKind().(*kmsg.StreamsGroupTopologyDescriptionUpdateResponse)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ErrorMessage = ptr("The broker has no streams group topology description plugin configured.")
	return resp
}

// taskIDs groups tasks by subtopology, sorted.
func taskIDs(ts partSet) []kmsg.TaskIDs {
	out := []kmsg.TaskIDs{}
	for _, tp := range ts.sorted() {
		if n := len(out); n > 0 && out[n-1].SubtopologyID == tp.topic {
			out[n-1].Partitions = append(out[n-1].Partitions, tp.partition)
			continue
		}
		t := kmsg.NewTaskIDs()
		t.SubtopologyID, t.Partitions = tp.topic, []int32{tp.partition}
		out = append(out, t)
	}
	return out
}

// StreamsGroupDescribe serves StreamsGroupDescribe v0-v1: each group's epochs,
// topology and members with their current and target tasks. A group that does
// not exist or is not a streams group answers GROUP_ID_NOT_FOUND. v1's topology
// description is never stored here (no description plugin, as a Kafka broker
// without one): asked for, its status is NOT_STORED.
func (c *Coordinator) StreamsGroupDescribe(_ context.Context, req *kmsg.StreamsGroupDescribeRequest) *kmsg.StreamsGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.StreamsGroupDescribeResponse)
	for _, id := range req.Groups {
		dg := kmsg.NewStreamsGroupDescribeResponseGroup()
		dg.Group = id
		c.describeStreams(id, &dg)
		if dg.ErrorCode == 0 {
			if req.IncludeAuthorizedOperations {
				dg.AuthorizedOperations = groupOperations
			}
			if req.IncludeTopologyDescription {
				dg.TopologyDescriptionStatus = topologyDescriptionNotStored
			}
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// topologyDescriptionNotStored is StreamsGroupDescribe v1's NOT_STORED.
const topologyDescriptionNotStored = 1

func (c *Coordinator) describeStreams(id string, dg *kmsg.StreamsGroupDescribeResponseGroup) {
	dg.ErrorCode, dg.ErrorMessage = c.describeGroupOf(id, "streams", func(g *group) bool { return g.st != nil },
		func(g *group) { g.describeStreamsLocked(dg) })
}

// describeStreamsLocked fills dg with the streams group's state and members.
func (g *group) describeStreamsLocked(dg *kmsg.StreamsGroupDescribeResponseGroup) {
	sg := g.st
	dg.State = sg.stateName()
	dg.Epoch, dg.AssignmentEpoch = sg.epoch, sg.targetEpoch
	dg.AssignorName = ptr(streamsAssignor)
	if sg.topology != nil {
		top := kmsg.NewStreamsGroupDescribeResponseGroupTopology()
		top.Epoch = sg.topology.Epoch
		top.Subtopologies = describeSubtopologies(sg.topology)
		dg.Topology = &top
	}
	for _, m := range sortedByID(sg.members) {
		dm := kmsg.NewStreamsGroupDescribeResponseGroupMember()
		dm.MemberID, dm.MemberEpoch = m.id, m.epoch
		dm.InstanceID = optional(m.instanceID)
		dm.RackID = optional(m.rackID)
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		dm.TopologyEpoch = m.topologyEpoch
		dm.ProcessID = m.processID
		if m.endpoint != nil {
			e := kmsg.NewStreamsGroupDescribeResponseGroupMemberUserEndpoint()
			e.Host, e.Port = m.endpoint.Host, m.endpoint.Port
			dm.UserEndpoint = &e
		}
		dm.ClientTags = []kmsg.StreamsGroupDescribeResponseGroupMemberClientTag{}
		for _, t := range m.clientTags {
			ct := kmsg.NewStreamsGroupDescribeResponseGroupMemberClientTag()
			ct.Key, ct.Value = t.Key, t.Value
			dm.ClientTags = append(dm.ClientTags, ct)
		}
		dm.TaskOffsets, dm.TaskEndOffsets = taskOffsets(m.taskOffsets), taskOffsets(m.taskEndOffsets)
		dm.Assignment = streamsAssignment(ownedSet(m.assigned), m.standby, m.warmup)
		dm.TargetAssignment = streamsAssignment(sg.target[m.id], sg.standbyTarget[m.id], nil)
		dg.Members = append(dg.Members, dm)
	}
	if dg.Members == nil {
		dg.Members = []kmsg.StreamsGroupDescribeResponseGroupMember{}
	}
}

func streamsAssignment(active, standby, warmup partSet) kmsg.StreamsAssignment {
	a := kmsg.NewStreamsAssignment()
	a.ActiveTasks, a.StandbyTasks, a.WarmupTasks = taskIDs(active), taskIDs(standby), taskIDs(warmup)
	return a
}

// taskOffsets lists task offset sums by subtopology and partition.
func taskOffsets(offsets map[topicPartition]int64) []kmsg.TaskOffset {
	out := make([]kmsg.TaskOffset, 0, len(offsets))
	for _, tp := range slices.SortedFunc(maps.Keys(offsets), compareTP) {
		t := kmsg.NewTaskOffset()
		t.SubtopologyID, t.Partition, t.Offset = tp.topic, tp.partition, offsets[tp]
		out = append(out, t)
	}
	return out
}

// describeSubtopologies is the registered topology as StreamsGroupDescribe shows
// it (as Kafka 4.4 does: internal topics with the partition counts the members
// sent, 0 where the broker decides), subtopologies sorted by id.
func describeSubtopologies(top *kmsg.StreamsGroupHeartbeatRequestTopology) []kmsg.StreamsGroupDescribeResponseGroupTopologySubtopology {
	subs := slices.Clone(top.Subtopologies)
	slices.SortFunc(subs, func(a, b kmsg.StreamsGroupHeartbeatRequestTopologySubtopology) int {
		return strings.Compare(a.SubtopologyID, b.SubtopologyID)
	})
	internal := func(tis []kmsg.TopicInfo) []kmsg.TopicInfo {
		if tis == nil {
			return []kmsg.TopicInfo{}
		}
		return tis
	}
	out := make([]kmsg.StreamsGroupDescribeResponseGroupTopologySubtopology, 0, len(subs))
	for _, s := range subs {
		d := kmsg.NewStreamsGroupDescribeResponseGroupTopologySubtopology()
		d.SubtopologyID = s.SubtopologyID
		d.SourceTopics = nonNil(s.SourceTopics)
		d.RepartitionSinkTopics = nonNil(s.RepartitionSinkTopics)
		d.StateChangelogTopics = internal(s.StateChangelogTopics)
		d.RepartitionSourceTopics = internal(s.RepartitionSourceTopics)
		out = append(out, d)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// validateStreamsFetchMember is OffsetFetch v9's check of a streams member: one
// naming itself must be a member at its current epoch.
func (g *group) validateStreamsFetchMemberLocked(memberID string, epoch int32) int16 {
	m := g.st.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case epoch != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}
