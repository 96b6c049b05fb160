package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup serves SyncGroup v0-v5. The leader's request carries the assignment,
// which is persisted before anyone receives it; followers wait for it. In Stable a
// member simply gets its assignment again.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	r := c.sync(ctx, req)
	resp.ErrorCode = r.code
	resp.MemberAssignment = r.assignment
	resp.ProtocolType = r.protocolType
	resp.Protocol = r.protocol
	return resp
}

func (c *Coordinator) sync(ctx context.Context, req *kmsg.SyncGroupRequest) syncResult {
	if req.Group == "" {
		return syncResult{code: kerr.InvalidGroupID.Code}
	}
	p, code := c.partitionOf(req.Group)
	switch code {
	case 0:
	case kerr.CoordinatorLoadInProgress.Code:
		// The rebalance's state is lost with the old coordinator: rejoin (older
		// clients do not expect COORDINATOR_LOAD_IN_PROGRESS here), as Kafka does.
		return syncResult{code: kerr.RebalanceInProgress.Code}
	default:
		return syncResult{code: code}
	}
	g := p.lookup(c, req.Group, false)
	if g == nil {
		return syncResult{code: kerr.UnknownMemberID.Code}
	}
	w := make(chan syncResult, 1)
	g.withLock(func() { g.syncLocked(req, w) })
	c.flush(g)
	select {
	case r := <-w:
		return r
	case <-ctx.Done():
		return syncResult{code: kerr.RequestTimedOut.Code}
	}
}

func (g *group) syncLocked(req *kmsg.SyncGroupRequest, w chan syncResult) {
	fail := func(code int16) { w <- syncResult{code: code} }
	if g.state == stateDead {
		fail(kerr.CoordinatorNotAvailable.Code)
		return
	}
	if g.cg != nil {
		w <- g.syncConsumerGroupLocked(req)
		return
	}
	if code := g.validateMemberLocked(req.MemberID, deref(req.InstanceID)); code != 0 {
		fail(code)
		return
	}
	if req.Generation != g.generation {
		fail(kerr.IllegalGeneration.Code)
		return
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) ||
		(req.Protocol != nil && *req.Protocol != g.protocol) {
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case stateEmpty:
		fail(kerr.UnknownMemberID.Code)
	case statePreparingRebalance:
		fail(kerr.RebalanceInProgress.Code)
	case stateStable:
		delete(g.pendingSync, m.id)
		g.touchLocked(m)
		w <- g.syncSuccessLocked(m)
	case stateCompletingRebalance:
		delete(g.pendingSync, m.id)
		g.touchLocked(m)
		g.parkSyncLocked(m, w)
		if m.id == g.leader {
			g.storeAssignmentLocked(req.GroupAssignment)
		}
	}
}

// storeAssignmentLocked persists the leader's assignment and, once it is durable,
// hands it to every member and makes the group Stable. Members missing from it get an
// empty assignment; unknown member ids in it are ignored.
func (g *group) storeAssignmentLocked(ga []kmsg.SyncGroupRequestGroupAssignment) {
	assign := make(map[string][]byte, len(g.members))
	for id := range g.members {
		assign[id] = []byte{}
	}
	for _, a := range ga {
		if _, ok := assign[a.MemberID]; ok && a.MemberAssignment != nil {
			assign[a.MemberID] = a.MemberAssignment
		}
	}
	gen := g.generation
	g.queueLocked([]Record{g.metadataRecordLocked(assign)}, func(err error) {
		if g.state != stateCompletingRebalance || g.generation != gen {
			return // the group moved on; its waiters were answered then
		}
		if err != nil {
			g.resetAssignmentsLocked(AppendErrorCode(err))
			g.maybePrepareRebalanceLocked()
			return
		}
		for id, m := range g.members {
			if a, ok := assign[id]; ok {
				m.assignment = a
			}
		}
		g.transitionLocked(stateStable)
		for _, m := range g.members {
			g.propagateSyncLocked(m, g.syncSuccessLocked(m))
		}
	})
}

func (g *group) syncSuccessLocked(m *member) syncResult {
	a := m.assignment
	if a == nil {
		a = []byte{}
	}
	return syncResult{assignment: a, protocolType: ptr(g.protocolType), protocol: ptr(g.protocol)}
}

// Heartbeat serves Heartbeat v0-v4: it keeps the member's session alive and tells it
// when the group is rebalancing.
func (c *Coordinator) Heartbeat(_ context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = c.heartbeat(req)
	return resp
}

func (c *Coordinator) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	p, code := c.partitionOf(req.Group)
	switch code {
	case 0:
	case kerr.CoordinatorLoadInProgress.Code:
		// Kafka answers blindly while loading, so members survive a coordinator
		// move; the loaded group restarts their sessions.
		return 0
	default:
		return code
	}
	g := p.lookup(c, req.Group, false)
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if g.cg != nil {
		return g.heartbeatConsumerGroupLocked(req)
	}
	if code := g.validateMemberLocked(req.MemberID, deref(req.InstanceID)); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m := g.members[req.MemberID]
	switch g.state {
	case stateEmpty:
		return kerr.UnknownMemberID.Code
	case statePreparingRebalance:
		g.touchLocked(m)
		return kerr.RebalanceInProgress.Code
	default: // CompletingRebalance (heartbeats may start after the join) and Stable
		g.touchLocked(m)
		return 0
	}
}

// LeaveGroup serves LeaveGroup v0-v5. v3+ removes a batch of members, each named by
// member id or, for an administrative removal, by instance id alone; v0-v2 carry one
// member id and report its error at the top level.
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version <= 2 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	code, codes := c.leave(ctx, req.Group, leaving)
	if req.Version <= 2 {
		resp.ErrorCode = code
		if code == 0 && len(codes) > 0 {
			resp.ErrorCode = codes[0]
		}
		return resp
	}
	resp.ErrorCode = code
	if code != 0 {
		return resp
	}
	for i, lm := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID = lm.MemberID
		rm.InstanceID = lm.InstanceID
		rm.ErrorCode = codes[i]
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

// leave removes members; it returns a group-level code or one code per member.
// Members leaving a consumer group are answered once the records their leaving
// changed are appended; a failed append gives each of them Kafka's code for it.
func (c *Coordinator) leave(ctx context.Context, groupID string, leaving []kmsg.LeaveGroupRequestMember) (int16, []int16) {
	if groupID == "" {
		return kerr.InvalidGroupID.Code, nil
	}
	p, code := c.partitionOf(groupID)
	if code != 0 {
		return code, nil
	}
	codes := make([]int16, len(leaving))
	g := p.lookup(c, groupID, false)
	if g == nil {
		for i := range codes {
			codes[i] = kerr.UnknownMemberID.Code
		}
		return 0, codes
	}
	done := make(chan error, 1)
	var queued bool
	g.withLock(func() {
		code, queued = g.leaveAllLocked(leaving, codes, func(err error) { done <- err })
	})
	c.flush(g)
	if code != 0 {
		return code, nil
	}
	if failed := c.awaitRecords(ctx, g, queued, done); failed != 0 {
		for i := range codes {
			codes[i] = failed
		}
	}
	return 0, codes
}

// leaveAllLocked removes the members leaving, setting their codes; it returns
// a group-level code, and whether records a consumer group's answer waits for
// were queued (done runs once they are appended).
func (g *group) leaveAllLocked(leaving []kmsg.LeaveGroupRequestMember, codes []int16, done func(error)) (int16, bool) {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code, false
	}
	if g.cg == nil {
		for i, lm := range leaving {
			codes[i] = g.leaveLocked(lm.MemberID, deref(lm.InstanceID))
		}
		return 0, false
	}
	var left, consumer *cmember // the last member that left, the last KIP-848 one
	for i, lm := range leaving {
		var m *cmember
		if m, codes[i] = g.leaveConsumerGroupLocked(lm.MemberID, deref(lm.InstanceID)); m == nil {
			continue
		}
		left = m
		if m.classic == nil {
			consumer = m
		}
	}
	switch {
	case consumer != nil && g.onlyClassicWithoutLocked(nil):
		// The last KIP-848 members left: the group is classic again, as
		// when they leave by ConsumerGroupHeartbeat (KAFKA-18150).
		g.downgradeLocked(consumer)
	case left != nil:
		g.bumpEpochLocked()
		g.syncClassicViewLocked()
	}
	return 0, g.persistConsumerLocked(done)
}

func (g *group) leaveLocked(memberID, instanceID string) int16 {
	if memberID == "" {
		id, ok := g.static[instanceID]
		if instanceID == "" || !ok || g.members[id] == nil {
			return kerr.UnknownMemberID.Code
		}
		memberID = id
	} else if pm, ok := g.pending[memberID]; ok {
		pm.timer.Stop()
		delete(g.pending, memberID)
		g.maybeCompleteJoinLocked()
		return 0
	} else if code := g.validateMemberLocked(memberID, instanceID); code != 0 {
		return code
	}
	g.c.log.Info("member left group", "group", g.id, "member", memberID)
	g.removeMemberAndUpdateLocked(g.members[memberID])
	return 0
}
