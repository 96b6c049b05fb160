package group

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the membership side of KIP-932 share groups: ShareGroupHeartbeat and
// ShareGroupDescribe. Members of a share group may share partitions: the
// coordinator assigns every subscribed partition to at least one member and every
// member at least one partition where it can, and a member takes its new assignment
// at once (there is nothing to revoke: records are handed out by the share-partition
// leaders, package share). Like a consumer group, a share group shows the classic
// side the state Empty or Stable. Its membership is written to __consumer_offsets
// (share_records.go), and a heartbeat answers once the log holds what it says.
//
// Epochs follow Kafka 4.4's group coordinator:
//  1. A new share group is at group epoch 1, so its first member joins at 2.
//  2. A member joining, changing its subscription or leaving, or a subscribed
//     topic changing, bumps the group epoch.
//  3. A heartbeat computes a new target assignment, at the group epoch, when the
//     target is older than the group epoch and the last one was computed at least
//     ShareAssignmentInterval ago (group.share.assignment.interval.ms); otherwise
//     the member keeps to the older target (a member new since then gets nothing).
//  4. The member's epoch and assignment are then its target's.
// Kafka assigns a partition only once its group coordinator has initialized the
// partition's share state, so its first member's assignment comes on a later
// heartbeat at the next epoch; Strata's share-partition leaders initialize state
// themselves, and partitions are assigned at once (docs/protocol.md).

const (
	shareProtocolType = "share"
	shareAssignor     = "simple" // Kafka's name for its share-group assignor
)

// shareGroup is the share-group side of a group.
type shareGroup struct {
	epoch       int32     // the group epoch
	targetEpoch int32     // the epoch of target; 0 before the first
	targetAt    time.Time // when target was computed
	members     map[string]*smember
	// subscribers counts the members subscribed to each topic (addMember,
	// removeMember, subscribe), so that a heartbeat knows the group's
	// subscription without walking its members.
	subscribers map[string]int
	target      map[string]partSet // by member id
	topics      map[string]topicMeta
	topicsCheck catalogCheck // when topics were last found current
	// stale: the group was loaded and its topics changed since its epoch (another
	// metadata hash), so its next heartbeat starts a new epoch.
	stale bool
}

// shareFirstEpoch is a new share group's epoch, as in Kafka 4.4.
const shareFirstEpoch = 1

type smember struct {
	id, rackID, clientID, clientHost string
	epoch, prevEpoch                 int32
	topicNames                       []string
	assigned                         partSet
	sessionTimer                     *time.Timer
	sessionToken                     uint64
}

func newShareGroup() *shareGroup {
	return &shareGroup{epoch: shareFirstEpoch, members: make(map[string]*smember), subscribers: make(map[string]int),
		target: make(map[string]partSet), topics: make(map[string]topicMeta)}
}

// addMember adds m, with the topics it subscribes to.
func (sg *shareGroup) addMember(m *smember) {
	sg.members[m.id] = m
	sg.countSubscribers(m.topicNames, 1)
}

// removeMember removes m and its subscription.
func (sg *shareGroup) removeMember(m *smember) {
	delete(sg.members, m.id)
	sg.countSubscribers(m.topicNames, -1)
}

// subscribe makes topics m's subscription.
func (sg *shareGroup) subscribe(m *smember, topics []string) {
	sg.countSubscribers(m.topicNames, -1)
	m.topicNames = topics
	sg.countSubscribers(topics, 1)
}

// countSubscribers adds delta to the count of each of topics, dropping the
// counts that reach zero.
func (sg *shareGroup) countSubscribers(topics []string, delta int) {
	for _, t := range topics {
		if sg.subscribers[t] += delta; sg.subscribers[t] <= 0 {
			delete(sg.subscribers, t)
		}
	}
}

func (sg *shareGroup) stateName() string {
	if len(sg.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

func (sg *shareGroup) sortedMembers() []*smember { return sortedByID(sg.members) }

// ShareGroupHeartbeat serves ShareGroupHeartbeat v1 (members bring their own ids):
// joining (epoch 0),
// heartbeating and leaving (epoch -1) a share group. The answer carries the member's
// epoch and, when it changed, its assignment. Put the client in ctx with WithClient.
func (c *Coordinator) ShareGroupHeartbeat(ctx context.Context, req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	r := c.shareHeartbeat(ctx, req)
	resp.ErrorCode = r.code
	if r.code != 0 {
		resp.ErrorMessage = optional(r.msg)
		return resp
	}
	resp.MemberID = ptr(r.memberID)
	resp.MemberEpoch = r.epoch
	_, interval := c.shareTimeouts(req.GroupID)
	resp.HeartbeatIntervalMillis = int32(interval.Milliseconds())
	if r.assignment != nil {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for _, t := range c.assignmentTopics(r.assignment) {
			at := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			at.TopicID, at.Partitions = t.TopicID, t.Partitions
			a.TopicPartitions = append(a.TopicPartitions, at)
		}
		resp.Assignment = &a
	}
	return resp
}

func (c *Coordinator) shareHeartbeat(ctx context.Context, req *kmsg.ShareGroupHeartbeatRequest) heartbeatResult {
	inv := kerr.InvalidRequest.Code
	switch {
	case req.GroupID == "":
		return hbError(inv, "GroupId can't be empty.")
	case req.MemberID == "":
		return heartbeatResult{code: inv} // Kafka 4.4 answers this one without a message
	case req.RackID != nil && *req.RackID == "":
		return hbError(inv, "RackId can't be empty.")
	case req.MemberEpoch < leaveEpoch:
		return hbError(inv, "MemberEpoch is invalid.")
	case req.MemberEpoch == joinEpoch && len(req.SubscribedTopicNames) == 0:
		return hbError(inv, "SubscribedTopicNames must be set in first request.")
	}
	p, code := c.partitionOf(req.GroupID)
	if code != 0 {
		return hbError(code, "%s", kerr.ErrorForCode(code))
	}
	g := p.lookup(c, req.GroupID, req.MemberEpoch == joinEpoch)
	switch {
	case g == nil && req.MemberEpoch == leaveEpoch:
		return hbError(kerr.GroupIDNotFound.Code, "Group %s not found.", req.GroupID)
	case g == nil:
		return hbError(kerr.GroupIDNotFound.Code, "Share group %s not found.", req.GroupID)
	}
	var r heartbeatResult
	var done <-chan error
	g.withLock(func() {
		r = g.shareHeartbeatLocked(req, clientFrom(ctx))
		done = g.persistAwaitedLocked()
	})
	if code := c.awaitRecords(ctx, g, done != nil, done); code != 0 {
		return hbError(code, "%s", kerr.ErrorForCode(code))
	}
	return r
}

func (g *group) shareHeartbeatLocked(req *kmsg.ShareGroupHeartbeatRequest, cl Client) heartbeatResult {
	if g.state == stateDead {
		return hbError(kerr.CoordinatorNotAvailable.Code, "Group %s is being deleted.", g.id)
	}
	if g.sg == nil {
		switch {
		case !g.isSimpleLocked() || (req.MemberEpoch != joinEpoch && len(g.offsets) > 0):
			return hbError(kerr.GroupIDNotFound.Code, "Group %s is not a share group.", g.id)
		case req.MemberEpoch != joinEpoch:
			return hbError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, g.id)
		}
		g.becomeShareGroupLocked() // a joining member takes an empty classic group with offsets, as in Kafka 4.4
	}
	sg := g.sg
	m := sg.members[req.MemberID]
	if req.MemberEpoch == leaveEpoch {
		if m == nil {
			return hbError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, g.id)
		}
		g.c.log.Info("member left share group", "group", g.id, "member", m.id)
		g.removeShareMemberLocked(m)
		return heartbeatResult{memberID: m.id, epoch: leaveEpoch}
	}
	changed := false
	switch {
	case req.MemberEpoch == joinEpoch && m == nil:
		m = &smember{id: req.MemberID, assigned: partSet{}}
		sg.addMember(m)
		changed = true
		g.c.log.Info("member joined share group", "group", g.id, "member", m.id)
	case m == nil:
		return hbError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, g.id)
	case req.MemberEpoch != joinEpoch && req.MemberEpoch != m.epoch:
		side := "greater"
		if req.MemberEpoch < m.epoch {
			side = "smaller"
		}
		return hbError(kerr.FencedMemberEpoch.Code, "The share group member has a %s member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", side, req.MemberEpoch, m.epoch)
	}
	if req.MemberEpoch == joinEpoch {
		m.clientID, m.clientHost = cl.ID, cl.Host
		g.touchMemberLocked(m.id)
	}
	if req.RackID != nil && *req.RackID != m.rackID {
		m.rackID = *req.RackID
		g.touchMemberLocked(m.id)
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.topicNames) {
			sg.subscribe(m, names)
			g.touchMemberLocked(m.id)
			changed = true
		}
	}
	if changed || sg.stale || g.shareTopicsChangedLocked() {
		g.bumpShareEpochLocked()
	}
	g.maybeShareTargetLocked()
	before := m.assigned
	if m.epoch != sg.targetEpoch {
		m.prevEpoch, m.epoch = m.epoch, sg.targetEpoch
		m.assigned = sg.target[m.id].clone()
		if m.assigned == nil {
			m.assigned = partSet{} // a member new since the target was computed
		}
		g.touchMemberLocked(m.id)
	}
	g.armShareSessionLocked(m)
	if changed {
		g.syncShareViewLocked()
	}
	r := heartbeatResult{memberID: m.id, epoch: m.epoch}
	// As in Kafka: the assignment goes with a full request (one naming the
	// subscription) and when it changed, not with a new epoch alone.
	if req.MemberEpoch == joinEpoch || req.SubscribedTopicNames != nil || !before.equal(m.assigned) {
		r.assignment = m.assigned.clone()
	}
	return r
}

// shareSubscriptionLocked describes every topic a member subscribes to that
// exists, asking the catalog once per topic.
func (g *group) shareSubscriptionLocked() map[string]topicMeta {
	cat := g.topicsLocked()
	out := make(map[string]topicMeta)
	for t := range g.sg.subscribers {
		if id, n, ok := cat.Topic(t); ok {
			out[t] = topicMeta{id: id, partitions: n}
		}
	}
	return out
}

// shareTopicsChangedLocked reports whether a subscribed topic appeared, went,
// was recreated or grew since the group epoch was last bumped. Only a new
// catalog version can tell so: the members' subscriptions change only with an
// epoch bump, which takes the topics again.
func (g *group) shareTopicsChangedLocked() bool {
	return g.sg.topicsCheck.changed(g.topicsLocked(), g.sg.topics, g.shareSubscriptionLocked)
}

// bumpShareEpochLocked starts a new group epoch; its target assignment comes with
// a later maybeShareTargetLocked.
func (g *group) bumpShareEpochLocked() {
	g.sg.epoch++
	g.sg.topics = g.sg.topicsCheck.take(g.topicsLocked(), g.shareSubscriptionLocked)
	g.sg.stale = false
	g.touchGroupLocked()
}

// maybeShareTargetLocked computes the target assignment of the group epoch if the
// target is older and the assignment interval has passed since the last one: the
// uniform assignment over the members subscribed to each topic, then every member
// still without a partition shares the least-shared one it is subscribed to.
func (g *group) maybeShareTargetLocked() {
	sg := g.sg
	now := g.c.now()
	if sg.targetEpoch >= sg.epoch || (!sg.targetAt.IsZero() && now.Sub(sg.targetAt) < g.c.cfg.ShareAssignmentInterval) {
		return
	}
	spec := assignSpec{subscribed: map[string][]string{}, partitions: map[string]int32{}, previous: sg.target}
	for t, tm := range sg.topics {
		spec.partitions[t] = tm.partitions
	}
	for _, m := range sg.sortedMembers() {
		spec.members = append(spec.members, m.id)
		for _, t := range m.topicNames {
			if _, ok := sg.topics[t]; ok {
				spec.subscribed[m.id] = append(spec.subscribed[m.id], t)
			}
		}
	}
	target := assignUniform(spec)
	sharers := map[topicPartition]int{}
	for _, ps := range target {
		for tp := range ps {
			sharers[tp]++
		}
	}
	for _, id := range spec.members {
		if len(target[id]) > 0 {
			continue
		}
		var best topicPartition
		found := false
		for _, t := range spec.subscribed[id] {
			for p := range spec.partitions[t] {
				tp := topicPartition{t, p}
				if !found || sharers[tp] < sharers[best] || (sharers[tp] == sharers[best] && compareTP(tp, best) < 0) {
					best, found = tp, true
				}
			}
		}
		if found {
			target[id][best] = struct{}{}
			sharers[best]++
		}
	}
	g.touchTargetsLocked(sg.target, target)
	sg.target, sg.targetEpoch, sg.targetAt = target, sg.epoch, now
	g.touchGroupLocked()
	g.c.log.Info("share group target assignment", "group", g.id, "epoch", sg.epoch, "members", len(sg.members))
}

// removeShareMemberLocked removes m and bumps the group epoch. As in Kafka 4.4,
// the last member leaving also sets the target (empty) at that epoch, with no
// interval to wait for before the next member's.
func (g *group) removeShareMemberLocked(m *smember) {
	if m.sessionTimer != nil {
		m.sessionTimer.Stop()
	}
	m.sessionToken++
	sg := g.sg
	sg.removeMember(m)
	delete(sg.target, m.id)
	g.touchMemberLocked(m.id)
	g.bumpShareEpochLocked()
	if len(sg.members) == 0 {
		sg.targetEpoch, sg.targetAt = sg.epoch, time.Time{}
	}
	g.syncShareViewLocked()
}

func (g *group) armShareSessionLocked(m *smember) {
	if m.sessionTimer != nil {
		m.sessionTimer.Stop()
	}
	m.sessionToken++
	tok := m.sessionToken
	timeout, _ := g.c.shareTimeouts(g.id)
	m.sessionTimer = g.afterFunc(timeout, func() {
		if m.sessionToken == tok && g.sg != nil && g.sg.members[m.id] == m && g.state != stateDead {
			g.c.log.Info("share group member session expired", "group", g.id, "member", m.id)
			g.removeShareMemberLocked(m)
			g.persistRecordsLocked(nil)
		}
	})
}

// stopShareTimersLocked stops the session timers of every share member.
func (g *group) stopShareTimersLocked() {
	if g.sg == nil {
		return
	}
	for _, m := range g.sg.members {
		if m.sessionTimer != nil {
			m.sessionTimer.Stop()
		}
		m.sessionToken++
	}
}

// syncShareViewLocked keeps the classic side in step: Empty or Stable, and the
// subscribed topics.
func (g *group) syncShareViewLocked() {
	g.syncMemberViewLocked(len(g.sg.members), func(add func(topic string)) {
		for t := range g.sg.subscribers {
			add(t)
		}
	})
}

// ShareGroupDescribe serves ShareGroupDescribe v1. A group that does not exist or
// is not a share group answers GROUP_ID_NOT_FOUND.
func (c *Coordinator) ShareGroupDescribe(_ context.Context, req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range req.GroupIDs {
		dg := kmsg.NewShareGroupDescribeResponseGroup()
		dg.GroupID = id
		c.describeShare(id, &dg)
		if dg.ErrorCode == 0 && req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = groupOperations
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// describeShare fills dg for group id. As in Kafka 4.4, a group that is not a
// share group is "not found" like one that does not exist, an empty id is
// INVALID_GROUP_ID without a message, and a group in error has no state.
func (c *Coordinator) describeShare(id string, dg *kmsg.ShareGroupDescribeResponseGroup) {
	if id == "" {
		dg.ErrorCode = kerr.InvalidGroupID.Code
		return
	}
	code, msg := c.describeGroupOf(id, "share", func(g *group) bool { return g.sg != nil },
		func(g *group) { g.describeShareLocked(dg) })
	if code == kerr.GroupIDNotFound.Code {
		msg = ptr(fmt.Sprintf("Group %s not found.", id))
	}
	dg.ErrorCode, dg.ErrorMessage = code, msg
}

// describeShareLocked fills dg with the share group's state and members.
func (g *group) describeShareLocked(dg *kmsg.ShareGroupDescribeResponseGroup) {
	sg := g.sg
	dg.GroupState = sg.stateName()
	dg.GroupEpoch, dg.AssignmentEpoch = sg.epoch, sg.targetEpoch
	dg.Assignor = shareAssignor
	for _, m := range sg.sortedMembers() {
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID = m.id
		dm.RackID = optional(m.rackID)
		dm.MemberEpoch = m.epoch
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		dm.SubscribedTopicNames = m.topicNames
		if dm.SubscribedTopicNames == nil {
			dm.SubscribedTopicNames = []string{}
		}
		for _, t := range g.c.assignmentTopics(m.assigned) {
			at := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			at.TopicID, at.Topic, at.Partitions = t.TopicID, t.Topic, t.Partitions
			dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, at)
		}
		if dm.Assignment.TopicPartitions == nil {
			dm.Assignment.TopicPartitions = []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{}
		}
		dg.Members = append(dg.Members, dm)
	}
}
