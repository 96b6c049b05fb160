package group

import (
	"bytes"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// state is a classic group's state, named as Kafka names it.
type state int8

const (
	stateEmpty               state = iota // no members; may still hold offsets
	statePreparingRebalance               // waiting for members to (re)join
	stateCompletingRebalance              // joined; waiting for the leader's assignment
	stateStable                           // assignment distributed
	stateDead                             // unloaded, deleted, or being deleted
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s state) String() string { return stateNames[s] }

const (
	// consumerProtocolType is the protocol type of Kafka consumers; only its member
	// metadata is parsed (for subscribed topics).
	consumerProtocolType = "consumer"
	// newMemberJoinTimeout bounds how long a member that has never completed a join
	// may wait in a rebalance (Kafka's NewMemberJoinTimeoutMs).
	newMemberJoinTimeout = 5 * time.Minute
)

// protocol is one assignment protocol a member supports, with its metadata.
type protocol struct {
	name     string
	metadata []byte
}

// joinResult is what a JoinGroup waiter receives.
type joinResult struct {
	code           int16
	memberID       string
	generation     int32
	protocolType   *string
	protocol       *string
	leader         string
	skipAssignment bool
	members        []kmsg.JoinGroupResponseMember
}

func joinError(code int16, memberID string) joinResult {
	return joinResult{code: code, memberID: memberID, generation: -1}
}

// syncResult is what a SyncGroup waiter receives.
type syncResult struct {
	code         int16
	assignment   []byte
	protocolType *string
	protocol     *string
}

// member is one joined member of a group.
type member struct {
	id               string
	instanceID       string // "" for a dynamic member
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocols        []protocol
	assignment       []byte
	seq              uint64 // join order: leader choice and listing order
	isNew            bool   // has not completed a join yet

	join chan joinResult // non-nil while a JoinGroup waits (the member "awaits join")
	sync chan syncResult // non-nil while a SyncGroup waits

	sessionTimer *time.Timer
	sessionToken uint64 // bumped on every re-arm so a stale timer does nothing
}

// metadataFor returns the member's metadata for protocol name.
func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// matches reports whether the member's protocols equal ps, names and metadata, in order.
func (m *member) matches(ps []protocol) bool {
	return slices.EqualFunc(m.protocols, ps, func(a, b protocol) bool {
		return a.name == b.name && bytes.Equal(a.metadata, b.metadata)
	})
}

// pendingMember is a member id handed out with MEMBER_ID_REQUIRED that has not joined
// with it yet (KIP-394). It expires after the session timeout it asked for.
type pendingMember struct {
	timer *time.Timer
}

// write is a batch of records queued for the group's writer, in log order.
type write struct {
	records []Record
	// txn, when set, is the producer whose transaction the records are
	// appended in, in a batch of their own (TxnOffsetStore.AppendTxn).
	txn *producer
	// modern, when set, is the write of consumer, streams or share records
	// it is (revert.go).
	modern *unappendedWrite
	// done runs with g.mu held once the append returned, with the log
	// offset of the write's first record.
	done func(first int64, err error)
}

// producer names a transactional producer: its id and epoch.
type producer struct {
	id    int64
	epoch int16
}

// group is one classic group and its committed offsets. Everything is guarded by mu;
// methods named xLocked need it held and never do I/O (see flush).
type group struct {
	id string
	c  *Coordinator
	p  *partition

	mu           sync.Mutex
	state        state
	stateTime    time.Time // when the state was entered; zero if unknown (old records)
	generation   int32
	protocolType string // "" until a member joins: an offsets-only group
	protocol     string // selected protocol of the current generation
	leader       string
	members      map[string]*member
	static       map[string]string // instance id -> member id
	pending      map[string]*pendingMember
	nextSeq      uint64
	subscribed   map[string]struct{} // topics of the current generation (consumer protocol)
	subsKnown    bool                // subscribed is exact; false means "assume every topic"
	unloaded     bool                // the partition was unloaded: the group is gone for good
	fresh        bool                // made by a request; no write of it appended yet (dropFreshLocked)
	cg           *consumerGroup      // the KIP-848 side; nil for a classic group (consumer.go)
	sg           *shareGroup         // the KIP-932 side; nil unless a share group (share.go)
	st           *streamsGroup       // the KIP-1071 side; nil unless a streams group (streams.go)
	// written is what __consumer_offsets holds of the group's consumer,
	// streams or share records once the writes queued are appended (key ->
	// value; unknownValue when an append failed and could not be reverted),
	// see modern_records.go and revert.go.
	written map[string][]byte
	// changes is what may have changed in the consumer, streams or share state
	// since written was last brought in line with it.
	changes recordChanges
	// lookups is what the topic catalog said of the topics of the consumer or
	// share assignments in the records written since the whole group was last
	// compared with the log (assignmentByIDLocked).
	lookups map[string]topicLookup
	// lookupsVersion is the catalog's TopicNamesVersion at which lookups
	// was last found to hold (catalogChangedLocked).
	lookupsVersion uint64
	// unappended are the writes of consumer, streams or share records queued
	// and not yet appended, in queue order; beforeModern, when set, is what
	// the group was before it became a consumer, streams or share group in
	// one of them (revert.go).
	unappended   []*unappendedWrite
	beforeModern *classicView

	// Rebalance delay and timeouts (Kafka's InitialDelayedJoin / DelayedJoin).
	initialDelay     bool          // the first-rebalance delay of an Empty group is running
	initialRemaining time.Duration // how much the initial delay may still be extended
	newMemberAdded   bool          // a member joined during the initial delay
	rebalanceTimer   *time.Timer
	rebalanceToken   uint64

	// Members that completed the join but have not sent SyncGroup yet.
	pendingSync map[string]struct{}
	syncTimer   *time.Timer
	syncToken   uint64

	offsets        map[topicPartition]offsetCommit
	pendingCommits map[topicPartition]int // commits (transactional too) queued but not yet appended

	writeQ  []write
	writing bool // a goroutine is appending writeQ (see Coordinator.flush)
}

func newGroup(c *Coordinator, p *partition, id string) *group {
	return &group{
		id:             id,
		c:              c,
		p:              p,
		state:          stateEmpty,
		stateTime:      c.now(),
		members:        make(map[string]*member),
		static:         make(map[string]string),
		pending:        make(map[string]*pendingMember),
		pendingSync:    make(map[string]struct{}),
		offsets:        make(map[topicPartition]offsetCommit),
		pendingCommits: make(map[topicPartition]int),
	}
}

// withLock runs f with g.mu held and releases it on every path, a panic in f
// included: the broker recovers a request's panic, and a group left locked
// would hang every later request to it.
func (g *group) withLock(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f()
}

// afterFunc is Coordinator.afterFunc for a timer of g: fLocked runs with g.mu
// held (see withLock), then the writes it queued are flushed. (One closure
// rather than Coordinator.afterFunc's around another: timers are re-armed by
// every heartbeat.)
func (g *group) afterFunc(d time.Duration, fLocked func()) *time.Timer {
	return time.AfterFunc(d, func() {
		if !g.c.enter() {
			return
		}
		defer g.c.background.Done()
		g.withLock(fLocked)
		g.c.flush(g)
	})
}

func (g *group) transitionLocked(s state) {
	g.state = s
	g.stateTime = g.c.now()
}

// sortedMembersLocked returns the members in join order.
func (g *group) sortedMembersLocked() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return cmpUint64(a.seq, b.seq) })
	return ms
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// rebalanceTimeoutLocked is the longest rebalance timeout of any member.
func (g *group) rebalanceTimeoutLocked() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// supportsProtocolsLocked reports whether a member of this protocol type with these
// protocols may join: anything non-empty joins a group without members; otherwise the
// type must match and one protocol must be supported by every current member.
func (g *group) supportsProtocolsLocked(protocolType string, ps []protocol) bool {
	if len(g.members) == 0 {
		return protocolType != "" && len(ps) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range ps {
		all := true
		for _, m := range g.members {
			if !hasProtocol(m.protocols, p.name) {
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

func hasProtocol(ps []protocol, name string) bool {
	return slices.ContainsFunc(ps, func(p protocol) bool { return p.name == name })
}

// selectProtocol picks the group protocol as Kafka does: among the protocols every
// member supports, each member votes for the first one in its own preference order,
// and the most votes win. Kafka leaves ties to hash order; here the protocol voted for
// by the earliest-joined member wins a tie. members must be in join order; it returns
// "" when no protocol is common to all.
func selectProtocol(members []*member) string {
	if len(members) == 0 {
		return ""
	}
	common := func(name string) bool {
		for _, m := range members {
			if !hasProtocol(m.protocols, name) {
				return false
			}
		}
		return true
	}
	votes := make(map[string]int)
	var order []string // protocols in order of their first vote
	for _, m := range members {
		for _, p := range m.protocols {
			if common(p.name) {
				if votes[p.name] == 0 {
					order = append(order, p.name)
				}
				votes[p.name]++
				break
			}
		}
	}
	best := ""
	for _, name := range order {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// computeSubscribedLocked records the topics the members of the current generation
// consume, parsed from consumer-protocol metadata. When that is impossible (another
// protocol type, or metadata that does not parse) every topic counts as subscribed.
func (g *group) computeSubscribedLocked() {
	g.subscribed, g.subsKnown = nil, false
	if g.protocolType != consumerProtocolType || g.protocol == "" {
		return
	}
	subs := make(map[string]struct{})
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return
		}
		for _, t := range meta.Topics {
			subs[t] = struct{}{}
		}
	}
	g.subscribed, g.subsKnown = subs, true
}

// isSubscribedLocked reports whether a member may be consuming topic.
func (g *group) isSubscribedLocked(topic string) bool {
	if !g.subsKnown {
		return true
	}
	_, ok := g.subscribed[topic]
	return ok
}

// validateMemberLocked checks that memberID is a member and, for a static member, that
// the instance id still maps to it (Kafka's validateCurrentMember).
func (g *group) validateMemberLocked(memberID, instanceID string) int16 {
	if instanceID != "" {
		cur, ok := g.static[instanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID.Code
		case cur != memberID:
			return kerr.FencedInstanceID.Code
		}
	}
	if _, ok := g.members[memberID]; !ok {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// replyJoinLocked answers a member's waiting JoinGroup, if any.
func (g *group) replyJoinLocked(m *member, r joinResult) {
	if m.join != nil {
		m.join <- r
		m.join = nil
	}
}

// parkJoinLocked makes w the member's waiting JoinGroup. A join it replaces (the same
// member joining twice at once) is answered REBALANCE_IN_PROGRESS so it does not hang.
func (g *group) parkJoinLocked(m *member, w chan joinResult) {
	g.replyJoinLocked(m, joinError(kerr.RebalanceInProgress.Code, m.id))
	m.join = w
}

func (g *group) replySyncLocked(m *member, r syncResult) {
	if m.sync != nil {
		m.sync <- r
		m.sync = nil
	}
}

// propagateSyncLocked answers a waiting SyncGroup with the rebalance's outcome and
// restarts the member's session: its timer was not counting while it waited.
func (g *group) propagateSyncLocked(m *member, r syncResult) {
	if m.sync != nil {
		g.replySyncLocked(m, r)
		g.touchLocked(m)
	}
}

func (g *group) parkSyncLocked(m *member, w chan syncResult) {
	g.replySyncLocked(m, syncResult{code: kerr.RebalanceInProgress.Code})
	m.sync = w
}

// allJoinedLocked reports whether every member awaits join and no member id handed
// out with MEMBER_ID_REQUIRED is outstanding.
func (g *group) allJoinedLocked() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.join == nil {
			return false
		}
	}
	return true
}

// successJoinLocked is the JoinGroup answer for m in the current generation; only the
// leader gets the members and their metadata.
func (g *group) successJoinLocked(m *member) joinResult {
	r := joinResult{
		memberID:     m.id,
		generation:   g.generation,
		protocolType: ptr(g.protocolType),
		protocol:     ptr(g.protocol),
		leader:       g.leader,
	}
	if m.id == g.leader {
		r.members = g.joinMembersLocked()
	}
	return r
}

// joinMembersLocked is the member list a leader receives.
func (g *group) joinMembersLocked() []kmsg.JoinGroupResponseMember {
	ms := g.sortedMembersLocked()
	out := make([]kmsg.JoinGroupResponseMember, 0, len(ms))
	for _, m := range ms {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		jm.InstanceID = optional(m.instanceID)
		jm.ProtocolMetadata = m.metadataFor(g.protocol)
		out = append(out, jm)
	}
	return out
}

// metadataRecordLocked is the GroupMetadata record of the group's current generation.
// assign, when not nil, replaces the members' assignments (the leader's SyncGroup).
func (g *group) metadataRecordLocked(assign map[string][]byte) Record {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	v.Protocol = optional(g.protocol)
	v.Leader = optional(g.leader)
	v.CurrentStateTimestamp = g.stateTime.UnixMilli()
	for _, m := range g.sortedMembersLocked() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.id
		vm.InstanceID = optional(m.instanceID)
		vm.ClientID = m.clientID
		vm.ClientHost = m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		vm.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		vm.Subscription = m.metadataFor(g.protocol)
		vm.Assignment = m.assignment
		if assign != nil {
			vm.Assignment = assign[m.id]
		}
		if vm.Assignment == nil {
			vm.Assignment = []byte{}
		}
		if vm.Subscription == nil {
			vm.Subscription = []byte{}
		}
		v.Members = append(v.Members, vm)
	}
	return Record{Key: groupKey(g.id), Value: v.AppendTo(nil)}
}

// ptr returns a pointer to a copy of s.
func ptr(s string) *string { return &s }

// optional maps "" to nil, anything else to a pointer to it.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// deref maps nil to "".
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
