package group

import (
	"bytes"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the KIP-1071 streams group protocol (group.protocol=streams in
// Kafka Streams): the state a group keeps when its members speak
// StreamsGroupHeartbeat, and the pure transitions over it (methods run with the
// group's mutex held and do no I/O).
//
// The first member to join registers the application's topology: its
// subtopologies, their source topics, the repartition topics they write and read
// and their state changelogs. The coordinator configures it against the topics
// that exist (configureTopology): the source topics must exist
// (MISSING_SOURCE_TOPICS), co-partitioned topics must agree
// (INCORRECTLY_PARTITIONED_TOPICS), and the repartition and changelog topics get
// their partition counts decided and are created by the broker when missing
// (MISSING_INTERNAL_TOPICS until they exist). A subtopology has as many tasks as
// its largest source topic has partitions; a task is named by its subtopology id
// and partition, held here as a topicPartition whose topic is the subtopology id.
//
// Only once the topology is configured (every topic present and agreeing) are
// tasks assigned: active tasks and their standby copies, balanced over the
// processes and sticky (streams_assignor.go). That target is refined with
// warm-up tasks (streams_warmup.go): a stateful task moves to another process
// only once that process has caught up on its state. Each member then
// reconciles towards the refined assignment as a KIP-848 consumer does: it
// revokes active tasks it must lose first, keeping its epoch, and takes a task
// another member still owns only once that member revoked it.
//
// The group's state is written to __consumer_offsets in Kafka's streams group
// records (streams_records.go), so a coordinator that loads the partition has
// the group, its members and their tasks. A streams group shows the classic
// side Empty or Stable.

const (
	streamsProtocolType = "streams"
	streamsAssignor     = "sticky" // Kafka's name for its streams task assignor
	// streamsTaskOffsetInterval is how often members report their task offsets,
	// Kafka 4.4's default group.streams.task.offset.interval.ms (not a Strata
	// setting). A member also reports them as soon as a warm-up task catches up.
	streamsTaskOffsetInterval = time.Minute
)

// StreamsGroupHeartbeat status codes (KIP-1071).
const (
	statusStaleTopology         int8 = 0
	statusMissingSourceTopics   int8 = 1
	statusIncorrectlyPartitions int8 = 2
	statusMissingInternalTopics int8 = 3
	statusShutdownApplication   int8 = 4
	statusMissingClientTags     int8 = 6
)

// streamsGroup is the streams side of a group.
type streamsGroup struct {
	epoch         int32 // the group epoch
	targetEpoch   int32 // the epoch of the target assignment
	topology      *kmsg.StreamsGroupHeartbeatRequestTopology
	configured    configuredTopology
	topics        map[string]topicMeta // the topology's topics that existed at the last configuration
	members       map[string]*stmember
	static        map[string]string         // instance id -> member id
	target        map[string]partSet        // active tasks (the assignor's)
	standbyTarget map[string]partSet        // standby tasks (the assignor's)
	refined       streamsRefined            // what members reconcile towards (warm-ups)
	owners        map[topicPartition]string // active task -> member owning (or revoking) it
	endpointEpoch int32                     // bumped when an IQ endpoint's tasks change
	shutdownBy    string                    // the member that asked the application to shut down
	targetTime    time.Time                 // when the target assignment was computed
	// stale is set when the group was loaded and its topics changed since its
	// records were written: the next heartbeat reconfigures and rebalances.
	stale       bool
	topicsCheck catalogCheck // when topics were last found current
}

// stmember is a member of a streams group.
type stmember struct {
	id, instanceID, rackID          string
	clientID, clientHost, processID string
	epoch, prevEpoch                int32
	state                           memberState
	topologyEpoch                   int32
	rebalanceTimeout                time.Duration
	endpoint                        *kmsg.StreamsGroupHeartbeatRequestUserEndpoint
	clientTags                      []kmsg.StreamsGroupHeartbeatRequestClientTag
	assigned                        map[topicPartition]int32 // active task -> the member epoch it came in
	revoking                        partSet                  // active tasks to give up
	standby, warmup                 partSet                  // standby and warm-up tasks
	// taskOffsets and taskEndOffsets are the task offset sums the member last
	// reported (its heartbeat's TaskOffsets and TaskEndOffsets).
	taskOffsets, taskEndOffsets map[topicPartition]int64
	sessionTimer, revokeTimer   *time.Timer
	sessionToken, revokeToken   uint64
}

func newStreamsGroup() *streamsGroup {
	return &streamsGroup{
		refined:       streamsRefined{active: map[string]partSet{}, standby: map[string]partSet{}, warmup: map[string]partSet{}},
		members:       make(map[string]*stmember),
		static:        make(map[string]string),
		target:        make(map[string]partSet),
		standbyTarget: make(map[string]partSet),
		owners:        make(map[topicPartition]string),
		topics:        make(map[string]topicMeta),
	}
}

// stateName is the state StreamsGroupDescribe and ListGroups report.
func (sg *streamsGroup) stateName() string {
	switch {
	case len(sg.members) == 0:
		return "Empty"
	case !sg.configured.ready():
		return "NotReady"
	case sg.targetEpoch < sg.epoch:
		return "Assigning"
	}
	for _, m := range sg.members {
		if m.epoch != sg.targetEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// configuredTopology is a topology checked against the topics that exist.
type configuredTopology struct {
	tasks  map[string]int32 // subtopology id -> tasks; nil unless the source topics exist and agree
	status int8             // meaningful when detail != ""
	detail string           // "" when the topology is ready
	create []kmsg.CreateTopicsRequestTopic
}

func (ct configuredTopology) ready() bool { return ct.tasks != nil && ct.detail == "" }

// topologyTopics lists every topic a topology names, sorted.
func topologyTopics(top *kmsg.StreamsGroupHeartbeatRequestTopology) []string {
	set := map[string]struct{}{}
	for _, s := range top.Subtopologies {
		for _, t := range s.SourceTopics {
			set[t] = struct{}{}
		}
		for _, t := range s.RepartitionSinkTopics {
			set[t] = struct{}{}
		}
		for _, ti := range s.RepartitionSourceTopics {
			set[ti.Topic] = struct{}{}
		}
		for _, ti := range s.StateChangelogTopics {
			set[ti.Topic] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// configureTopology decides the partition counts of the internal topics and the
// tasks of each subtopology, as Kafka's InternalTopicManager does, given the
// partition counts of the topics that exist.
func configureTopology(top *kmsg.StreamsGroupHeartbeatRequestTopology, exists map[string]topicMeta) configuredTopology {
	var missing []string
	for _, s := range top.Subtopologies {
		for _, t := range s.SourceTopics {
			if _, ok := exists[t]; !ok && !slices.Contains(missing, t) {
				missing = append(missing, t)
			}
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return configuredTopology{status: statusMissingSourceTopics,
			detail: fmt.Sprintf("Source topics %s are missing.", strings.Join(missing, ", "))}
	}
	decided := map[string]int32{}
	count := func(t string) (int32, bool) {
		if tm, ok := exists[t]; ok {
			return tm.partitions, true
		}
		n, ok := decided[t]
		return n, ok
	}
	// A subtopology's task count: its largest source or repartition source topic.
	tasksOf := func(s *kmsg.StreamsGroupHeartbeatRequestTopologySubtopology) (int32, bool) {
		var n int32
		for _, t := range s.SourceTopics {
			c, ok := count(t)
			if !ok {
				return 0, false
			}
			n = max(n, c)
		}
		for _, ti := range s.RepartitionSourceTopics {
			c, ok := count(ti.Topic)
			if !ok {
				return 0, false
			}
			n = max(n, c)
		}
		return n, true
	}
	// Repartition topics: a fixed count, else the largest task count of the
	// subtopologies writing to it, resolved until nothing changes.
	flexible := map[string]bool{}
	for _, s := range top.Subtopologies {
		for _, ti := range s.RepartitionSourceTopics {
			if ti.NumPartitions > 0 {
				decided[ti.Topic] = ti.NumPartitions
			} else {
				flexible[ti.Topic] = true
			}
		}
	}
	for progress := true; progress; {
		progress = false
		for t := range flexible {
			if _, ok := decided[t]; ok {
				continue
			}
			var n int32
			known := false
			for i := range top.Subtopologies {
				s := &top.Subtopologies[i]
				if !slices.Contains(s.RepartitionSinkTopics, t) {
					continue
				}
				if c, ok := tasksOf(s); ok {
					n, known = max(n, c), true
				}
			}
			if known && n > 0 {
				decided[t], progress = n, true
			}
		}
	}
	for t := range flexible {
		if _, ok := decided[t]; !ok {
			return configuredTopology{status: statusMissingSourceTopics,
				detail: "Failed to compute the number of partitions of every repartition topic: make sure all input topics exist."}
		}
	}
	// Co-partitioned topics must agree; flexible repartition topics among them
	// take the others' count.
	for _, s := range top.Subtopologies {
		for _, cg := range s.CopartitionGroups {
			var names []string
			for _, i := range cg.SourceTopics {
				if int(i) < len(s.SourceTopics) {
					names = append(names, s.SourceTopics[i])
				}
			}
			for _, i := range cg.RepartitionSourceTopics {
				if int(i) < len(s.RepartitionSourceTopics) {
					names = append(names, s.RepartitionSourceTopics[i].Topic)
				}
			}
			var want int32
			var fixed []string
			for _, t := range names {
				if flexible[t] {
					continue
				}
				c, _ := count(t)
				if want != 0 && c != want {
					slices.Sort(names)
					return configuredTopology{status: statusIncorrectlyPartitions,
						detail: fmt.Sprintf("The co-partitioned topics %s do not have the same number of partitions.", strings.Join(names, ", "))}
				}
				want = c
				fixed = append(fixed, t)
			}
			if len(fixed) == 0 {
				for _, t := range names {
					want = max(want, decided[t])
				}
			}
			for _, t := range names {
				if flexible[t] {
					decided[t] = want
				}
			}
		}
	}
	ct := configuredTopology{tasks: map[string]int32{}}
	for i := range top.Subtopologies {
		s := &top.Subtopologies[i]
		n, _ := tasksOf(s)
		ct.tasks[s.SubtopologyID] = n
		for _, ti := range s.StateChangelogTopics {
			decided[ti.Topic] = n
		}
	}
	var missingInternal []string
	for _, s := range top.Subtopologies {
		for _, ti := range slices.Concat(s.RepartitionSourceTopics, s.StateChangelogTopics) {
			want := decided[ti.Topic]
			if tm, ok := exists[ti.Topic]; ok {
				if tm.partitions != want {
					return configuredTopology{status: statusIncorrectlyPartitions,
						detail: fmt.Sprintf("Existing topic %s has different number of partitions: expected %d, found %d.", ti.Topic, want, tm.partitions)}
				}
				continue
			}
			if slices.Contains(missingInternal, ti.Topic) {
				continue
			}
			missingInternal = append(missingInternal, ti.Topic)
			t := kmsg.NewCreateTopicsRequestTopic()
			t.Topic, t.NumPartitions, t.ReplicationFactor = ti.Topic, want, ti.ReplicationFactor
			if t.ReplicationFactor == 0 {
				t.ReplicationFactor = -1
			}
			for _, c := range ti.Configs {
				tc := kmsg.NewCreateTopicsRequestTopicConfig()
				tc.Name, tc.Value = c.Key, ptr(c.Value)
				t.Configs = append(t.Configs, tc)
			}
			ct.create = append(ct.create, t)
		}
	}
	if len(missingInternal) > 0 {
		slices.Sort(missingInternal)
		ct.status, ct.detail = statusMissingInternalTopics, "Internal topics are missing: "+strings.Join(missingInternal, ", ")
	}
	return ct
}

// sameTopology compares two topologies, their epochs included, ignoring the
// order of subtopologies, unknown tags and null against empty lists: their
// records (streams_records.go) must be the same.
func sameTopology(a, b *kmsg.StreamsGroupHeartbeatRequestTopology) bool {
	canonical := func(t *kmsg.StreamsGroupHeartbeatRequestTopology) []byte {
		c := *t
		c.Subtopologies = slices.Clone(t.Subtopologies)
		slices.SortFunc(c.Subtopologies, func(x, y kmsg.StreamsGroupHeartbeatRequestTopologySubtopology) int {
			return strings.Compare(x.SubtopologyID, y.SubtopologyID)
		})
		return appendTopologyValue(nil, &c)
	}
	return bytes.Equal(canonical(a), canonical(b))
}

// streamsResult is what StreamsGroupHeartbeat answers, and the internal topics
// the broker is to create.
type streamsResult struct {
	code       int16
	msg        string
	memberID   string
	epoch      int32
	active     partSet // nil: not sent (nor standby and warmup)
	standby    partSet
	warmup     partSet
	lag        int64 // the acceptable recovery lag members are told
	status     []kmsg.StreamsGroupHeartbeatResponseStatus
	endpoints  []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint // nil: not sent
	endpointEp int32
	create     []kmsg.CreateTopicsRequestTopic
}

func streamsError(code int16, format string, args ...any) streamsResult {
	return streamsResult{code: code, msg: fmt.Sprintf(format, args...)}
}

// validateStreamsHeartbeat is Kafka's request check, before the group is looked up.
func validateStreamsHeartbeat(req *kmsg.StreamsGroupHeartbeatRequest) streamsResult {
	inv := kerr.InvalidRequest.Code
	if req.Topology != nil {
		for _, s := range req.Topology.Subtopologies {
			if len(s.SourceTopicRegex) > 0 {
				return streamsError(inv, "Regular expressions for source topics are not supported yet.")
			}
		}
	}
	switch {
	case strings.TrimSpace(req.MemberID) == "":
		return streamsError(inv, "MemberId can't be empty.")
	case strings.TrimSpace(req.Group) == "":
		return streamsError(inv, "GroupId can't be empty.")
	case req.InstanceID != nil && strings.TrimSpace(*req.InstanceID) == "":
		return streamsError(inv, "InstanceId can't be empty.")
	case req.RackID != nil && strings.TrimSpace(*req.RackID) == "":
		return streamsError(inv, "RackId can't be empty.")
	}
	switch {
	case req.MemberEpoch == joinEpoch:
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return streamsError(inv, "RebalanceTimeoutMs must be provided in first request.")
		case len(req.ActiveTasks) > 0:
			return streamsError(inv, "ActiveTasks must be empty when (re-)joining.")
		case len(req.StandbyTasks) > 0:
			return streamsError(inv, "StandbyTasks must be empty when (re-)joining.")
		case len(req.WarmupTasks) > 0:
			return streamsError(inv, "WarmupTasks must be empty when (re-)joining.")
		case req.Topology == nil:
			return streamsError(inv, "Topology must be non-null when (re-)joining.")
		}
		for _, s := range req.Topology.Subtopologies {
			for _, ti := range s.StateChangelogTopics {
				if ti.NumPartitions != 0 {
					return streamsError(kerr.StreamsInvalidTopology.Code,
						"Changelog topic %s must have an undefined partition count, but it is set to %d.", ti.Topic, ti.NumPartitions)
				}
			}
		}
	case req.MemberEpoch == staticLeaveEpoch && req.InstanceID == nil:
		return streamsError(inv, "InstanceId can't be null.")
	case req.MemberEpoch < staticLeaveEpoch:
		return streamsError(inv, "MemberEpoch is %d, but must be greater than or equal to -2.", req.MemberEpoch)
	}
	if (req.ActiveTasks != nil || req.StandbyTasks != nil || req.WarmupTasks != nil) &&
		(req.ActiveTasks == nil || req.StandbyTasks == nil || req.WarmupTasks == nil) {
		return streamsError(inv, "If one task-type is non-null, all must be non-null.")
	}
	if req.MemberEpoch != joinEpoch && req.Topology != nil {
		return streamsError(inv, "Topology can only be provided when (re-)joining.")
	}
	return streamsResult{}
}

// convertibleToStreamsLocked reports whether a joining streams member may turn
// the group into a streams group: it has no members of another kind (a simple
// group, an Empty classic group, or an Empty consumer group), as Kafka allows.
func (g *group) convertibleToStreamsLocked() bool {
	if g.sg != nil || len(g.members) > 0 || len(g.pending) > 0 || g.state != stateEmpty {
		return false
	}
	return g.cg == nil || len(g.cg.members) == 0
}

// streamsHeartbeatLocked runs one validated StreamsGroupHeartbeat.
func (g *group) streamsHeartbeatLocked(req *kmsg.StreamsGroupHeartbeatRequest, cl Client) streamsResult {
	if g.state == stateDead {
		return streamsError(kerr.CoordinatorNotAvailable.Code, "Group %s is being deleted.", g.id)
	}
	if g.st == nil {
		switch {
		case req.MemberEpoch != joinEpoch && g.convertibleToStreamsLocked():
			return streamsError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, g.id)
		case !g.convertibleToStreamsLocked():
			return streamsError(kerr.GroupIDNotFound.Code, "Group %s is not a streams group.", g.id)
		}
		g.becomingModernLocked()
		if g.generation > 0 || g.protocolType != "" {
			// A classic group's metadata record goes, as Kafka deletes it
			// when a group changes type (and an Empty consumer group's
			// records, which written holds).
			if g.written == nil {
				g.written = map[string][]byte{}
			}
			g.written[string(groupKey(g.id))] = unknownValue
		}
		g.changes = recordChanges{} // all its records are new
		g.cg = nil
		g.st = newStreamsGroup()
		g.protocolType = streamsProtocolType
	}
	sg := g.st
	m := sg.members[req.MemberID]
	instance := deref(req.InstanceID)
	if instance != "" && req.MemberEpoch != joinEpoch {
		if id, ok := sg.static[instance]; ok && id != req.MemberID {
			return streamsError(kerr.FencedInstanceID.Code, "Static member %s with instance id %s was replaced.", req.MemberID, instance)
		}
	}
	if req.MemberEpoch == leaveEpoch || req.MemberEpoch == staticLeaveEpoch {
		if m == nil {
			return streamsError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, g.id)
		}
		if req.MemberEpoch == staticLeaveEpoch && m.instanceID != "" {
			// A static member leaving for now: its tasks wait for it until its
			// session times out or its instance comes back, but the active
			// tasks it was revoking are free at once (it gave everything up on
			// closing), as Kafka's static leave clears them and ends the
			// revocation.
			g.c.log.Info("static member left streams group temporarily", "group", g.id, "member", m.id, "instance", m.instanceID)
			if m.epoch != staticLeaveEpoch {
				m.prevEpoch = m.epoch
			}
			m.epoch = staticLeaveEpoch
			releaseOwned(sg.owners, m.id, m.revoking)
			m.revoking = nil
			if m.state == memberUnrevoked {
				m.state = memberStable
			}
			g.touchMemberLocked(m.id)
			g.stopStreamsRevokeTimerLocked(m)
			g.armStreamsSessionLocked(m)
			return streamsResult{memberID: m.id, epoch: staticLeaveEpoch}
		}
		g.c.log.Info("member left streams group", "group", g.id, "member", m.id)
		g.removeStreamsMemberLocked(m)
		return streamsResult{memberID: m.id, epoch: leaveEpoch}
	}
	if req.Topology != nil && sg.topology != nil && sg.topology.Epoch <= req.Topology.Epoch && !sameTopology(sg.topology, req.Topology) {
		return streamsError(kerr.InvalidRequest.Code, "Topology updates are not supported yet.")
	}
	replaced := false
	if oldID, ok := sg.static[instance]; ok && instance != "" && oldID != req.MemberID && req.MemberEpoch == joinEpoch {
		old := sg.members[oldID]
		// A member of the group may not take another's instance: the
		// replacement would put the instance's member under its id and leave
		// its own instance naming a member that is gone.
		if old.epoch != staticLeaveEpoch || m != nil {
			return streamsError(kerr.UnreleasedInstanceID.Code, "Static member %s with instance id %s is not released yet.", oldID, instance)
		}
		// The new member takes over what its instance left behind.
		g.c.log.Info("static member replaced", "group", g.id, "instance", instance, "old", oldID, "member", req.MemberID)
		delete(sg.members, oldID)
		g.touchMemberLocked(oldID)
		old.id, old.epoch = req.MemberID, old.prevEpoch
		sg.members[old.id], sg.static[instance] = old, old.id
		for _, ts := range []map[string]partSet{sg.target, sg.standbyTarget, sg.refined.active, sg.refined.standby, sg.refined.warmup} {
			if t, ok := ts[oldID]; ok {
				delete(ts, oldID)
				ts[old.id] = t
			}
		}
		for tp, owner := range sg.owners {
			if owner == oldID {
				sg.owners[tp] = old.id
			}
		}
		m, replaced = old, true
	}
	bump := false
	switch {
	case replaced:
	case m == nil && req.MemberEpoch != joinEpoch:
		return streamsError(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, g.id)
	case m == nil:
		m = &stmember{id: req.MemberID, instanceID: instance, assigned: map[topicPartition]int32{}}
		sg.members[m.id] = m
		if instance != "" {
			sg.static[instance] = m.id
		}
		bump = true
		g.c.log.Info("member joined streams group", "group", g.id, "member", m.id, "instance", instance)
	case req.MemberEpoch == joinEpoch:
		// Rejoining after a fence: the member dropped every task it owned.
		releaseOwned(sg.owners, m.id, m.revoking)
		releaseOwned(sg.owners, m.id, ownedSet(m.assigned))
		m.assigned, m.revoking, m.standby, m.warmup, m.state, m.epoch = map[topicPartition]int32{}, nil, nil, nil, memberStable, joinEpoch
		g.stopStreamsRevokeTimerLocked(m)
	default:
		if code, msg := g.checkStreamsEpochLocked(m, req); code != 0 {
			return streamsError(code, "%s", msg)
		}
	}
	beforeActive, beforeStandby, beforeWarmup, beforeEpoch := ownedSet(m.assigned), m.standby.clone(), m.warmup.clone(), m.epoch
	if req.MemberEpoch == joinEpoch {
		m.clientID, m.clientHost = cl.ID, cl.Host
		g.touchMemberLocked(m.id)
	}
	assignor, metadata := m.updateMetadata(req)
	if assignor || metadata {
		g.touchMemberLocked(m.id)
	}
	bump = bump || assignor
	var status []kmsg.StreamsGroupHeartbeatResponseStatus
	if req.Topology != nil && sg.topology == nil {
		top := *req.Topology
		sg.topology = &top
		g.c.log.Info("streams group topology initialized", "group", g.id, "member", m.id, "epoch", top.Epoch)
		bump = true
	}
	if m.topologyEpoch < sg.topology.Epoch {
		st := kmsg.NewStreamsGroupHeartbeatResponseStatus()
		st.StatusCode = statusStaleTopology
		st.StatusDetail = fmt.Sprintf("The member's topology epoch %d is behind the group's topology epoch %d.", m.topologyEpoch, sg.topology.Epoch)
		status = append(status, st)
	}
	if bump || sg.stale || g.topologyTopicsChangedLocked() {
		sg.topics = sg.topicsCheck.take(g.topicsLocked(), g.topologyMetadataLocked)
		sg.configured = configureTopology(sg.topology, sg.topics)
		sg.stale, bump = false, true
	}
	if m.updateTaskOffsets(req) && !bump && g.warmupCaughtUpLocked() {
		g.c.log.Info("streams group warm-up caught up", "group", g.id, "member", m.id)
		bump = true
	}
	if bump {
		g.bumpStreamsEpochLocked()
	}
	if g.reconcileStreamsLocked(m, ownedActive(req.ActiveTasks)) {
		g.touchMemberLocked(m.id)
	}
	g.armStreamsSessionLocked(m)
	if bump {
		g.syncStreamsViewLocked() // members or topology changed
	}
	if req.ShutdownApplication && sg.shutdownBy == "" {
		sg.shutdownBy = m.id
	}

	r := streamsResult{memberID: m.id, epoch: m.epoch, lag: g.c.streamsRecoveryLag(g.id)}
	changed := !beforeActive.equal(ownedSet(m.assigned)) || !beforeStandby.equal(m.standby) || !beforeWarmup.equal(m.warmup)
	if req.MemberEpoch == joinEpoch || m.epoch != beforeEpoch || changed {
		r.active, r.standby, r.warmup = ownedSet(m.assigned), m.standby.clone(), m.warmup.clone()
	}
	if m.endpoint != nil && (req.MemberEpoch == joinEpoch || changed) {
		sg.endpointEpoch++ // the IQ map changed
	}
	r.endpointEp = sg.endpointEpoch
	if req.EndpointInformationEpoch != sg.endpointEpoch {
		r.endpoints = g.endpointPartitionsLocked()
	}
	if ct := sg.configured; ct.detail != "" {
		st := kmsg.NewStreamsGroupHeartbeatResponseStatus()
		st.StatusCode, st.StatusDetail = ct.status, ct.detail
		status = append(status, st)
		r.create = ct.create
	}
	if sg.shutdownBy != "" {
		st := kmsg.NewStreamsGroupHeartbeatResponseStatus()
		st.StatusCode = statusShutdownApplication
		st.StatusDetail = fmt.Sprintf("Streams group member %s encountered a fatal error and requested a shutdown for the entire application.", sg.shutdownBy)
		status = append(status, st)
	}
	if missing := m.missingTags(g.c.streamsRackTags(g.id)); req.Version >= 1 && len(missing) > 0 {
		st := kmsg.NewStreamsGroupHeartbeatResponseStatus()
		st.StatusCode = statusMissingClientTags
		st.StatusDetail = fmt.Sprintf("Missing required client tags for rack-aware standby assignment: [%s]. Configure them via 'client.tag.<tagKey>' in your Streams config.", strings.Join(missing, ", "))
		status = append(status, st)
	}
	r.status = status
	return r
}

// updateMetadata applies the request's non-null member fields and reports
// whether one the assignor sees changed (assignor: a new process, endpoint,
// rack or tags) or only another field of the member's record (metadata: its
// rebalance timeout or topology epoch).
func (m *stmember) updateMetadata(req *kmsg.StreamsGroupHeartbeatRequest) (assignor, metadata bool) {
	if timeout := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond; timeout > 0 && timeout != m.rebalanceTimeout {
		m.rebalanceTimeout, metadata = timeout, true
	}
	if req.Topology != nil && req.Topology.Epoch != m.topologyEpoch {
		m.topologyEpoch, metadata = req.Topology.Epoch, true
	}
	if req.ProcessID != nil && *req.ProcessID != m.processID {
		m.processID, assignor = *req.ProcessID, true
	}
	if req.RackID != nil && *req.RackID != m.rackID {
		m.rackID, assignor = *req.RackID, true
	}
	if req.UserEndpoint != nil && (m.endpoint == nil || m.endpoint.Host != req.UserEndpoint.Host || m.endpoint.Port != req.UserEndpoint.Port) {
		e := *req.UserEndpoint
		m.endpoint, assignor = &e, true
	}
	if req.ClientTags != nil && !slices.EqualFunc(req.ClientTags, m.clientTags, func(a, b kmsg.StreamsGroupHeartbeatRequestClientTag) bool {
		return a.Key == b.Key && a.Value == b.Value
	}) {
		m.clientTags, assignor = slices.Clone(req.ClientTags), true
	}
	return assignor, metadata
}

// updateTaskOffsets keeps the task offsets a heartbeat reports (null: no
// change) and reports whether it carried any.
func (m *stmember) updateTaskOffsets(req *kmsg.StreamsGroupHeartbeatRequest) bool {
	toMap := func(ts []kmsg.TaskOffset) map[topicPartition]int64 {
		out := make(map[topicPartition]int64, len(ts))
		for _, t := range ts {
			out[topicPartition{t.SubtopologyID, t.Partition}] = t.Offset
		}
		return out
	}
	if req.TaskOffsets != nil {
		m.taskOffsets = toMap(req.TaskOffsets)
	}
	if req.TaskEndOffsets != nil {
		m.taskEndOffsets = toMap(req.TaskEndOffsets)
	}
	return req.TaskOffsets != nil || req.TaskEndOffsets != nil
}

// checkStreamsEpochLocked is the fencing rule of KIP-848 for streams members:
// the request's epoch must be the member's, or its previous one when the member
// only lost the response that moved it on (it owns nothing beyond its tasks).
func (g *group) checkStreamsEpochLocked(m *stmember, req *kmsg.StreamsGroupHeartbeatRequest) (int16, string) {
	fenced := func() (int16, string) {
		side := "greater"
		if req.MemberEpoch < m.epoch {
			side = "smaller"
		}
		return kerr.FencedMemberEpoch.Code, fmt.Sprintf("The streams group member has a %s member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", side, req.MemberEpoch, m.epoch)
	}
	switch {
	case req.MemberEpoch == m.epoch:
		return 0, ""
	case req.MemberEpoch > m.epoch, req.MemberEpoch != m.prevEpoch, req.ActiveTasks == nil:
		return fenced()
	}
	for tp := range ownedActive(req.ActiveTasks) {
		if _, ok := m.assigned[tp]; !ok {
			return fenced()
		}
	}
	return 0, ""
}

// ownedActive maps a request's active tasks to a set; nil when it did not say.
func ownedActive(tasks []kmsg.TaskIDs) partSet {
	if tasks == nil {
		return nil
	}
	out := partSet{}
	for _, t := range tasks {
		for _, p := range t.Partitions {
			out[topicPartition{t.SubtopologyID, p}] = struct{}{}
		}
	}
	return out
}

// topologyTopicsChangedLocked reports whether a topic of the topology
// appeared, went, was recreated or grew since the topology was last
// configured. Only a new catalog version can tell so: the topology changes
// only with an epoch bump, which configures it again.
func (g *group) topologyTopicsChangedLocked() bool {
	return g.st.topicsCheck.changed(g.topicsLocked(), g.st.topics, g.topologyMetadataLocked)
}

// topologyMetadataLocked describes every topic of the group's topology that exists.
func (g *group) topologyMetadataLocked() map[string]topicMeta {
	cat := g.topicsLocked()
	out := map[string]topicMeta{}
	for _, t := range topologyTopics(g.st.topology) {
		if id, n, ok := cat.Topic(t); ok {
			out[t] = topicMeta{id: id, partitions: n}
		}
	}
	return out
}

// bumpStreamsEpochLocked starts a new group epoch and computes its target
// assignment (every task of a configured topology to one member, balanced over
// processes and sticky; nothing while the topology is not ready), then refines
// it with warm-up tasks.
func (g *group) bumpStreamsEpochLocked() {
	sg := g.st
	sg.epoch++
	g.touchGroupLocked()
	spec := streamsAssignSpec{tasks: map[string]int32{}, stateful: sg.statefulSubtopologies(),
		standbys: g.c.streamsStandbys(g.id), rackTags: g.c.streamsRackTags(g.id)}
	if sg.configured.ready() {
		maps.Copy(spec.tasks, sg.configured.tasks)
	}
	for _, m := range sortedByID(sg.members) {
		standby := sg.standbyTarget[m.id].clone()
		maps.Copy(standby, m.standby)
		maps.Copy(standby, m.warmup)
		spec.members = append(spec.members, streamsAssignMember{id: m.id, process: m.process(), tags: m.tagMap(),
			active: sg.target[m.id], standby: standby, offsets: m.taskOffsets})
	}
	target, standbyTarget := assignStreamsTasks(spec)
	g.touchTargetsLocked(sg.target, target)
	g.touchTargetsLocked(sg.standbyTarget, standbyTarget)
	sg.target, sg.standbyTarget = target, standbyTarget
	sg.targetEpoch, sg.targetTime = sg.epoch, g.c.now()
	g.refineStreamsLocked()
	g.c.log.Info("streams group target assignment", "group", g.id, "epoch", sg.epoch, "members", len(sg.members),
		"ready", sg.configured.ready(), "pending_warmups", sg.refined.pending)
}

// refineStreamsLocked derives the assignment members reconcile towards from the
// target (streams_warmup.go).
func (g *group) refineStreamsLocked() {
	sg := g.st
	sg.refined = refineStreamsTarget(g.refineSpecLocked())
}

func (g *group) refineSpecLocked() streamsRefineSpec {
	sg := g.st
	return streamsRefineSpec{members: sg.refineMembers(), active: sg.target, standby: sg.standbyTarget,
		owners: sg.owners, stateful: sg.statefulSubtopologies(),
		warmups: g.c.streamsWarmups(g.id), recoveryLag: g.c.streamsRecoveryLag(g.id)}
}

// warmupCaughtUpLocked reports whether a task waiting for its new process has
// caught up there (or moves for another reason): the refined assignment would
// change.
func (g *group) warmupCaughtUpLocked() bool {
	sg := g.st
	if sg.refined.pending == 0 || !sg.configured.ready() {
		return false
	}
	r := refineStreamsTarget(g.refineSpecLocked())
	for id, ts := range r.active {
		if !ts.equal(sg.refined.active[id]) {
			return true
		}
	}
	return false
}

// statefulSubtopologies reports which subtopologies keep state (have changelog
// topics).
func (sg *streamsGroup) statefulSubtopologies() map[string]bool {
	out := map[string]bool{}
	if sg.topology == nil {
		return out
	}
	for _, s := range sg.topology.Subtopologies {
		out[s.SubtopologyID] = len(s.StateChangelogTopics) > 0
	}
	return out
}

// process is the process a member runs in; a member without a process id is
// a process of its own.
func (m *stmember) process() string {
	if m.processID == "" {
		return "member:" + m.id
	}
	return m.processID
}

// missingTags lists the keys of tags the member has no client tag for.
func (m *stmember) missingTags(tags []string) []string {
	var out []string
	have := m.tagMap()
	for _, k := range tags {
		if _, ok := have[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// tagMap is the member's client tags by key.
func (m *stmember) tagMap() map[string]string {
	out := make(map[string]string, len(m.clientTags))
	for _, t := range m.clientTags {
		out[t.Key] = t.Value
	}
	return out
}

// updateStandbysLocked gives m its standby and warm-up tasks once it is at the
// target epoch, except those another member of its process still holds
// (active, standby or warm-up: they share the process's state directory);
// before that it only drops the ones it is not to keep. It reports whether
// they changed.
func (g *group) updateStandbysLocked(m *stmember) bool {
	sg := g.st
	standbyTarget := sg.refined.standby[m.id]
	// A warm-up task that caught up stays until the member owns it as active,
	// so that its state is kept (Kafka Streams turns it into the active task).
	warmupTarget := sg.refined.warmup[m.id].clone()
	for tp := range m.warmup {
		if _, owned := m.assigned[tp]; sg.refined.active[m.id].has(tp) && !owned {
			warmupTarget[tp] = struct{}{}
		}
	}
	taking := m.epoch == sg.targetEpoch
	var held partSet // what the other members of m's process hold, if m has tasks to take
	if taking && (!covers(m.standby, standbyTarget) || !covers(m.warmup, warmupTarget)) {
		held = g.processHoldsLocked(m)
	}
	update := func(now, target partSet) partSet {
		next := partSet{}
		for tp := range now {
			if target.has(tp) {
				next[tp] = struct{}{}
			}
		}
		if taking {
			for tp := range target {
				if !held.has(tp) {
					next[tp] = struct{}{}
				}
			}
		}
		return next
	}
	standby, warmup := update(m.standby, standbyTarget), update(m.warmup, warmupTarget)
	changed := !standby.equal(m.standby) || !warmup.equal(m.warmup)
	m.standby, m.warmup = standby, warmup
	return changed
}

// covers reports whether have holds every task of want.
func covers(have, want partSet) bool {
	for tp := range want {
		if !have.has(tp) {
			return false
		}
	}
	return true
}

// processHoldsLocked is what the members of m's process other than m hold:
// their active, revoking, standby and warm-up tasks.
func (g *group) processHoldsLocked(m *stmember) partSet {
	held := partSet{}
	for _, o := range g.st.members {
		if o != m && o.process() == m.process() {
			maps.Copy(held, ownedSet(o.assigned))
			maps.Copy(held, o.revoking)
			maps.Copy(held, o.standby)
			maps.Copy(held, o.warmup)
		}
	}
	return held
}

// reconcileStreamsLocked moves m towards its target given the active tasks its
// heartbeat says it owns (nil: it did not say), and reports whether m's
// epochs, state or tasks changed.
func (g *group) reconcileStreamsLocked(m *stmember, owned partSet) bool {
	sg := g.st
	moved := recon{
		id: m.id, epoch: &m.epoch, prevEpoch: &m.prevEpoch, state: &m.state,
		assigned: m.assigned, revoking: &m.revoking, owners: sg.owners,
		targetEpoch: sg.targetEpoch, target: sg.refined.active[m.id],
		armRevoke:  func() { g.armStreamsRevokeTimerLocked(m) },
		stopRevoke: func() { g.stopStreamsRevokeTimerLocked(m) },
	}.reconcile(owned)
	return g.updateStandbysLocked(m) || moved
}

// removeStreamsMemberLocked drops a member (left, expired, fenced): its tasks
// are free again and the group rebalances.
func (g *group) removeStreamsMemberLocked(m *stmember) {
	sg := g.st
	g.stopStreamsMemberTimersLocked(m)
	releaseOwned(sg.owners, m.id, m.revoking)
	releaseOwned(sg.owners, m.id, ownedSet(m.assigned))
	delete(sg.members, m.id)
	delete(sg.target, m.id)
	delete(sg.standbyTarget, m.id)
	g.touchMemberLocked(m.id)
	if m.instanceID != "" && sg.static[m.instanceID] == m.id {
		delete(sg.static, m.instanceID)
	}
	if sg.shutdownBy == m.id {
		sg.shutdownBy = ""
	}
	if len(sg.members) == 0 {
		sg.shutdownBy = ""
	}
	g.bumpStreamsEpochLocked()
	g.syncStreamsViewLocked()
}

// endpointPartitionsLocked is the Interactive Queries map: for each member with a
// user endpoint, the partitions of the source topics of its active tasks.
func (g *group) endpointPartitionsLocked() []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint {
	sg := g.st
	out := []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint{}
	if sg.topology == nil {
		return out
	}
	sources := map[string][]string{}
	for _, s := range sg.topology.Subtopologies {
		ts := slices.Clone(s.SourceTopics)
		for _, ti := range s.RepartitionSourceTopics {
			ts = append(ts, ti.Topic)
		}
		slices.Sort(ts)
		sources[s.SubtopologyID] = ts
	}
	for _, m := range sortedByID(sg.members) {
		if m.endpoint == nil {
			continue
		}
		e := kmsg.NewStreamsGroupHeartbeatResponsePartitionsByUserEndpoint()
		e.UserEndpoint.Host, e.UserEndpoint.Port = m.endpoint.Host, m.endpoint.Port
		for t, ps := range taskPartitions(ownedSet(m.assigned), sources) {
			e.ActivePartitions = append(e.ActivePartitions, kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointActivePartition{Topic: t, Partitions: ps})
		}
		for t, ps := range taskPartitions(m.standby, sources) {
			e.StandbyPartitions = append(e.StandbyPartitions, kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointStandbyPartition{Topic: t, Partitions: ps})
		}
		if e.ActivePartitions == nil {
			e.ActivePartitions = []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointActivePartition{}
		}
		if e.StandbyPartitions == nil {
			e.StandbyPartitions = []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointStandbyPartition{}
		}
		out = append(out, e)
	}
	return out
}

// taskPartitions maps tasks to the partitions of their subtopologies' source
// topics (sources), topic by topic in order, partitions sorted.
func taskPartitions(tasks partSet, sources map[string][]string) iter.Seq2[string, []int32] {
	byTopic := map[string][]int32{}
	for _, tp := range tasks.sorted() {
		for _, t := range sources[tp.topic] {
			byTopic[t] = append(byTopic[t], tp.partition)
		}
	}
	return func(yield func(string, []int32) bool) {
		for _, t := range slices.Sorted(maps.Keys(byTopic)) {
			ps := byTopic[t]
			slices.Sort(ps)
			if !yield(t, slices.Compact(ps)) {
				return
			}
		}
	}
}

// syncStreamsViewLocked keeps the classic side in step: Empty or Stable, and the
// source topics as the subscription.
func (g *group) syncStreamsViewLocked() {
	g.syncMemberViewLocked(len(g.st.members), func(add func(topic string)) {
		if g.st.topology == nil {
			return
		}
		for _, s := range g.st.topology.Subtopologies {
			for _, t := range s.SourceTopics {
				add(t)
			}
			for _, ti := range s.RepartitionSourceTopics {
				add(ti.Topic)
			}
		}
	})
}

// armStreamsSessionLocked restarts m's session timeout; when it runs out the
// member is removed.
func (g *group) armStreamsSessionLocked(m *stmember) {
	if m.sessionTimer != nil {
		m.sessionTimer.Stop()
	}
	m.sessionToken++
	tok := m.sessionToken
	session, _ := g.c.streamsTimeouts(g.id)
	m.sessionTimer = g.afterFunc(session, func() {
		if m.sessionToken == tok && g.st != nil && g.st.members[m.id] == m && g.state != stateDead {
			g.c.log.Info("streams group member session expired", "group", g.id, "member", m.id)
			g.removeStreamsMemberLocked(m)
			g.persistRecordsLocked(nil)
		}
	})
}

// armStreamsRevokeTimerLocked gives m its rebalance timeout to revoke; a member
// still revoking then is removed from the group.
func (g *group) armStreamsRevokeTimerLocked(m *stmember) {
	g.stopStreamsRevokeTimerLocked(m)
	tok := m.revokeToken
	d := m.rebalanceTimeout
	if d <= 0 {
		d, _ = g.c.streamsTimeouts(g.id)
	}
	m.revokeTimer = g.afterFunc(d, func() {
		if m.revokeToken == tok && g.st != nil && g.st.members[m.id] == m && m.state == memberUnrevoked && g.state != stateDead {
			g.c.log.Info("streams group member did not revoke in its rebalance timeout", "group", g.id, "member", m.id)
			g.removeStreamsMemberLocked(m)
			g.persistRecordsLocked(nil)
		}
	})
}

func (g *group) stopStreamsRevokeTimerLocked(m *stmember) {
	if m.revokeTimer != nil {
		m.revokeTimer.Stop()
		m.revokeTimer = nil
	}
	m.revokeToken++
}

func (g *group) stopStreamsMemberTimersLocked(m *stmember) {
	if m.sessionTimer != nil {
		m.sessionTimer.Stop()
	}
	m.sessionToken++
	g.stopStreamsRevokeTimerLocked(m)
}

// stopStreamsTimersLocked stops the timers of every streams member (unload,
// deletion).
func (g *group) stopStreamsTimersLocked() {
	if g.st == nil {
		return
	}
	for _, m := range g.st.members {
		g.stopStreamsMemberTimersLocked(m)
	}
}

// validateStreamsCommitLocked is OffsetCommit's check for a streams group, as
// Kafka's StreamsGroup: epoch -1 while the group is empty (whatever member id it
// names), else the member's current epoch.
func (g *group) validateStreamsCommitLocked(req *kmsg.OffsetCommitRequest) int16 {
	sg := g.st
	if req.Generation < 0 && len(sg.members) == 0 {
		return 0
	}
	m := sg.members[req.MemberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case req.Version < 9:
		return kerr.UnsupportedVersion.Code
	case req.Generation != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}
