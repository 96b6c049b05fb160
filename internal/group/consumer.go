package group

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the KIP-848 consumer group protocol: the state a group keeps when
// its members speak ConsumerGroupHeartbeat, and the pure transitions over it (all
// methods run with the group's mutex held and do no I/O).
//
// The coordinator owns the assignment. Every change to the membership, to a
// member's subscription or to the subscribed topics' partitions bumps the group
// epoch; the target assignment of the new epoch is computed at once, or, within
// ConsumerAssignmentInterval of the last one (KIP-1263, Kafka 4.4's 1 s), by the
// first heartbeat after it: until then the group is Assigning and members keep to
// the older target. Each member then reconciles towards its target on its own heartbeats:
// it first gives up (revokes) partitions it must lose, keeping its epoch, and only
// when a heartbeat shows it no longer owns them does it move to the target epoch and
// receive new partitions; partitions another member still holds are handed over
// (unreleased) only once that member revoked them.
//
// A consumer group shows the classic side of the group (ListGroups, DeleteGroups,
// OffsetDelete, offset expiry) the classic state Empty when it has no members and
// Stable otherwise, and its subscribed topics as the group's subscription.

// TopicCatalog is the metadata the consumer group coordinator needs: the topics that
// exist, their ids and partition counts. The broker implements it over its metadata
// image; it must be safe for concurrent use.
type TopicCatalog interface {
	// Topic returns a topic's id and partition count; false when it does not exist.
	Topic(name string) (id [16]byte, partitions int32, ok bool)
	// TopicName returns the name of the topic with this id; false when unknown.
	TopicName(id [16]byte) (string, bool)
	// TopicNames lists the topics a subscription pattern may match: every topic
	// but the internal ones.
	TopicNames() []string
	// TopicNamesVersion changes whenever TopicNames, or what Topic says of a
	// topic, may have changed (it may change without them), so a caller
	// resolves patterns or looks topics up again only then.
	TopicNamesVersion() uint64
}

// noTopics is the catalog of a coordinator configured without one.
type noTopics struct{}

func (noTopics) Topic(string) ([16]byte, int32, bool) { return [16]byte{}, 0, false }
func (noTopics) TopicName([16]byte) (string, bool)    { return "", false }
func (noTopics) TopicNames() []string                 { return nil }
func (noTopics) TopicNamesVersion() uint64            { return 0 }

func (g *group) topicsLocked() TopicCatalog { return g.c.cfg.Topics }

// Member epochs with a meaning in ConsumerGroupHeartbeat.
const (
	joinEpoch        = 0  // joining (or rejoining after being fenced)
	leaveEpoch       = -1 // leaving the group
	staticLeaveEpoch = -2 // a static member leaving for now: its assignment waits for it
)

// memberState is a consumer member's reconciliation state, named as Kafka names it.
type memberState int8

const (
	memberStable     memberState = iota // owns its target assignment (or all of it it may have)
	memberUnrevoked                     // must revoke partitions before getting new ones
	memberUnreleased                    // waits for partitions other members still own
)

// topicMeta is what the target assignment was computed from for one topic.
type topicMeta struct {
	id         [16]byte
	partitions int32
}

// cmember is a member of a consumer group using the KIP-848 protocol.
type cmember struct {
	id               string
	instanceID       string
	rackID           string
	clientID         string
	clientHost       string
	epoch            int32
	prevEpoch        int32
	state            memberState
	rebalanceTimeout time.Duration
	topicNames       []string // subscribed topic names, sorted
	regex            string   // subscribed topic pattern ("" for none)
	re               *regexp.Regexp
	serverAssignor   string         // the assignor the member asked for ("" for none)
	classic          *classicMember // non-nil while it speaks the classic protocol (migration.go)

	// assigned maps each partition the member owns to the member epoch it was
	// assigned in (KIP-1251 commit validation); revoking holds partitions it still
	// owns but must give up.
	assigned map[topicPartition]int32
	revoking partSet

	sessionTimer *time.Timer
	sessionToken uint64
	revokeTimer  *time.Timer
	revokeToken  uint64
}

// consumerGroup is the KIP-848 side of a group.
type consumerGroup struct {
	epoch       int32 // the group epoch
	targetEpoch int32 // the epoch of the target assignment
	members     map[string]*cmember
	static      map[string]string // instance id -> member id
	target      map[string]partSet
	owners      map[topicPartition]string // partition -> member owning (or revoking) it
	topics      map[string]topicMeta      // subscribed topics at the last epoch bump (setTopics)
	// metadataHash is topicsHash(topics), the metadata record's, computed
	// when topics is set.
	metadataHash int64
	topicsCheck  catalogCheck  // when topics were last found current
	targetAt     time.Time     // when the target assignment was computed
	subs         subscriptions // what the members subscribe to (consumer_subs.go)
}

// consumerFirstEpoch is a new consumer group's epoch, as in Kafka 4.4: its first
// member joins at 2. A group upgraded from a classic one starts at the classic
// generation instead (migration.go).
const consumerFirstEpoch = 1

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		epoch:   consumerFirstEpoch,
		members: make(map[string]*cmember),
		static:  make(map[string]string),
		target:  make(map[string]partSet),
		owners:  make(map[topicPartition]string),
		topics:  make(map[string]topicMeta),
		subs:    newSubscriptions(),
	}
}

// stateName is the group state ConsumerGroupDescribe and ListGroups report.
func (cg *consumerGroup) stateName() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.targetEpoch < cg.epoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.targetEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

func (cg *consumerGroup) sortedMembers() []*cmember {
	return sortedByID(cg.members)
}

// sortedByID returns the values of a map keyed by member id, sorted by key.
func sortedByID[M any](members map[string]*M) []*M {
	out := make([]*M, 0, len(members))
	for _, id := range slices.Sorted(maps.Keys(members)) {
		out = append(out, members[id])
	}
	return out
}

// heartbeatResult is what ConsumerGroupHeartbeat answers.
type heartbeatResult struct {
	code       int16
	msg        string
	memberID   string
	epoch      int32
	assignment partSet // nil: not sent
}

func hbError(code int16, format string, args ...any) heartbeatResult {
	return heartbeatResult{code: code, msg: fmt.Sprintf(format, args...)}
}

// validateConsumerHeartbeat is Kafka's request check, before the group is looked up.
// v0 lets the coordinator give a joining member its id, and wants one only for
// a heartbeat or a leave (epoch -1): a static leave (-2) is checked against
// its instance id.
func validateConsumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (heartbeatResult, *regexp.Regexp) {
	inv := kerr.InvalidRequest.Code
	switch {
	case blank(req.MemberID) && (req.Version >= 1 || req.MemberEpoch > 0 || req.MemberEpoch == leaveEpoch):
		return hbError(inv, "MemberId can't be empty."), nil
	case blank(req.Group):
		return hbError(inv, "GroupId can't be empty."), nil
	case req.InstanceID != nil && blank(*req.InstanceID):
		return hbError(inv, "InstanceId can't be empty."), nil
	case req.RackID != nil && blank(*req.RackID):
		return hbError(inv, "RackId can't be empty."), nil
	case req.MemberEpoch < staticLeaveEpoch:
		return hbError(inv, "MemberEpoch is invalid."), nil
	case req.MemberEpoch == staticLeaveEpoch && req.InstanceID == nil:
		return hbError(inv, "InstanceId can't be null."), nil
	}
	if req.MemberEpoch == joinEpoch {
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return hbError(inv, "RebalanceTimeoutMs must be provided in first request."), nil
		case req.Topics == nil || len(req.Topics) > 0:
			return hbError(inv, "TopicPartitions must be empty when (re-)joining."), nil
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return hbError(inv, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."), nil
		}
	}
	if req.ServerAssignor != nil && !assignorSupported(*req.ServerAssignor) {
		return hbError(kerr.UnsupportedAssignor.Code, "ServerAssignor %s is not supported. Supported assignors: %s, %s.",
			*req.ServerAssignor, uniformAssignor, rangeAssignor), nil
	}
	var re *regexp.Regexp
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		var err error
		if re, err = regexp.Compile("^(?:" + *req.SubscribedTopicRegex + ")$"); err != nil {
			return hbError(kerr.InvalidRegularExpression.Code, "SubscribedTopicRegex %s is not a valid regular expression: %v.",
				*req.SubscribedTopicRegex, err), nil
		}
	}
	return heartbeatResult{}, re
}

// blank reports whether s is empty once Java's String.trim would have cut its
// leading and trailing spaces and control characters, as Kafka's id checks do.
func blank(s string) bool {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' }) == ""
}

// consumerHeartbeatLocked runs one validated ConsumerGroupHeartbeat.
func (g *group) consumerHeartbeatLocked(req *kmsg.ConsumerGroupHeartbeatRequest, re *regexp.Regexp, cl Client) heartbeatResult {
	if g.state == stateDead {
		return hbError(kerr.CoordinatorNotAvailable.Code, "Group %s is being deleted.", g.id)
	}
	if g.cg == nil {
		if g.sg != nil || g.st != nil {
			return hbError(kerr.GroupIDNotFound.Code, "Group %s is not a consumer group.", g.id)
		}
		// An Empty classic group converts whatever the policy, as in Kafka; member
		// ids handed out with MEMBER_ID_REQUIRED then join the consumer group.
		empty := len(g.members) == 0 && g.state == stateEmpty
		switch {
		case req.MemberEpoch != joinEpoch && empty:
			return hbError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, g.id)
		case req.MemberEpoch != joinEpoch:
			return hbError(kerr.GroupIDNotFound.Code, "Group %s is not a consumer group.", g.id)
		case empty:
			g.becomingModernLocked()
			for _, pm := range g.pending {
				pm.timer.Stop()
			}
			clear(g.pending)
			g.cg = newConsumerGroup()
			g.protocolType = consumerProtocolType
			g.changes = recordChanges{} // all its records are new
		default:
			// A classic group with members converts online (migration.go),
			// unless the joining member would not fit in the consumer group.
			if msg := g.upgradeRefusalLocked(); msg != "" {
				return hbError(kerr.GroupIDNotFound.Code, "%s", msg)
			}
			if len(g.members) >= g.c.cfg.ConsumerMaxSize && g.members[req.MemberID] == nil {
				return hbError(kerr.GroupMaxSizeReached.Code, "%s", g.consumerGroupFullMessage())
			}
			if msg := g.upgradeLocked(); msg != "" {
				return hbError(kerr.GroupIDNotFound.Code, "%s", msg)
			}
		}
	}
	cg := g.cg
	cg.subs.describe = cl.DescribeTopic
	if cg.subs.describe == nil {
		cg.subs.describe = func(string) bool { return true }
	}
	defer func() { cg.subs.describe = nil }()
	if req.MemberEpoch == leaveEpoch || req.MemberEpoch == staticLeaveEpoch {
		return g.consumerLeaveLocked(req)
	}
	if g.consumerGroupFullLocked(req.MemberID) {
		return hbError(kerr.GroupMaxSizeReached.Code, "%s", g.consumerGroupFullMessage())
	}

	var m *cmember
	changed := false
	if req.MemberEpoch == joinEpoch {
		var r heartbeatResult
		if m, changed, r = g.consumerJoinLocked(req, cl); m == nil {
			return r
		}
	} else {
		if r := cg.checkStaticMember(req); r.code != 0 {
			return r
		}
		m = cg.members[req.MemberID]
		if m == nil {
			return hbError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, g.id)
		}
		if code := g.checkMemberEpochLocked(m, req); code != 0 {
			return hbError(code, "The consumer group member has a greater or smaller epoch (%d) than the coordinator's (%d).", req.MemberEpoch, m.epoch)
		}
	}
	if req.MemberEpoch == joinEpoch {
		g.touchMemberLocked(m.id)
	}
	if m.classic != nil {
		// The member speaks the consumer protocol from now on.
		g.stopClassicJoinTimerLocked(m)
		g.stopClassicSyncTimerLocked(m)
		m.classic = nil
		g.touchMemberLocked(m.id)
	}
	before := maps.Clone(m.assigned)
	subscription, metadata := cg.updateSubscription(m, req, re)
	if subscription || metadata {
		g.touchMemberLocked(m.id)
	}
	if changed || subscription || g.subscriptionMetadataChangedLocked() {
		g.bumpEpochLocked()
	}
	if g.reconcileLocked(m, g.ownedFromRequest(req.Topics)) {
		g.touchMemberLocked(m.id)
	}
	g.armConsumerSessionLocked(m)
	g.syncClassicViewLocked()

	r := heartbeatResult{memberID: m.id, epoch: m.epoch}
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	if req.MemberEpoch == joinEpoch || full || !maps.Equal(before, m.assigned) {
		r.assignment = m.assignedSet()
	}
	return r
}

// consumerJoinLocked admits a member joining with epoch 0: a new member, a member
// rejoining after being fenced (it has given up its partitions), or a static member
// taking over the assignment its instance id left behind (or a classic member
// with its instance id holds). It returns the member and whether the group must
// rebalance, or nil and the error.
func (g *group) consumerJoinLocked(req *kmsg.ConsumerGroupHeartbeatRequest, cl Client) (*cmember, bool, heartbeatResult) {
	cg := g.cg
	id := req.MemberID
	if id == "" {
		id = newConsumerMemberID()
	}
	instance := deref(req.InstanceID)
	if instance != "" {
		if oldID, ok := cg.static[instance]; ok && oldID != id {
			old := cg.members[oldID]
			switch {
			case old.classic != nil:
				// A classic member never leaves for now (the classic protocol
				// has no epoch -2): it is replaced whenever its instance
				// comes back speaking KIP-848, as in a rolling upgrade of
				// static members (Kafka's KAFKA-17228).
				m := g.replaceStaticLocked(old, id)
				m.clientID, m.clientHost = cl.ID, cl.Host
				return m, false, heartbeatResult{}
			case old.epoch != staticLeaveEpoch:
				return nil, false, hbError(kerr.UnreleasedInstanceID.Code,
					"Static member %s with instance id %s is not released yet.", oldID, instance)
			}
			// The replacement inherits the assignment: nobody else took it.
			g.c.log.Info("static member replaced", "group", g.id, "instance", instance, "old", oldID, "member", id)
			g.touchMemberLocked(oldID)
			g.stopMemberTimersLocked(old)
			delete(cg.members, oldID)
			old.id, old.clientID, old.clientHost = id, cl.ID, cl.Host
			old.epoch = old.prevEpoch
			cg.members[id] = old
			cg.static[instance] = id
			if t, ok := cg.target[oldID]; ok {
				delete(cg.target, oldID)
				cg.target[id] = t
			}
			for tp, owner := range cg.owners {
				if owner == oldID {
					cg.owners[tp] = id
				}
			}
			return old, false, heartbeatResult{}
		}
	}
	if m := cg.members[id]; m != nil {
		// Rejoining after a fence: the member dropped everything it owned.
		g.releaseLocked(m, m.revoking)
		g.releaseLocked(m, m.assignedSet())
		m.assigned, m.revoking, m.state = map[topicPartition]int32{}, nil, memberStable
		m.epoch = joinEpoch // reconciles from nothing to the target
		m.clientID, m.clientHost = cl.ID, cl.Host
		g.stopRevokeTimerLocked(m)
		return m, false, heartbeatResult{}
	}
	m := &cmember{
		id:         id,
		instanceID: instance,
		clientID:   cl.ID,
		clientHost: cl.Host,
		assigned:   map[topicPartition]int32{},
	}
	cg.addMember(m)
	if instance != "" {
		cg.static[instance] = id
	}
	g.c.log.Info("member joined consumer group", "group", g.id, "member", id, "instance", instance)
	return m, true, heartbeatResult{}
}

// checkMemberEpochLocked is Kafka's fencing rule: the request's epoch must be the
// member's, or its previous one when the member only lost the response that moved
// it on (it owns nothing beyond what it was assigned).
func (g *group) checkMemberEpochLocked(m *cmember, req *kmsg.ConsumerGroupHeartbeatRequest) int16 {
	switch {
	case req.MemberEpoch == m.epoch:
		return 0
	case req.MemberEpoch > m.epoch:
		return kerr.FencedMemberEpoch.Code
	case req.MemberEpoch != m.prevEpoch || req.Topics == nil:
		return kerr.FencedMemberEpoch.Code
	}
	for tp := range g.ownedFromRequest(req.Topics) {
		if _, ok := m.assigned[tp]; !ok {
			return kerr.FencedMemberEpoch.Code
		}
	}
	return 0
}

// checkStaticMember is Kafka's check of a heartbeat or leave naming an
// instance id (a join aside): some member must hold the instance, and it must
// be the one the request names (else it was fenced by a replacement).
func (cg *consumerGroup) checkStaticMember(req *kmsg.ConsumerGroupHeartbeatRequest) heartbeatResult {
	if req.InstanceID == nil {
		return heartbeatResult{}
	}
	id, ok := cg.static[*req.InstanceID]
	switch {
	case !ok:
		return hbError(kerr.UnknownMemberID.Code, "Instance id %s is unknown.", *req.InstanceID)
	case id != req.MemberID:
		return hbError(kerr.FencedInstanceID.Code, "Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, id)
	}
	return heartbeatResult{}
}

// consumerLeaveLocked handles epochs -1 (leave) and -2 (a static member leaving
// for now: it keeps its assignment until its session times out or it comes back,
// but the partitions it was revoking are free at once, as Kafka clears them: the
// consumer gave up everything it owned on closing).
func (g *group) consumerLeaveLocked(req *kmsg.ConsumerGroupHeartbeatRequest) heartbeatResult {
	cg := g.cg
	if r := cg.checkStaticMember(req); r.code != 0 {
		return r
	}
	m := cg.members[req.MemberID]
	if m == nil {
		return hbError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, g.id)
	}
	if req.MemberEpoch == staticLeaveEpoch && m.instanceID != "" {
		g.c.log.Info("static member left temporarily", "group", g.id, "member", m.id, "instance", m.instanceID)
		if m.epoch != staticLeaveEpoch {
			m.prevEpoch = m.epoch
		}
		m.epoch = staticLeaveEpoch
		g.releaseLocked(m, m.revoking)
		m.revoking = nil
		g.touchMemberLocked(m.id)
		g.stopRevokeTimerLocked(m)
		g.armConsumerSessionLocked(m)
		return heartbeatResult{memberID: m.id, epoch: staticLeaveEpoch}
	}
	g.c.log.Info("member left consumer group", "group", g.id, "member", m.id)
	g.fenceConsumerMemberLocked(m)
	return heartbeatResult{memberID: m.id, epoch: leaveEpoch}
}

// removeConsumerMemberLocked drops a member (left, expired, fenced): its
// partitions are free again and the group rebalances.
func (g *group) removeConsumerMemberLocked(m *cmember) {
	g.dropConsumerMemberLocked(m)
	g.bumpEpochLocked()
	g.syncClassicViewLocked()
}

// dropConsumerMemberLocked removes a member and frees its partitions; the caller
// rebalances.
func (g *group) dropConsumerMemberLocked(m *cmember) {
	cg := g.cg
	g.touchMemberLocked(m.id)
	g.stopMemberTimersLocked(m)
	g.releaseLocked(m, m.revoking)
	g.releaseLocked(m, m.assignedSet())
	cg.removeMember(m)
	delete(cg.target, m.id)
	if m.instanceID != "" && cg.static[m.instanceID] == m.id {
		delete(cg.static, m.instanceID)
	}
}

// releaseLocked frees partitions m owned.
func (g *group) releaseLocked(m *cmember, ps partSet) { releaseOwned(g.cg.owners, m.id, ps) }

// updateSubscription applies the request's non-null subscription fields to m and
// reports whether they changed what the assignor sees (subscription) or only
// the rest of the member's metadata (metadata: its server assignor, rack or
// rebalance timeout).
func (cg *consumerGroup) updateSubscription(m *cmember, req *kmsg.ConsumerGroupHeartbeatRequest, re *regexp.Regexp) (subscription, metadata bool) {
	names, regex := m.topicNames, m.regex
	if req.SubscribedTopicNames != nil {
		names = slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.topicNames) {
			subscription = true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		regex, subscription = *req.SubscribedTopicRegex, true
	} else {
		re = m.re
	}
	if subscription {
		cg.subscribe(m, names, regex, re)
	}
	// A new server assignor alone does not rebalance, as in Kafka: the group
	// uses the members' preferred one at its next target assignment.
	if req.ServerAssignor != nil && *req.ServerAssignor != m.serverAssignor {
		m.serverAssignor, metadata = *req.ServerAssignor, true
	}
	if req.RackID != nil && *req.RackID != m.rackID {
		m.rackID, metadata = *req.RackID, true
	}
	if timeout := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond; timeout > 0 && timeout != m.rebalanceTimeout {
		m.rebalanceTimeout, metadata = timeout, true
	}
	return subscription, metadata
}

// subscribedTopicsLocked returns the existing topics m subscribes to, sorted:
// its pattern's are those it resolved to.
func (g *group) subscribedTopicsLocked(m *cmember) []string {
	cat := g.topicsLocked()
	var out []string
	for _, t := range m.topicNames {
		if _, _, ok := cat.Topic(t); ok {
			out = append(out, t)
		}
	}
	if m.regex != "" {
		g.matchedTopicsLocked()
		if p := g.cg.subs.patterns[m.regex]; p != nil {
			for _, t := range p.topics {
				if _, _, ok := cat.Topic(t); ok && !slices.Contains(out, t) {
					out = append(out, t)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// subscriptionMetadataLocked describes every existing topic some member
// subscribes to.
func (g *group) subscriptionMetadataLocked() map[string]topicMeta {
	cat := g.topicsLocked()
	out := make(map[string]topicMeta)
	g.eachSubscribedLocked(func(t string) {
		if id, n, ok := cat.Topic(t); ok {
			out[t] = topicMeta{id: id, partitions: n}
		}
	})
	return out
}

// subscriptionMetadataChangedLocked reports whether a subscribed topic appeared,
// went, was recreated or grew since the group epoch was last bumped. Only a
// new catalog version can tell so: the members' subscriptions change only
// with an epoch bump, which takes the topics again.
func (g *group) subscriptionMetadataChangedLocked() bool {
	return g.cg.topicsCheck.changed(g.topicsLocked(), g.cg.topics, g.subscriptionMetadataLocked)
}

// setTopics makes topics the subscribed topics, with their metadata hash, not
// yet known to be the catalog's current ones.
func (cg *consumerGroup) setTopics(topics map[string]topicMeta) {
	cg.topics, cg.metadataHash, cg.topicsCheck = topics, topicsHash(topics), catalogCheck{}
}

// refreshTopicsLocked takes the subscribed topics from the catalog.
func (g *group) refreshTopicsLocked() {
	cg := g.cg
	version := g.topicsLocked().TopicNamesVersion()
	cg.setTopics(g.subscriptionMetadataLocked())
	cg.topicsCheck.takenAt(version)
}

// bumpEpochLocked starts a new group epoch and computes its target assignment
// when the assignment interval allows (maybeConsumerTargetLocked).
func (g *group) bumpEpochLocked() {
	cg := g.cg
	cg.epoch++
	g.refreshTopicsLocked()
	g.touchGroupLocked()
	g.maybeConsumerTargetLocked()
}

// maybeConsumerTargetLocked computes the target assignment of the group epoch if
// the target is older and ConsumerAssignmentInterval has passed since the last
// one (KIP-1263, as Kafka 4.4); otherwise members keep to the older target, and
// one new since then gets nothing until a later heartbeat computes it.
func (g *group) maybeConsumerTargetLocked() {
	cg := g.cg
	now := g.c.now()
	if cg.targetEpoch >= cg.epoch || (!cg.targetAt.IsZero() && now.Sub(cg.targetAt) < g.c.cfg.ConsumerAssignmentInterval) {
		return
	}
	assignor := preferredAssignor(cg.members)
	spec := assignSpec{
		subscribed: make(map[string][]string, len(cg.members)),
		partitions: make(map[string]int32),
		previous:   cg.target,
	}
	for t, tm := range cg.topics {
		spec.partitions[t] = tm.partitions
	}
	for _, m := range cg.sortedMembers() {
		spec.members = append(spec.members, m.id)
		spec.subscribed[m.id] = g.subscribedTopicsLocked(m)
	}
	target := assign(assignor, spec)
	g.touchTargetsLocked(cg.target, target)
	cg.target = target
	cg.targetEpoch, cg.targetAt = cg.epoch, now
	g.touchGroupLocked()
	g.c.log.Info("consumer group target assignment", "group", g.id, "epoch", cg.epoch, "members", len(cg.members), "assignor", assignor)
}

// preferredAssignor is the server assignor most members asked for (ties go to the
// first name), or the default.
func preferredAssignor(members map[string]*cmember) string {
	votes := map[string]int{}
	for _, m := range members {
		if m.serverAssignor != "" {
			votes[m.serverAssignor]++
		}
	}
	best := ""
	for _, name := range slices.Sorted(maps.Keys(votes)) {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	if best == "" {
		return uniformAssignor
	}
	return best
}

// ownedFromRequest maps the request's owned partitions to names (nil when the
// request did not say). Topics that no longer exist are left out.
func (g *group) ownedFromRequest(topics []kmsg.ConsumerGroupHeartbeatRequestTopic) partSet {
	if topics == nil {
		return nil
	}
	cat := g.topicsLocked()
	out := partSet{}
	for _, t := range topics {
		name, ok := cat.TopicName(t.TopicID)
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			out[topicPartition{name, p}] = struct{}{}
		}
	}
	return out
}

func (m *cmember) assignedSet() partSet { return ownedSet(m.assigned) }

// reconcileLocked moves m towards its target assignment given the partitions its
// heartbeat says it owns (nil: it did not say), and reports whether m's epochs,
// state or partitions changed.
func (g *group) reconcileLocked(m *cmember, owned partSet) bool {
	cg := g.cg
	g.maybeConsumerTargetLocked()
	return recon{
		id: m.id, epoch: &m.epoch, prevEpoch: &m.prevEpoch, state: &m.state,
		assigned: m.assigned, revoking: &m.revoking, owners: cg.owners,
		targetEpoch: cg.targetEpoch, target: cg.target[m.id],
		armRevoke:  func() { g.armRevokeTimerLocked(m) },
		stopRevoke: func() { g.stopRevokeTimerLocked(m) },
	}.reconcile(owned)
}

// syncClassicViewLocked keeps the classic side of the group in step (see the top of
// the file): Empty or Stable, and the subscribed topics.
func (g *group) syncClassicViewLocked() {
	g.syncMemberViewLocked(len(g.cg.members), g.eachSubscribedLocked)
}

// syncMemberViewLocked is the classic view of a group whose members the
// coordinator assigns (KIP-848 or share): Empty without members, else Stable, and
// the topics subscribed lists.
func (g *group) syncMemberViewLocked(members int, subscribed func(add func(topic string))) {
	switch {
	case members == 0 && g.state != stateEmpty:
		g.transitionLocked(stateEmpty)
	case members > 0 && g.state != stateStable:
		g.transitionLocked(stateStable)
	}
	g.subscribed, g.subsKnown = make(map[string]struct{}), true
	subscribed(func(t string) { g.subscribed[t] = struct{}{} })
}

// armConsumerSessionLocked restarts m's session timeout (the group's
// consumer.session.timeout.ms, else group.consumer.session.timeout.ms, or the
// classic member's own); when it runs out the member is removed.
func (g *group) armConsumerSessionLocked(m *cmember) {
	if m.sessionTimer != nil {
		m.sessionTimer.Stop()
	}
	m.sessionToken++
	tok := m.sessionToken
	d, _ := g.c.consumerTimeouts(g.id)
	if m.classic != nil {
		d = m.classic.sessionTimeout
	}
	m.sessionTimer = g.afterFunc(d, func() {
		if m.sessionToken == tok && g.cg != nil && g.cg.members[m.id] == m && g.state != stateDead {
			g.c.log.Info("consumer group member session expired", "group", g.id, "member", m.id)
			g.fenceConsumerMemberLocked(m)
			g.persistConsumerLocked(nil)
		}
	})
}

// armRevokeTimerLocked gives m its rebalance timeout to revoke; a member still
// revoking then is removed from the group. Classic members have their join and
// sync deadlines instead.
func (g *group) armRevokeTimerLocked(m *cmember) {
	g.stopRevokeTimerLocked(m)
	if m.classic != nil {
		return
	}
	tok := m.revokeToken
	d := m.rebalanceTimeout
	if d <= 0 {
		d, _ = g.c.consumerTimeouts(g.id)
	}
	m.revokeTimer = g.afterFunc(d, func() {
		if m.revokeToken == tok && g.cg != nil && g.cg.members[m.id] == m && m.state == memberUnrevoked && g.state != stateDead {
			g.c.log.Info("consumer group member did not revoke in its rebalance timeout", "group", g.id, "member", m.id)
			g.fenceConsumerMemberLocked(m)
			g.persistConsumerLocked(nil)
		}
	})
}

func (g *group) stopRevokeTimerLocked(m *cmember) {
	if m.revokeTimer != nil {
		m.revokeTimer.Stop()
		m.revokeTimer = nil
	}
	m.revokeToken++
}

func (g *group) stopMemberTimersLocked(m *cmember) {
	if m.sessionTimer != nil {
		m.sessionTimer.Stop()
	}
	m.sessionToken++
	g.stopRevokeTimerLocked(m)
	g.stopClassicJoinTimerLocked(m)
	g.stopClassicSyncTimerLocked(m)
}

// stopConsumerTimersLocked stops the timers of every consumer member (unload,
// deletion).
func (g *group) stopConsumerTimersLocked() {
	if g.cg == nil {
		return
	}
	for _, m := range g.cg.members {
		g.stopMemberTimersLocked(m)
	}
}

// validateConsumerCommitLocked is OffsetCommit's check for a consumer group; it
// returns a request-level code, or 0 with perPartition set when each partition
// must be checked with commitPartitionCodeLocked (an older epoch, KIP-1251).
// Without members, epoch -1 is accepted whatever member id it names (a member
// that left and assigns its partitions itself keeps its id).
func (g *group) validateConsumerCommitLocked(req *kmsg.OffsetCommitRequest) (code int16, perPartition bool) {
	cg := g.cg
	if req.Generation < 0 && len(cg.members) == 0 {
		return 0, false
	}
	m := cg.members[req.MemberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code, false
	case m.classic != nil && req.Generation != m.epoch:
		return kerr.IllegalGeneration.Code, false
	case m.classic != nil:
		return 0, false
	case req.Version < 9:
		return kerr.UnsupportedVersion.Code, false
	case req.Generation == m.epoch:
		return 0, false
	case req.Generation > m.epoch || req.Generation < 0:
		return kerr.StaleMemberEpoch.Code, false
	}
	return 0, true
}

// commitPartitionCodeLocked is the KIP-1251 check of a commit with an older member
// epoch: the member must own the partition since that epoch or earlier.
func (g *group) commitPartitionCodeLocked(req *kmsg.OffsetCommitRequest, tp topicPartition) int16 {
	m := g.cg.members[req.MemberID]
	if at, ok := m.assigned[tp]; ok && at <= req.Generation {
		return 0
	}
	return kerr.StaleMemberEpoch.Code
}

// newConsumerMemberID is a member id for a v0 join, a random UUID as Kafka uses.
func newConsumerMemberID() string {
	id := newMemberID("", "")
	return id[1:]
}
