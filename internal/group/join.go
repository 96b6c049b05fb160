package group

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup serves JoinGroup v0-v9; v0 has no rebalance timeout, so the session
// timeout serves for it, as in Kafka. It returns when the member's join completes:
// at once for errors, MEMBER_ID_REQUIRED and rejoins that change nothing, otherwise
// when the rebalance completes (every member rejoined, or the rebalance timeout
// passed).
// A join to a consumer group (migration.go) is answered once the records it
// changed are appended; a failed append answers Kafka's code for it.
// If ctx ends first the join still takes effect and the response says
// REQUEST_TIMED_OUT; nobody is expected to read it.
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	r := c.join(ctx, req)
	resp.ErrorCode = r.code
	resp.Generation = r.generation
	resp.ProtocolType = r.protocolType
	resp.Protocol = r.protocol
	resp.LeaderID = r.leader
	resp.SkipAssignment = r.skipAssignment
	resp.MemberID = r.memberID
	resp.Members = r.members
	return resp
}

func (c *Coordinator) join(ctx context.Context, req *kmsg.JoinGroupRequest) joinResult {
	if req.Group == "" {
		return joinError(kerr.InvalidGroupID.Code, req.MemberID)
	}
	p, code := c.partitionOf(req.Group)
	if code != 0 {
		return joinError(code, req.MemberID)
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout {
		return joinError(kerr.InvalidSessionTimeout.Code, req.MemberID)
	}
	// A known member id of an unknown group is stale; only new members create groups.
	g := p.lookup(c, req.Group, req.MemberID == "")
	if g == nil {
		return joinError(kerr.UnknownMemberID.Code, req.MemberID)
	}
	w := make(chan joinResult, 1)
	done := make(chan error, 1)
	var queued bool
	g.withLock(func() {
		g.joinLocked(req, clientFrom(ctx), w)
		queued = g.persistConsumerLocked(func(err error) { done <- err })
	})
	c.flush(g)
	var r joinResult
	select {
	case r = <-w:
	case <-ctx.Done():
		return joinError(kerr.RequestTimedOut.Code, req.MemberID)
	}
	// A join to a consumer group is answered once the log holds the records
	// it queued, as Kafka does: a failover cannot lose a join the member was
	// told of. Kafka's answer to a failed write carries only the error code.
	if code := c.awaitRecords(ctx, g, queued, done); code != 0 {
		return joinError(code, "")
	}
	return r
}

// joinRequest is a JoinGroup request in the units the state machine uses.
type joinRequest struct {
	version          int16
	memberID         string
	instanceID       string
	client           Client
	protocolType     string
	protocols        []protocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
}

func newJoinRequest(req *kmsg.JoinGroupRequest, cl Client) joinRequest {
	jr := joinRequest{
		version:          req.Version,
		memberID:         req.MemberID,
		instanceID:       deref(req.InstanceID),
		client:           cl,
		protocolType:     req.ProtocolType,
		sessionTimeout:   time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		rebalanceTimeout: time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
	}
	if jr.rebalanceTimeout <= 0 {
		jr.rebalanceTimeout = jr.sessionTimeout
	}
	for _, p := range req.Protocols {
		jr.protocols = append(jr.protocols, protocol{name: p.Name, metadata: p.Metadata})
	}
	return jr
}

// joinLocked runs one JoinGroup: it answers w at once or parks it on the member.
func (g *group) joinLocked(req *kmsg.JoinGroupRequest, cl Client, w chan joinResult) {
	jr := newJoinRequest(req, cl)
	if g.cg != nil && len(g.cg.members) == 0 {
		g.cg = nil // an Empty consumer group turns classic again
	}
	switch {
	case g.state == stateDead:
		w <- joinError(kerr.CoordinatorNotAvailable.Code, jr.memberID)
	case g.sg != nil, g.st != nil:
		// Classic members do not join a share or streams group.
		w <- joinError(kerr.InconsistentGroupProtocol.Code, jr.memberID)
	case g.cg != nil:
		// A consumer group with members takes classic members (migration.go).
		g.joinConsumerGroupLocked(jr, w)
		return
	case !g.acceptClassicJoinLocked(jr.memberID):
		g.refuseClassicJoinLocked(jr.memberID, w)
	case !g.supportsProtocolsLocked(jr.protocolType, jr.protocols):
		w <- joinError(kerr.InconsistentGroupProtocol.Code, jr.memberID)
	case jr.memberID == "":
		g.joinNewLocked(jr, w)
	default:
		g.joinKnownLocked(jr, w)
	}
	g.maybeCompleteJoinLocked()
}

// joinNewLocked is a join without a member id.
func (g *group) joinNewLocked(jr joinRequest, w chan joinResult) {
	id := newMemberID(jr.client.ID, jr.instanceID)
	switch {
	case jr.instanceID != "":
		if old, ok := g.static[jr.instanceID]; ok {
			g.rejoinStaticLocked(old, id, jr, w)
			return
		}
		g.addMemberLocked(id, jr, w)
	case jr.version >= 4:
		// KIP-394: hand out the id and let the member come back with it, so a
		// client that never does costs only a pending entry.
		g.addPendingLocked(id, jr.sessionTimeout)
		w <- joinError(kerr.MemberIDRequired.Code, id)
	default:
		g.addMemberLocked(id, jr, w)
	}
}

// joinKnownLocked is a join with a member id.
func (g *group) joinKnownLocked(jr joinRequest, w chan joinResult) {
	if pm, ok := g.pending[jr.memberID]; ok {
		pm.timer.Stop()
		delete(g.pending, jr.memberID)
		if jr.instanceID != "" {
			// Pending ids are only handed to dynamic members.
			w <- joinError(kerr.UnknownMemberID.Code, jr.memberID)
			return
		}
		g.addMemberLocked(jr.memberID, jr, w)
		return
	}
	if code := g.validateMemberLocked(jr.memberID, jr.instanceID); code != 0 {
		w <- joinError(code, jr.memberID)
		return
	}
	m := g.members[jr.memberID]
	switch g.state {
	case statePreparingRebalance:
		g.updateMemberLocked(m, jr, w)
		g.maybePrepareRebalanceLocked()
	case stateCompletingRebalance, stateStable:
		// A member retrying a join it already completed (same protocols) gets the
		// current generation back; the leader and changed protocols rebalance
		// in Stable (in CompletingRebalance only changed protocols do).
		unchanged := m.matches(jr.protocols)
		if unchanged && (g.state == stateCompletingRebalance || m.id != g.leader) {
			g.touchLocked(m)
			w <- g.successJoinLocked(m)
			return
		}
		g.updateMemberLocked(m, jr, w)
		g.maybePrepareRebalanceLocked()
	default:
		w <- joinError(kerr.UnknownMemberID.Code, jr.memberID)
	}
}

// addMemberLocked adds a member that waits for the rebalance it starts (or joins).
func (g *group) addMemberLocked(id string, jr joinRequest, w chan joinResult) {
	if g.state == statePreparingRebalance && g.generation == 0 {
		g.newMemberAdded = true
	}
	if len(g.members) == 0 {
		g.protocolType = jr.protocolType
	}
	m := g.newMemberLocked(id, jr)
	m.isNew, m.join = true, w
	if g.leader == "" {
		g.leader = id
	}
	// A new member cannot heartbeat before its join completes; it may wait this
	// long for the rebalance.
	g.armSessionLocked(m, newMemberJoinTimeout)
	g.maybePrepareRebalanceLocked()
}

// newMemberLocked adds member id as jr describes it, last in join order.
func (g *group) newMemberLocked(id string, jr joinRequest) *member {
	m := &member{
		id:               id,
		instanceID:       jr.instanceID,
		clientID:         jr.client.ID,
		clientHost:       jr.client.Host,
		sessionTimeout:   jr.sessionTimeout,
		rebalanceTimeout: jr.rebalanceTimeout,
		protocols:        jr.protocols,
		seq:              g.nextSeq,
	}
	g.nextSeq++
	g.members[id] = m
	if jr.instanceID != "" {
		g.static[jr.instanceID] = id
	}
	return m
}

func (g *group) updateMemberLocked(m *member, jr joinRequest, w chan joinResult) {
	m.protocols = jr.protocols
	m.sessionTimeout = jr.sessionTimeout
	m.rebalanceTimeout = jr.rebalanceTimeout
	g.parkJoinLocked(m, w)
}

// rejoinStaticLocked handles a static member joining without a member id while its
// instance id is known (KIP-345): the new member id replaces the old one, fencing
// whoever used it. In Stable, when the group would keep its protocol, there is no
// rebalance: the group is persisted with the new id and the member gets the current
// generation (its assignment comes from SyncGroup).
func (g *group) rejoinStaticLocked(oldID, newID string, jr joinRequest, w chan joinResult) {
	prevLeader := g.leader
	m := g.members[oldID]
	g.replyJoinLocked(m, joinError(kerr.FencedInstanceID.Code, oldID))
	g.replySyncLocked(m, syncResult{code: kerr.FencedInstanceID.Code})
	g.renameMemberLocked(m, newID)
	g.touchLocked(m)
	old := *m
	m.clientID, m.clientHost = jr.client.ID, jr.client.Host
	g.updateMemberLocked(m, jr, w)

	switch g.state {
	case stateStable:
		if selectProtocol(g.sortedMembersLocked()) != g.protocol {
			g.prepareRebalanceLocked()
			return
		}
		skip := jr.version >= 9 && g.leader == newID
		g.queueLocked([]Record{g.metadataRecordLocked(nil)}, func(err error) {
			if m.join != w {
				return // answered by a rebalance or unload meanwhile
			}
			if err != nil {
				if g.members[newID] == m {
					g.renameMemberLocked(m, oldID)
					m.protocols, m.sessionTimeout, m.rebalanceTimeout = old.protocols, old.sessionTimeout, old.rebalanceTimeout
					m.clientID, m.clientHost = old.clientID, old.clientHost
				}
				g.replyJoinLocked(m, joinError(AppendErrorCode(err), ""))
				return
			}
			r := g.successJoinLocked(m)
			// Before KIP-814 the old leader id keeps a rejoining static leader from
			// computing an assignment a Stable group would never distribute.
			r.leader, r.members = prevLeader, nil
			if skip {
				r.leader, r.members, r.skipAssignment = g.leader, g.joinMembersLocked(), true
			}
			g.replyJoinLocked(m, r)
		})
	case stateCompletingRebalance:
		// The leader may be assigning to the old id: start over.
		g.prepareRebalanceLocked()
	}
	// PreparingRebalance: the member waits for the rebalance like everyone else.
}

// renameMemberLocked moves m to a new member id, keeping leadership, static mapping
// and pending sync with it.
func (g *group) renameMemberLocked(m *member, id string) {
	old := m.id
	delete(g.members, old)
	m.id = id
	g.members[id] = m
	if g.leader == old {
		g.leader = id
	}
	if m.instanceID != "" {
		g.static[m.instanceID] = id
	}
	if _, ok := g.pendingSync[old]; ok {
		delete(g.pendingSync, old)
		g.pendingSync[id] = struct{}{}
	}
}

// addPendingLocked records a member id handed out with MEMBER_ID_REQUIRED.
func (g *group) addPendingLocked(id string, session time.Duration) {
	pm := &pendingMember{}
	pm.timer = g.afterFunc(session, func() {
		if g.pending[id] == pm {
			delete(g.pending, id)
			g.maybeCompleteJoinLocked()
		}
	})
	g.pending[id] = pm
}

// maybePrepareRebalanceLocked starts a rebalance unless one is running.
func (g *group) maybePrepareRebalanceLocked() {
	switch g.state {
	case stateEmpty, stateStable, stateCompletingRebalance:
		g.prepareRebalanceLocked()
	}
}

// prepareRebalanceLocked moves the group to PreparingRebalance: members waiting for
// an assignment are told to rejoin, and the join waits for everyone until the
// rebalance timeout (an Empty group first waits the initial rebalance delay, extended
// while new members keep arriving, up to the rebalance timeout).
func (g *group) prepareRebalanceLocked() {
	if g.state == stateCompletingRebalance {
		g.resetAssignmentsLocked(kerr.RebalanceInProgress.Code)
	}
	g.stopSyncTimerLocked()
	clear(g.pendingSync)
	wasEmpty := g.state == stateEmpty
	g.transitionLocked(statePreparingRebalance)
	g.c.log.Info("preparing to rebalance group", "group", g.id, "generation", g.generation)
	delay := g.c.cfg.GroupInitialRebalanceDelay
	if wasEmpty && delay > 0 {
		g.initialDelay = true
		g.newMemberAdded = false
		g.initialRemaining = max(g.rebalanceTimeoutLocked()-delay, 0)
		g.armRebalanceTimerLocked(delay)
		return
	}
	g.initialDelay = false
	g.armRebalanceTimerLocked(g.rebalanceTimeoutLocked())
	g.maybeCompleteJoinLocked()
}

// maybeCompleteJoinLocked completes the join phase once everyone has joined (never
// during the initial delay, which always runs to its end).
func (g *group) maybeCompleteJoinLocked() {
	if g.state == statePreparingRebalance && !g.initialDelay && g.allJoinedLocked() {
		g.completeJoinLocked()
	}
}

func (g *group) armRebalanceTimerLocked(d time.Duration) {
	g.stopRebalanceTimerLocked()
	tok := g.rebalanceToken
	g.rebalanceTimer = g.afterFunc(d, func() {
		if g.rebalanceToken == tok && g.state == statePreparingRebalance {
			g.onRebalanceTimerLocked()
		}
	})
}

func (g *group) stopRebalanceTimerLocked() {
	if g.rebalanceTimer != nil {
		g.rebalanceTimer.Stop()
		g.rebalanceTimer = nil
	}
	g.rebalanceToken++
}

// onRebalanceTimerLocked: the initial delay or the rebalance timeout ran out.
func (g *group) onRebalanceTimerLocked() {
	if g.initialDelay {
		delay := g.c.cfg.GroupInitialRebalanceDelay
		if g.newMemberAdded && g.initialRemaining > 0 {
			g.newMemberAdded = false
			next := min(delay, g.initialRemaining)
			g.initialRemaining = max(g.initialRemaining-delay, 0)
			g.armRebalanceTimerLocked(next)
			return
		}
		g.initialDelay = false
	}
	g.completeJoinLocked()
}

// completeJoinLocked ends the join phase: dynamic members that did not rejoin are
// removed, a new generation starts and every joined member gets its answer.
func (g *group) completeJoinLocked() {
	g.stopRebalanceTimerLocked()
	for _, m := range g.sortedMembersLocked() {
		if m.join == nil && m.instanceID == "" {
			g.c.log.Info("removing member that did not rejoin", "group", g.id, "member", m.id)
			g.removeMemberLocked(m)
		}
	}
	if len(g.members) > 0 && !g.electJoinedLeaderLocked() {
		// Only static members that have not rejoined remain: wait another round
		// for them to come back or for their sessions to expire.
		g.armRebalanceTimerLocked(g.rebalanceTimeoutLocked())
		return
	}
	g.generation++
	clear(g.pendingSync)
	if len(g.members) == 0 {
		g.protocol = ""
		g.computeSubscribedLocked()
		g.transitionLocked(stateEmpty)
		g.c.log.Info("group is empty", "group", g.id, "generation", g.generation)
		g.queueLocked([]Record{g.metadataRecordLocked(nil)}, func(err error) {
			// A lost write only means the previous generation reappears after a
			// reload, without members: harmless.
			_ = err
		})
		return
	}
	ms := g.sortedMembersLocked()
	g.protocol = selectProtocol(ms)
	g.computeSubscribedLocked()
	g.transitionLocked(stateCompletingRebalance)
	g.c.log.Info("group stabilized", "group", g.id, "generation", g.generation, "members", len(ms), "protocol", g.protocol)
	for _, m := range ms {
		g.replyJoinLocked(m, g.successJoinLocked(m))
		g.touchLocked(m)
		m.isNew = false
		g.pendingSync[m.id] = struct{}{}
	}
	g.armSyncTimerLocked()
}

// electJoinedLeaderLocked keeps the leader if it rejoined, else makes the earliest
// joined member that rejoined the leader; false when no member rejoined.
func (g *group) electJoinedLeaderLocked() bool {
	if l := g.members[g.leader]; l != nil && l.join != nil {
		return true
	}
	for _, m := range g.sortedMembersLocked() {
		if m.join != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// armSyncTimerLocked gives members that completed the join the rebalance timeout to
// send SyncGroup; those that do not are removed and the group rebalances again.
func (g *group) armSyncTimerLocked() {
	g.stopSyncTimerLocked()
	tok, gen := g.syncToken, g.generation
	g.syncTimer = g.afterFunc(g.rebalanceTimeoutLocked(), func() {
		if g.syncToken == tok && g.generation == gen && len(g.pendingSync) > 0 &&
			(g.state == stateCompletingRebalance || g.state == stateStable) {
			for id := range g.pendingSync {
				if m := g.members[id]; m != nil {
					g.c.log.Info("removing member that did not sync", "group", g.id, "member", id)
					g.removeMemberLocked(m)
				}
			}
			clear(g.pendingSync)
			g.prepareRebalanceLocked()
		}
	})
}

func (g *group) stopSyncTimerLocked() {
	if g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
	}
	g.syncToken++
}

// touchLocked restarts the member's session timeout (a sign of life).
func (g *group) touchLocked(m *member) { g.armSessionLocked(m, m.sessionTimeout) }

// armSessionLocked (re)starts the member's session timer. When it fires, a member
// waiting in a join or sync is still alive (unless it never completed a join), any
// other member is removed and the group rebalances.
func (g *group) armSessionLocked(m *member, d time.Duration) {
	if m.sessionTimer != nil {
		m.sessionTimer.Stop()
	}
	m.sessionToken++
	tok := m.sessionToken
	m.sessionTimer = g.afterFunc(d, func() {
		if m.sessionToken == tok && g.members[m.id] == m && g.state != stateDead {
			if !m.isNew && (m.join != nil || m.sync != nil) {
				g.touchLocked(m)
			} else {
				g.c.log.Info("member session expired", "group", g.id, "member", m.id)
				g.removeMemberAndUpdateLocked(m)
			}
		}
	})
}

// removeMemberAndUpdateLocked removes a member (left, expired) and moves the group
// on: a waiting join is told UNKNOWN_MEMBER_ID, a settled group rebalances, a
// rebalancing one may now be complete.
func (g *group) removeMemberAndUpdateLocked(m *member) {
	g.replyJoinLocked(m, joinError(kerr.UnknownMemberID.Code, ""))
	g.removeMemberLocked(m)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.maybePrepareRebalanceLocked()
	case statePreparingRebalance:
		g.maybeCompleteJoinLocked()
	}
}

// removeMemberLocked drops a member and its timer; leadership passes to the earliest
// joined remaining member.
func (g *group) removeMemberLocked(m *member) {
	g.replySyncLocked(m, syncResult{code: kerr.UnknownMemberID.Code})
	if m.sessionTimer != nil {
		m.sessionTimer.Stop()
	}
	m.sessionToken++
	delete(g.members, m.id)
	delete(g.pendingSync, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		if ms := g.sortedMembersLocked(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
}

// resetAssignmentsLocked drops every assignment and fails waiting SyncGroups with code.
func (g *group) resetAssignmentsLocked(code int16) {
	for _, m := range g.members {
		m.assignment = nil
		g.propagateSyncLocked(m, syncResult{code: code})
	}
}

// loadMetadata restores the group from its replayed GroupMetadata record: Stable
// with its members when it had any, else Empty.
func (g *group) loadMetadata(v *kmsg.GroupMetadataValue) {
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	g.protocol = deref(v.Protocol)
	g.leader = deref(v.Leader)
	g.stateTime = time.Time{}
	if v.CurrentStateTimestamp >= 0 {
		g.stateTime = time.UnixMilli(v.CurrentStateTimestamp)
	}
	for _, vm := range v.Members {
		if vm.MemberID == "" || g.members[vm.MemberID] != nil {
			continue
		}
		m := &member{
			id:               vm.MemberID,
			instanceID:       deref(vm.InstanceID),
			clientID:         vm.ClientID,
			clientHost:       vm.ClientHost,
			sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
			protocols:        []protocol{{name: g.protocol, metadata: vm.Subscription}},
			assignment:       vm.Assignment,
			seq:              g.nextSeq,
		}
		if m.sessionTimeout <= 0 {
			m.sessionTimeout = g.c.cfg.MinSessionTimeout
		}
		if m.rebalanceTimeout <= 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		g.nextSeq++
		g.members[m.id] = m
		if m.instanceID != "" {
			g.static[m.instanceID] = m.id
		}
	}
	if len(g.members) == 0 {
		g.state, g.leader, g.protocol = stateEmpty, "", ""
		return
	}
	g.state = stateStable
	if g.members[g.leader] == nil {
		g.leader = g.sortedMembersLocked()[0].id
	}
	g.computeSubscribedLocked()
}
