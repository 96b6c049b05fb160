package group

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is KIP-848's online migration between the classic protocol and the
// consumer protocol (group.consumer.migration.policy), as Kafka 4 does it:
//
//  1. Upgrade. A ConsumerGroupHeartbeat joining (epoch 0) a classic group with
//     members, of protocol type "consumer", converts it to a consumer group: the
//     classic members become members at the generation's epoch, each keeping the
//     partitions of its last assignment (also its target), and waiting joins and
//     syncs are told REBALANCE_IN_PROGRESS. The joining member then bumps the
//     epoch like any new member.
//  2. Classic members in a consumer group. JoinGroup, SyncGroup, Heartbeat and
//     LeaveGroup of classic members are served from the consumer group: the
//     server-side assignor computes their target, a join reconciles them towards
//     it (revoke first, with the owned partitions the subscription reports), the
//     generation is the member epoch, and the SyncGroup answer is the member's
//     assignment in the consumer protocol's encoding. A heartbeat answers
//     REBALANCE_IN_PROGRESS while the member is behind the group epoch, must
//     revoke, or may now take partitions others released, so the client rejoins.
//     A member that does not rejoin or sync within its rebalance timeout, or
//     stops heartbeating for its session timeout, is removed. LeaveGroup also
//     removes KIP-848 members (an admin client's removal of members).
//  3. Downgrade. When the last consumer-protocol member of a group whose other
//     members are classic leaves (or is fenced, or removed by LeaveGroup), the
//     group converts back to a classic group at the group epoch with the
//     remaining members and their target assignments, and rebalances at once.
//
// Empty groups change type both ways regardless of the policy (join.go and
// consumer.go).

// MigrationPolicy is group.consumer.migration.policy: which online conversions of
// non-empty groups are allowed.
type MigrationPolicy string

// The policies, as Kafka names them. Kafka 4's default is bidirectional.
const (
	MigrationBidirectional MigrationPolicy = "bidirectional"
	MigrationUpgrade       MigrationPolicy = "upgrade"
	MigrationDowngrade     MigrationPolicy = "downgrade"
	MigrationDisabled      MigrationPolicy = "disabled"
)

func (p MigrationPolicy) upgrade() bool {
	return p == MigrationBidirectional || p == MigrationUpgrade
}

func (p MigrationPolicy) downgrade() bool {
	return p == MigrationBidirectional || p == MigrationDowngrade
}

func (p MigrationPolicy) valid() bool {
	switch p {
	case MigrationBidirectional, MigrationUpgrade, MigrationDowngrade, MigrationDisabled:
		return true
	}
	return false
}

// classicMemberType is ConsumerGroupDescribe v1's member type of a member
// using the classic protocol.
const classicMemberType = 0

// classicMember is what a consumer group keeps of a member that speaks the classic
// protocol (Kafka's ClassicMemberMetadata), and its join and sync deadlines.
type classicMember struct {
	sessionTimeout time.Duration
	protocols      []protocol // in the member's preference order, with metadata

	joinTimer *time.Timer // runs while the member was told to rejoin
	joinToken uint64
	syncTimer *time.Timer // runs from its join until its SyncGroup
	syncToken uint64
}

// protocolName is the protocol a classic member of a consumer group is told it
// uses: its first.
func (cm *classicMember) protocolName() string { return cm.protocols[0].name }

// assignmentVersion is the consumer protocol version of the member's
// subscription, which its assignment is encoded with.
func (cm *classicMember) assignmentVersion() int16 {
	return metadataVersion(cm.protocols[0].metadata)
}

func metadataVersion(b []byte) int16 {
	if len(b) < 2 {
		return 0
	}
	return min(int16(b[0])<<8|int16(b[1]), 3)
}

// encodeAssignment is a classic member's assignment in the consumer protocol.
func encodeAssignment(ps partSet, version int16) []byte {
	a := kmsg.ConsumerMemberAssignment{Version: max(version, 0)}
	for _, tp := range ps.sorted() {
		if n := len(a.Topics); n > 0 && a.Topics[n-1].Topic == tp.topic {
			a.Topics[n-1].Partitions = append(a.Topics[n-1].Partitions, tp.partition)
			continue
		}
		a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: tp.topic, Partitions: []int32{tp.partition}})
	}
	return a.AppendTo(nil)
}

// decodeAssignment reads a classic assignment, leaving out topics that do not
// exist (an empty assignment is none).
func (g *group) decodeAssignment(b []byte) (partSet, error) {
	out := partSet{}
	if len(b) == 0 {
		return out, nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return nil, err
	}
	for _, t := range a.Topics {
		if _, _, ok := g.topicsLocked().Topic(t.Topic); !ok {
			continue
		}
		for _, p := range t.Partitions {
			out[topicPartition{t.Topic, p}] = struct{}{}
		}
	}
	return out, nil
}

// ownedPartitions maps a subscription's owned partitions to a set, leaving out
// topics that do not exist.
func (g *group) ownedPartitions(sub *kmsg.ConsumerMemberMetadata) partSet {
	out := partSet{}
	for _, t := range sub.OwnedPartitions {
		if _, _, ok := g.topicsLocked().Topic(t.Topic); !ok {
			continue
		}
		for _, p := range t.Partitions {
			out[topicPartition{t.Topic, p}] = struct{}{}
		}
	}
	return out
}

// sortedTopics is a subscription's topics, sorted without duplicates.
func sortedTopics(ts []string) []string {
	out := slices.Clone(ts)
	slices.Sort(out)
	return slices.Compact(out)
}

// upgradeRefusalLocked is why the classic group may not be upgraded (Kafka's
// validateOnlineUpgrade), or "": the policy, the protocol type, and no more
// members than group.consumer.max.size.
func (g *group) upgradeRefusalLocked() string {
	switch {
	case !g.c.cfg.MigrationPolicy.upgrade():
		return fmt.Sprintf("Cannot upgrade classic group %s to consumer group because online upgrade is disabled.", g.id)
	case g.protocolType != consumerProtocolType:
		return fmt.Sprintf("Cannot upgrade classic group %s to consumer group because the group does not use the consumer embedded protocol.", g.id)
	case len(g.members) > g.c.cfg.ConsumerMaxSize:
		return fmt.Sprintf("Cannot upgrade classic group %s to consumer group because the group size exceeds the consumer group maximum size.", g.id)
	}
	return ""
}

// upgradeLocked converts a classic group with members to a consumer group (step 1
// above). It returns "" on success, else why the group cannot be upgraded (the
// heartbeat's GROUP_ID_NOT_FOUND message); then nothing changed.
func (g *group) upgradeLocked() string {
	if msg := g.upgradeRefusalLocked(); msg != "" {
		return msg
	}
	malformed := fmt.Sprintf("Cannot upgrade the classic group %s to consumer group because the embedded consumer protocol is malformed.", g.id)
	cg := newConsumerGroup()
	cg.epoch, cg.targetEpoch = g.generation, g.generation
	for _, m := range g.sortedMembersLocked() {
		md := m.metadataFor(g.protocol)
		if g.protocol == "" && len(m.protocols) > 0 {
			md = m.protocols[0].metadata
		}
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(md); err != nil {
			return malformed
		}
		assigned, err := g.decodeAssignment(m.assignment)
		if err != nil {
			return malformed
		}
		cm := &cmember{
			id:               m.id,
			instanceID:       m.instanceID,
			rackID:           deref(sub.Rack),
			clientID:         m.clientID,
			clientHost:       m.clientHost,
			epoch:            g.generation,
			prevEpoch:        g.generation,
			rebalanceTimeout: m.rebalanceTimeout,
			topicNames:       sortedTopics(sub.Topics),
			assigned:         map[topicPartition]int32{},
			classic:          &classicMember{sessionTimeout: m.sessionTimeout, protocols: m.protocols},
		}
		target := partSet{}
		for tp := range assigned {
			if _, taken := cg.owners[tp]; taken {
				continue // two classic members given one partition: the first keeps it
			}
			cg.owners[tp] = cm.id
			cm.assigned[tp] = g.generation
			target[tp] = struct{}{}
		}
		cg.addMember(cm)
		cg.target[cm.id] = target
		if cm.instanceID != "" {
			cg.static[cm.instanceID] = cm.id
		}
	}
	g.c.log.Info("upgrading classic group to consumer group", "group", g.id, "generation", g.generation, "members", len(cg.members))
	// Waiting joins and syncs rejoin into the consumer group.
	for _, m := range g.members {
		g.replyJoinLocked(m, joinError(kerr.RebalanceInProgress.Code, m.id))
		g.replySyncLocked(m, syncResult{code: kerr.RebalanceInProgress.Code})
		if m.sessionTimer != nil {
			m.sessionTimer.Stop()
		}
		m.sessionToken++
	}
	for _, pm := range g.pending {
		pm.timer.Stop()
	}
	g.stopRebalanceTimerLocked()
	g.stopSyncTimerLocked()
	clear(g.pendingSync)
	g.members, g.static, g.pending = map[string]*member{}, map[string]string{}, map[string]*pendingMember{}
	g.leader, g.protocol, g.initialDelay = "", "", false
	g.queueLocked([]Record{{Key: groupKey(g.id)}}, func(error) {
		// A lost tombstone only brings the classic generation back after a
		// reload, whose members then rejoin: harmless.
	})
	g.cg = cg
	g.changes = recordChanges{} // all its records are new
	g.refreshTopicsLocked()
	for _, cm := range cg.members {
		g.armConsumerSessionLocked(cm)
	}
	g.syncClassicViewLocked()
	return ""
}

// fenceConsumerMemberLocked removes a member that left, expired or missed a
// deadline. When it was the last consumer-protocol member and classic members
// remain, the group goes back to the classic protocol (step 3 above).
func (g *group) fenceConsumerMemberLocked(m *cmember) {
	if g.canDowngradeWithoutLocked(m) {
		g.downgradeLocked(m)
		return
	}
	g.removeConsumerMemberLocked(m)
}

// canDowngradeWithoutLocked reports whether removing m, a KIP-848 member,
// leaves only classic members, at least one, and the policy allows the
// downgrade.
func (g *group) canDowngradeWithoutLocked(m *cmember) bool {
	return m.classic == nil && g.onlyClassicWithoutLocked(m)
}

// onlyClassicWithoutLocked reports whether the members but without (nil: all
// of them) are classic members, at least one, and the policy and
// group.classic.max.size allow the group to be downgraded to them.
func (g *group) onlyClassicWithoutLocked(without *cmember) bool {
	n := 0
	for _, o := range g.cg.members {
		switch {
		case o == without:
		case o.classic == nil:
			return false
		default:
			n++
		}
	}
	if n == 0 {
		return false
	}
	if !g.c.cfg.MigrationPolicy.downgrade() {
		g.c.log.Info("cannot downgrade consumer group to classic group because online downgrade is disabled", "group", g.id)
		return false
	}
	if n > g.c.cfg.ClassicMaxSize {
		g.c.log.Info("cannot downgrade consumer group to classic group because its size is greater than group.classic.max.size", "group", g.id, "max", g.c.cfg.ClassicMaxSize)
		return false
	}
	return true
}

// canDowngradeReplacingLocked reports whether a classic static member taking the
// place of old by its instance id leaves only classic members, and the policy
// allows the downgrade.
func (g *group) canDowngradeReplacingLocked(old *cmember) bool {
	if old.classic != nil {
		return false
	}
	for _, o := range g.cg.members {
		if o != old && o.classic == nil {
			return false
		}
	}
	if !g.c.cfg.MigrationPolicy.downgrade() {
		return false
	}
	if len(g.cg.members) > g.c.cfg.ClassicMaxSize {
		g.c.log.Info("cannot downgrade consumer group to classic group because its size is greater than group.classic.max.size", "group", g.id, "max", g.c.cfg.ClassicMaxSize)
		return false
	}
	return true
}

// downgradeReplacingLocked is a downgrade caused by a classic static member (new
// member id id) replacing the last KIP-848 member, old, by its instance id: the
// joiner takes old's target assignment and, as nobody else's assignment changes,
// the classic group is Stable at once; the joiner gets the current generation and
// its assignment from SyncGroup.
func (g *group) downgradeReplacingLocked(old *cmember, id string, jr joinRequest, w chan joinResult) {
	targets := g.downgradeMembersLocked(old)
	targets[id] = targets[old.id]
	g.newMemberLocked(id, jr)
	g.settleDowngradeLocked(targets)
	g.pendingSync[id] = struct{}{}
	g.armSyncTimerLocked()
	w <- joinResult{
		memberID:     id,
		generation:   g.generation,
		protocolType: ptr(g.protocolType),
		protocol:     ptr(g.protocol),
	}
	g.persistConsumerLocked(nil) // the consumer group's tombstones first, as Kafka writes them
	g.queueLocked([]Record{g.metadataRecordLocked(nil)}, func(error) {})
}

// downgradeLocked converts the consumer group to a classic group without the
// leaving member: Stable at the group epoch, each remaining member holding its
// target assignment, then at once PreparingRebalance so the members rejoin and
// their leader assigns.
func (g *group) downgradeLocked(leaving *cmember) {
	g.settleDowngradeLocked(g.downgradeMembersLocked(leaving))
	g.persistConsumerLocked(nil) // the consumer group's tombstones first, as Kafka writes them
	g.queueLocked([]Record{g.metadataRecordLocked(nil)}, func(error) {
		// The rebalance that follows writes the group again.
	})
	g.prepareRebalanceLocked()
}

// downgradeMembersLocked turns the consumer group's members but leaving into
// classic members and drops the consumer group; it returns the target assignment
// of every member (leaving's too), with which the caller settles the classic
// state (settleDowngradeLocked).
func (g *group) downgradeMembersLocked(leaving *cmember) map[string]partSet {
	cg := g.cg
	g.c.log.Info("downgrading consumer group to classic group", "group", g.id, "epoch", cg.epoch, "leaving", leaving.id)
	g.stopConsumerTimersLocked()
	g.generation = cg.epoch
	g.protocolType = consumerProtocolType
	for _, cm := range cg.sortedMembers() {
		if cm == leaving {
			continue
		}
		m := &member{
			id:               cm.id,
			instanceID:       cm.instanceID,
			clientID:         cm.clientID,
			clientHost:       cm.clientHost,
			sessionTimeout:   cm.classic.sessionTimeout,
			rebalanceTimeout: cm.rebalanceTimeout,
			protocols:        cm.classic.protocols,
			seq:              g.nextSeq,
		}
		g.nextSeq++
		g.members[m.id] = m
		if m.instanceID != "" {
			g.static[m.instanceID] = m.id
		}
	}
	g.cg = nil
	return cg.target
}

// settleDowngradeLocked makes the downgraded group Stable: a leader, the selected
// protocol, each member's target as its assignment (in the version of its
// subscription), live sessions.
func (g *group) settleDowngradeLocked(targets map[string]partSet) {
	ms := g.sortedMembersLocked()
	g.leader = ms[0].id
	g.protocol = selectProtocol(ms)
	for _, m := range ms {
		m.assignment = encodeAssignment(targets[m.id], metadataVersion(m.metadataFor(g.protocol)))
		g.touchLocked(m)
	}
	g.computeSubscribedLocked()
	g.transitionLocked(stateStable)
}

// supportsClassicProtocolsLocked is Kafka's check of a classic member joining a
// consumer group: the consumer protocol type, and a protocol every classic member
// already there supports.
func (g *group) supportsClassicProtocolsLocked(protocolType string, ps []protocol) bool {
	if protocolType != consumerProtocolType || len(ps) == 0 {
		return false
	}
	for _, p := range ps {
		all := true
		for _, m := range g.cg.members {
			if m.classic != nil && !hasProtocol(m.classic.protocols, p.name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// joinConsumerGroupLocked is a classic JoinGroup to a consumer group with members
// (step 2 above). It always answers w at once.
func (g *group) joinConsumerGroupLocked(jr joinRequest, w chan joinResult) {
	cg := g.cg
	id := jr.memberID
	unknown := id == ""
	if unknown {
		id = newMemberID(jr.client.ID, jr.instanceID)
	}
	if g.consumerGroupFullLocked(id) {
		w <- joinError(kerr.GroupMaxSizeReached.Code, jr.memberID)
		return
	}
	if !g.supportsClassicProtocolsLocked(jr.protocolType, jr.protocols) {
		w <- joinError(kerr.InconsistentGroupProtocol.Code, jr.memberID)
		return
	}
	if unknown && jr.instanceID == "" && jr.version >= 4 {
		w <- joinError(kerr.MemberIDRequired.Code, id)
		return
	}
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(jr.protocols[0].metadata); err != nil {
		w <- joinError(kerr.UnknownServerError.Code, jr.memberID)
		return
	}
	g.touchMemberLocked(id)
	var m *cmember
	if jr.instanceID != "" {
		old := cg.members[cg.static[jr.instanceID]]
		switch {
		case old != nil && unknown && g.canDowngradeReplacingLocked(old):
			g.downgradeReplacingLocked(old, id, jr, w)
			return
		case old != nil && unknown:
			m = g.replaceStaticLocked(old, id)
		case old != nil && old.id != id:
			w <- joinError(kerr.FencedInstanceID.Code, jr.memberID)
			return
		case old == nil && !unknown:
			w <- joinError(kerr.UnknownMemberID.Code, jr.memberID)
			return
		default:
			m = old
		}
	} else {
		m = cg.members[id]
	}
	changed := false
	if m == nil {
		m = &cmember{id: id, instanceID: jr.instanceID, assigned: map[topicPartition]int32{}}
		cg.addMember(m)
		if jr.instanceID != "" {
			cg.static[jr.instanceID] = id
		}
		changed = true
		g.c.log.Info("member joined consumer group with the classic protocol", "group", g.id, "member", id, "instance", jr.instanceID)
	}
	if topics := sortedTopics(sub.Topics); !slices.Equal(topics, m.topicNames) || m.regex != "" {
		cg.subscribe(m, topics, "", nil)
		changed = true
	}
	if m.serverAssignor != "" {
		m.serverAssignor, changed = "", true
	}
	if sub.Rack != nil && *sub.Rack != "" {
		m.rackID = *sub.Rack
	}
	m.rebalanceTimeout = jr.rebalanceTimeout
	m.clientID, m.clientHost = jr.client.ID, jr.client.Host
	if m.classic == nil {
		g.stopRevokeTimerLocked(m)
		m.classic = &classicMember{}
	}
	m.classic.sessionTimeout, m.classic.protocols = jr.sessionTimeout, jr.protocols
	if changed || g.subscriptionMetadataChangedLocked() {
		g.bumpEpochLocked()
	}
	g.reconcileLocked(m, g.ownedPartitions(&sub))
	g.stopClassicJoinTimerLocked(m)
	g.armConsumerSessionLocked(m)
	g.armClassicSyncTimerLocked(m)
	g.syncClassicViewLocked()
	w <- joinResult{
		memberID:     m.id,
		generation:   m.epoch,
		protocolType: ptr(consumerProtocolType),
		protocol:     ptr(m.classic.protocolName()),
	}
}

// replaceStaticLocked gives a static member's place to a member joining with
// its instance id under a new member id (a classic member's join without one,
// or a KIP-848 member's replacing a classic one): the new id takes over its
// partitions and reconciles from epoch 0, as Kafka does.
func (g *group) replaceStaticLocked(old *cmember, id string) *cmember {
	cg := g.cg
	g.c.log.Info("static member replaced", "group", g.id, "instance", old.instanceID, "old", old.id, "member", id)
	g.touchMemberLocked(old.id)
	g.stopMemberTimersLocked(old)
	delete(cg.members, old.id)
	if t, ok := cg.target[old.id]; ok {
		delete(cg.target, old.id)
		cg.target[id] = t
	}
	for tp, owner := range cg.owners {
		if owner == old.id {
			cg.owners[tp] = id
		}
	}
	old.id = id
	old.epoch, old.prevEpoch = joinEpoch, joinEpoch
	cg.members[id] = old
	cg.static[old.instanceID] = id
	return old
}

// classicMemberLocked finds the classic member a SyncGroup or Heartbeat to a
// consumer group names (Kafka's validateConsumerGroupMember).
func (g *group) classicMemberLocked(memberID, instanceID string) (*cmember, int16) {
	cg := g.cg
	var m *cmember
	if instanceID != "" {
		m = cg.members[cg.static[instanceID]]
		if m == nil {
			return nil, kerr.UnknownMemberID.Code
		}
		if m.id != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
	} else if m = cg.members[memberID]; m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	if m.classic == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	return m, 0
}

// syncConsumerGroupLocked is a classic SyncGroup to a consumer group: the member's
// current assignment, unless it must rejoin first.
func (g *group) syncConsumerGroupLocked(req *kmsg.SyncGroupRequest) syncResult {
	m, code := g.classicMemberLocked(req.MemberID, deref(req.InstanceID))
	switch {
	case code != 0:
		return syncResult{code: code}
	case req.Generation != m.epoch:
		return syncResult{code: kerr.IllegalGeneration.Code}
	case req.ProtocolType != nil && *req.ProtocolType != consumerProtocolType,
		req.Protocol != nil && *req.Protocol != m.classic.protocolName():
		return syncResult{code: kerr.InconsistentGroupProtocol.Code}
	case g.cg.epoch > m.epoch && m.state != memberUnrevoked:
		g.armClassicJoinTimerLocked(m)
		return syncResult{code: kerr.RebalanceInProgress.Code}
	}
	g.stopClassicSyncTimerLocked(m)
	g.armConsumerSessionLocked(m)
	return syncResult{
		assignment:   encodeAssignment(m.assignedSet(), m.classic.assignmentVersion()),
		protocolType: req.ProtocolType,
		protocol:     req.Protocol,
	}
}

// heartbeatConsumerGroupLocked is a classic Heartbeat to a consumer group: it
// keeps the session and asks the member to rejoin when the group moved on, when it
// must revoke, or when partitions it waits for are free.
func (g *group) heartbeatConsumerGroupLocked(req *kmsg.HeartbeatRequest) int16 {
	m, code := g.classicMemberLocked(req.MemberID, deref(req.InstanceID))
	switch {
	case code != 0:
		return code
	case req.Generation != m.epoch:
		return kerr.IllegalGeneration.Code
	}
	g.armConsumerSessionLocked(m)
	if m.epoch < g.cg.epoch || m.state == memberUnrevoked || (m.state == memberUnreleased && !g.waitingOnUnreleasedLocked(m)) {
		g.armClassicJoinTimerLocked(m)
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// waitingOnUnreleasedLocked reports whether a partition of m's target is still
// owned by another member.
func (g *group) waitingOnUnreleasedLocked(m *cmember) bool {
	for tp := range g.cg.target[m.id] {
		if _, mine := m.assigned[tp]; mine {
			continue
		}
		if _, owned := g.cg.owners[tp]; owned {
			return true
		}
	}
	return false
}

// leaveConsumerGroupLocked is one member of a LeaveGroup to a consumer group: a
// classic member leaving, or any member an admin client removes (KIP-848
// members too, as Kafka 4 does, KAFKA-18188). It returns the member removed,
// or nil and the error; the caller bumps the group epoch once for all that
// left, or downgrades the group.
func (g *group) leaveConsumerGroupLocked(memberID, instanceID string) (*cmember, int16) {
	cg := g.cg
	var m *cmember
	if instanceID == "" {
		m = cg.members[memberID]
	} else if m = cg.members[cg.static[instanceID]]; m != nil && memberID != "" && m.id != memberID {
		return nil, kerr.FencedInstanceID.Code
	}
	if m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	g.c.log.Info("member left consumer group by LeaveGroup", "group", g.id, "member", m.id)
	g.dropConsumerMemberLocked(m)
	return m, 0
}

// armClassicJoinTimerLocked starts m's rejoin deadline unless it runs: a classic
// member told to rejoin that does not within its rebalance timeout is removed.
func (g *group) armClassicJoinTimerLocked(m *cmember) {
	if m.classic.joinTimer != nil {
		return
	}
	cm := m.classic
	cm.joinToken++
	tok := cm.joinToken
	cm.joinTimer = g.afterFunc(m.rebalanceTimeout, func() {
		g.classicDeadlineLocked(m, func() bool { return m.classic == cm && cm.joinToken == tok }, "did not rejoin in its rebalance timeout")
	})
}

// armClassicSyncTimerLocked restarts m's sync deadline: a classic member that does
// not send SyncGroup within its rebalance timeout after its join is removed.
func (g *group) armClassicSyncTimerLocked(m *cmember) {
	g.stopClassicSyncTimerLocked(m)
	cm := m.classic
	tok := cm.syncToken
	cm.syncTimer = g.afterFunc(m.rebalanceTimeout, func() {
		g.classicDeadlineLocked(m, func() bool { return m.classic == cm && cm.syncToken == tok }, "did not sync in its rebalance timeout")
	})
}

// classicDeadlineLocked removes m when its deadline (still current) passed.
func (g *group) classicDeadlineLocked(m *cmember, current func() bool, why string) {
	if g.cg != nil && g.cg.members[m.id] == m && current() && g.state != stateDead {
		g.c.log.Info("classic member removed from consumer group", "group", g.id, "member", m.id, "reason", why)
		g.fenceConsumerMemberLocked(m)
		g.persistConsumerLocked(nil)
	}
}

func (g *group) stopClassicJoinTimerLocked(m *cmember) {
	if m.classic == nil {
		return
	}
	if m.classic.joinTimer != nil {
		m.classic.joinTimer.Stop()
		m.classic.joinTimer = nil
	}
	m.classic.joinToken++
}

func (g *group) stopClassicSyncTimerLocked(m *cmember) {
	if m.classic == nil {
		return
	}
	if m.classic.syncTimer != nil {
		m.classic.syncTimer.Stop()
		m.classic.syncTimer = nil
	}
	m.classic.syncToken++
}
