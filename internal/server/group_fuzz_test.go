package server

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// FuzzGroupSequences drives the group coordinator of a node over the Kafka
// wire with sequences of group operations, by both protocols and mixing
// them in one group (KIP-848's online migration): classic JoinGroup,
// SyncGroup, Heartbeat and LeaveGroup, ConsumerGroupHeartbeat joins,
// heartbeats and leaves, commits, fetches, OffsetDelete and DeleteGroups,
// with stale generations and epochs, static members, short rebalance
// timeouts and (rarely) classic sessions running out. Each input is a
// sequence of (operation, argument) byte pairs over two groups of four
// members of its own. After each step it wants:
//
//   - every request answered (JoinGroup and SyncGroup, which wait for the
//     rebalance, within the members' rebalance timeouts), no panic logged;
//   - what Kafka guarantees of fencing: no heartbeat accepted from a member
//     that left or from an epoch it was never given, no epoch going back, a
//     deleted group gone, a classic static member replaced by its
//     instance's KIP-848 member rather than refusing it as unreleased, and no
//     member LeaveGroup (which removes KIP-848 members too) calls unknown
//     still listed;
//   - no partition in two members' assignments as the coordinator describes
//     them (ConsumerGroupDescribe, and DescribeGroups of a Stable group), a
//     KIP-848 member's acknowledged assignment within what the coordinator
//     says it owns, and a classic member's assignment within what the leader
//     gave it for that generation;
//   - every offset committed (NONE) fetched as committed until overwritten or
//     deleted;
//   - no member listed that left, valid state names, and ListGroups agreeing
//     with the describe APIs on each group's type;
//   - /metrics gathering, and the console's and HTTP API's group pages
//     answering.
func FuzzGroupSequences(f *testing.F) {
	panics := &panicRecorder{}
	cfg := nodeConfig(f.TempDir())
	cfg.GroupInitialDelay, cfg.OffsetsTopicPartition = 0, 1
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg, slog.New(panics), vfs.Default)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { n.Close() })
	ids := createFuzzTopics(f, n.KafkaAddr())
	for _, seed := range groupSeqSeeds {
		f.Add(seed)
	}
	var inputs atomic.Int64
	f.Fuzz(func(t *testing.T, ops []byte) {
		r := &groupRun{t: t, n: n, panics: panics, ids: ids, async: make(chan func(), 16)}
		prefix := fmt.Sprintf("gs%d", inputs.Add(1))
		for gi := range r.groups {
			g := &fuzzGroup{id: fmt.Sprintf("%s-%d", prefix, gi), committed: map[tp]int64{}, unsure: map[tp]bool{},
				plans: map[int32]map[string]tpSet{}, left: map[string]bool{}}
			for mi := range g.members {
				m := &fuzzMember{kid: fmt.Sprintf("%s-%d-k%d", prefix, gi, mi)}
				if mi >= 2 {
					m.instance = fmt.Sprintf("%s-%d-i%d", prefix, gi, mi)
				}
				g.members[mi] = m
			}
			r.groups[gi] = g
		}
		for i := 0; i+1 < len(ops) && i < 2*maxGroupOps; i += 2 {
			r.step(ops[i], ops[i+1])
		}
		r.finish()
	})
}

// maxGroupOps bounds the steps of one input.
const maxGroupOps = 30

// The operations of FuzzGroupSequences, by op byte modulo opCount.
const (
	opJoin          = iota // classic JoinGroup (in the background)
	opSync                 // classic SyncGroup (in the background)
	opHeartbeat            // classic Heartbeat
	opLeave                // classic LeaveGroup
	opConsumerJoin         // ConsumerGroupHeartbeat at epoch 0
	opConsumerBeat         // ConsumerGroupHeartbeat at the member's epoch
	opConsumerLeave        // ConsumerGroupHeartbeat at epoch -1 or -2
	opCommit               // OffsetCommit as the classic or KIP-848 member, or simple
	opOffsetDelete         // OffsetDelete
	opDeleteGroup          // DeleteGroups
	opWait                 // answers of background requests, and time passing
	opCount
)

// groupSeqSeeds are meaningful sequences: pairs of an op (above) and an
// argument (arg). Arguments: bit 0 the group, bits 1-2 the member (2 and 3
// are static when asked), bits 3+ the op's variant.
var groupSeqSeeds = [][]byte{
	// Two classic members join, sync (the leader assigns), commit, leave.
	{opJoin, 0x00, opJoin, 0x02, opWait, 0x00, opJoin, 0x00, opJoin, 0x02, opWait, 0x00,
		opSync, 0x00, opSync, 0x02, opWait, 0x00, opCommit, 0x00, opHeartbeat, 0x02, opLeave, 0x00, opWait, 0x18},
	// KIP-848 members join and reconcile, then one leaves; a stale epoch.
	{opConsumerJoin, 0x00, opConsumerJoin, 0x02, opConsumerBeat, 0x00, opConsumerBeat, 0x02, opConsumerBeat, 0x00,
		opConsumerBeat, 0x0a, opCommit, 0x08, opConsumerLeave, 0x00, opConsumerBeat, 0x02, opDeleteGroup, 0x00},
	// A classic group upgraded by a KIP-848 member, then downgraded when it leaves.
	{opJoin, 0x04, opWait, 0x00, opJoin, 0x04, opWait, 0x00, opSync, 0x04, opWait, 0x00,
		opConsumerJoin, 0x00, opHeartbeat, 0x04, opJoin, 0x04, opWait, 0x00, opSync, 0x04, opWait, 0x00,
		opConsumerBeat, 0x00, opConsumerLeave, 0x00, opJoin, 0x04, opWait, 0x00, opSync, 0x04, opWait, 0x00},
	// Static members: classic and KIP-848, replaced, leaving for now.
	{opJoin, 0x16, opWait, 0x00, opSync, 0x06, opWait, 0x00, opJoin, 0x17, opConsumerJoin, 0x17,
		opConsumerLeave, 0x0f, opConsumerJoin, 0x0f, opWait, 0x00, opCommit, 0x07, opDeleteGroup, 0x01},
	// A simple commit, OffsetDelete, a member that never syncs (rebalance timeout).
	{opCommit, 0x10, opCommit, 0x12, opOffsetDelete, 0x00, opJoin, 0x00, opWait, 0x00, opJoin, 0x00, opWait, 0x18,
		opDeleteGroup, 0x00, opCommit, 0x10},
	// A classic member joins a KIP-848 group; a classic static member then
	// replaces the last KIP-848 member, which downgrades the group.
	{opConsumerJoin, 0x0c, opJoin, 0x00, opWait, 0x00, opJoin, 0x00, opWait, 0x00, opSync, 0x00, opWait, 0x00,
		opJoin, 0x1c, opWait, 0x00, opSync, 0x04, opSync, 0x00, opWait, 0x00, opHeartbeat, 0x00, opCommit, 0x04},
	// A classic static member's instance comes back speaking KIP-848 after the
	// group was upgraded: it replaces the classic member.
	{opJoin, 0x14, opWait, 0x00, opSync, 0x04, opWait, 0x00, opConsumerJoin, 0x00, opConsumerJoin, 0x0c,
		opConsumerBeat, 0x04, opCommit, 0x05},
	// An admin client removes the KIP-848 member of a group whose other member
	// is classic (joined at v3): the group is classic again.
	{opConsumerJoin, 0x00, opJoin + opCount, 0x02, opWait, 0x00, opLeave, 0x10, opConsumerBeat, 0x00,
		opJoin + opCount, 0x02, opWait, 0x00, opSync, 0x02, opWait, 0x00},
}

// Partitions of the topics FuzzGroupSequences creates.
var fuzzTopicPartitions = map[string]int32{"t0": 3, "t1": 2}

// createFuzzTopics creates the topics and returns their ids.
func createFuzzTopics(f *testing.F, addr string) map[string][16]byte {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		f.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := map[string][16]byte{}
	for name, parts := range fuzzTopicPartitions {
		resp, err := adm.CreateTopic(ctx, parts, 1, nil, name)
		if err != nil {
			f.Fatal(err)
		}
		ids[name] = resp.ID
	}
	// The coordinator answers once __consumer_offsets is loaded.
	wait.Eventually(f, wait.DefaultTimeout, "the group coordinator", func() error {
		_, err := adm.FetchOffsets(ctx, "ready")
		return err
	})
	return ids
}

// tp is a topic partition.
type tp struct {
	topic string
	p     int32
}

func (x tp) String() string { return fmt.Sprintf("%s-%d", x.topic, x.p) }

type tpSet map[tp]bool

// groupRun is one input's run: the node, the groups and what the test knows.
type groupRun struct {
	t      *testing.T
	n      *Node
	panics *panicRecorder
	ids    map[string][16]byte
	groups [2]*fuzzGroup
	// async receives the handling of each background request's answer, run
	// on the test's goroutine; pending counts those not yet received.
	async   chan func()
	pending int
	offset  int64
	steps   int
}

// fuzzGroup is what the test knows of one group.
type fuzzGroup struct {
	id        string
	members   [4]*fuzzMember
	committed map[tp]int64 // offsets committed (NONE) and not deleted since
	unsure    map[tp]bool  // commits whose outcome is unknown
	// plans are the assignments leaders sent, by generation and member.
	plans map[int32]map[string]tpSet
	// left are member ids that left successfully and were not used since.
	left map[string]bool
	// overlapped: a leader gave one partition to several members.
	overlapped bool
	// garbled: a leader gave a member bytes that are no assignment.
	garbled bool
}

// fuzzMember is one member of a group: a classic identity and a KIP-848 one.
type fuzzMember struct {
	instance string // "" for a dynamic member
	busy     int    // its JoinGroups and SyncGroups waiting in the background

	cid        string // classic member id
	generation int32
	protocol   string           // of its generation
	plan       map[string]tpSet // what it assigns as the leader of generation
	planGen    int32
	owned      tpSet // its classic assignment

	kid    string // KIP-848 member id
	epoch  int32
	kowned tpSet // its acknowledged KIP-848 assignment
	joined bool  // joined by ConsumerGroupHeartbeat and not left
}

// classicSession is the classic members' session timeout, the least a node
// accepts by default (group.min.session.timeout.ms).
const classicSession = 6 * time.Second

// requestTimeout bounds every answer; JoinGroup and SyncGroup wait at most
// for the members' rebalance timeouts (under a second here).
const requestTimeout = 15 * time.Second

func (r *groupRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("step %d: "+format, append([]any{r.steps}, args...)...)
}

// send sends req and returns its answer, failing without one.
func (r *groupRun) send(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	resp, err := roundTrip(r.n.KafkaAddr(), req, requestTimeout)
	if err != nil {
		r.fatalf("%s: no answer: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// sendAsync sends req in the background; handle runs on the test's
// goroutine with the answer.
func (r *groupRun) sendAsync(req kmsg.Request, handle func(kmsg.Response)) {
	r.pending++
	addr := r.n.KafkaAddr()
	go func() {
		resp, err := roundTrip(addr, req, requestTimeout)
		r.async <- func() {
			r.pending--
			if err != nil {
				r.fatalf("%s: no answer: %v", kmsg.NameForKey(req.Key()), err)
			}
			handle(resp)
		}
	}()
}

// drain handles the background answers that arrived; with all set it waits
// for every one.
func (r *groupRun) drain(all bool) {
	for r.pending > 0 {
		if all {
			(<-r.async)()
			continue
		}
		select {
		case h := <-r.async:
			h()
		default:
			return
		}
	}
}

func (r *groupRun) step(op, arg byte) {
	r.steps++
	g := r.groups[arg&1]
	m := g.members[arg>>1&3]
	v, x := arg>>3, op/opCount
	r.drain(false)
	switch op % opCount {
	case opJoin:
		r.join(g, m, v, x)
	case opSync:
		r.sync(g, m, v, x)
	case opHeartbeat:
		r.heartbeat(g, m, v)
	case opLeave:
		r.leave(g, m, v)
	case opConsumerJoin:
		r.consumerJoin(g, m, v)
	case opConsumerBeat:
		r.consumerBeat(g, m, v)
	case opConsumerLeave:
		r.consumerLeave(g, m, v)
	case opCommit:
		r.commit(g, m, v)
	case opOffsetDelete:
		r.offsetDelete(g, v)
	case opDeleteGroup:
		r.deleteGroup(g)
	case opWait:
		r.drain(true)
		pause := []time.Duration{0, 30 * time.Millisecond, 200 * time.Millisecond, 700 * time.Millisecond}[v&3]
		if v == 31 {
			pause = classicSession + 500*time.Millisecond // sessions of silent classic members run out
		}
		time.Sleep(pause)
		r.drain(false)
	}
	r.check()
}

// finish waits for the background requests and checks once more, then
// takes every member out and deletes the groups, so that the node does not
// gather the groups of every input.
func (r *groupRun) finish() {
	r.drain(true)
	r.check()
	for _, g := range r.groups {
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.SetVersion(5)
		leave.Group = g.id
		for _, m := range g.members {
			r.send(r.consumerRequest(g, m, leaveEpoch))
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID = m.cid
			if m.instance != "" {
				lm.MemberID, lm.InstanceID = "", kmsg.StringPtr(m.instance)
			}
			leave.Members = append(leave.Members, lm)
		}
		r.send(leave)
		del := kmsg.NewPtrDeleteGroupsRequest()
		del.Groups = []string{g.id}
		r.send(del)
	}
}

const leaveEpoch = -1

// rebalanceTimeout is a variant's rebalance timeout: short enough to run out
// within an input.
func rebalanceTimeout(v byte) int32 { return []int32{100, 300, 600}[int(v)%3] }

// subscription is a variant's classic subscription, with what m owns.
func (r *groupRun) subscription(m *fuzzMember, v byte) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = []string{"t0"}
	if v&1 != 0 {
		meta.Topics = append(meta.Topics, "t1")
	}
	for _, x := range sortedTPs(m.owned) {
		if n := len(meta.OwnedPartitions); n > 0 && meta.OwnedPartitions[n-1].Topic == x.topic {
			meta.OwnedPartitions[n-1].Partitions = append(meta.OwnedPartitions[n-1].Partitions, x.p)
			continue
		}
		meta.OwnedPartitions = append(meta.OwnedPartitions, kmsg.ConsumerMemberMetadataOwnedPartition{Topic: x.topic, Partitions: []int32{x.p}})
	}
	meta.Generation = m.generation
	return meta.AppendTo(nil)
}

// join: variant bit 0 joins without the member id, bit 1 as a static
// member (members 2 and 3), bit 2 subscribes to t1 too, bit 3 prefers the
// roundrobin protocol, bit 4 picks the rebalance timeout; extra bit 0 joins
// with v3 (no MEMBER_ID_REQUIRED, no static members), bit 1 even while an
// earlier join or sync of the member waits.
func (r *groupRun) join(g *fuzzGroup, m *fuzzMember, v, x byte) {
	if m.busy > 0 && x&2 == 0 {
		return
	}
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(9)
	if x&1 != 0 {
		req.SetVersion(3)
		v &^= 2
	}
	req.Group = g.id
	req.SessionTimeoutMillis = int32(classicSession.Milliseconds())
	req.RebalanceTimeoutMillis = rebalanceTimeout(v >> 4)
	if v&1 == 0 {
		req.MemberID = m.cid
	}
	if v&2 != 0 && m.instance != "" {
		req.InstanceID = kmsg.StringPtr(m.instance)
	}
	req.ProtocolType = "consumer"
	for _, name := range [][]string{{"range"}, {"roundrobin", "range"}}[v>>3&1] {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = name, r.subscription(m, v>>2)
		req.Protocols = append(req.Protocols, p)
	}
	delete(g.left, req.MemberID)
	m.busy++
	r.sendAsync(req, func(kr kmsg.Response) {
		m.busy--
		resp := kr.(*kmsg.JoinGroupResponse)
		switch resp.ErrorCode {
		case kerr.MemberIDRequired.Code:
			m.cid = resp.MemberID
		case 0:
			delete(g.left, resp.MemberID)
			m.cid, m.generation, m.protocol = resp.MemberID, resp.Generation, ""
			if resp.Protocol != nil {
				m.protocol = *resp.Protocol
			}
			m.plan = nil
			if resp.LeaderID == resp.MemberID && len(resp.Members) > 0 && !resp.SkipAssignment {
				m.plan, m.planGen = r.assign(resp.Members), resp.Generation
			}
		case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
			m.cid = ""
		}
	})
}

// assign is a leader's assignment: each subscribed topic's partitions in
// turn over the members subscribing to it.
func (r *groupRun) assign(members []kmsg.JoinGroupResponseMember) map[string]tpSet {
	plan := map[string]tpSet{}
	for _, jm := range members {
		plan[jm.MemberID] = tpSet{}
	}
	for _, topic := range slices.Sorted(maps.Keys(fuzzTopicPartitions)) {
		var subs []string
		for _, jm := range members {
			var meta kmsg.ConsumerMemberMetadata
			if meta.ReadFrom(jm.ProtocolMetadata) == nil && slices.Contains(meta.Topics, topic) {
				subs = append(subs, jm.MemberID)
			}
		}
		for p := range fuzzTopicPartitions[topic] {
			if len(subs) > 0 {
				plan[subs[int(p)%len(subs)]][tp{topic, p}] = true
			}
		}
	}
	return plan
}

// sync: variant bit 0 syncs with the previous generation, bit 1 sends no
// assignment even as the leader, bit 2 names the instance id, bit 3 assigns
// every partition, and one of a topic that does not exist, to every member
// (as a broken leader may); extra bit 0 sends bytes that are no assignment
// to one member.
func (r *groupRun) sync(g *fuzzGroup, m *fuzzMember, v, x byte) {
	if m.busy > 0 || m.cid == "" {
		return
	}
	req := kmsg.NewPtrSyncGroupRequest()
	req.SetVersion(5)
	req.Group, req.MemberID, req.Generation = g.id, m.cid, m.generation
	if v&1 != 0 {
		req.Generation--
	}
	if m.instance != "" && v&4 != 0 {
		req.InstanceID = kmsg.StringPtr(m.instance)
	}
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(m.protocol)
	if m.plan != nil && m.planGen == req.Generation && v&2 == 0 {
		plans := g.plans[req.Generation]
		if plans == nil {
			plans = map[string]tpSet{}
			g.plans[req.Generation] = plans
		}
		for id, set := range m.plan {
			if v&8 != 0 {
				g.overlapped = true
				set = tpSet{{"gone", 0}: true}
				for _, x := range r.partitions() {
					set[x] = true
				}
			}
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID, a.MemberAssignment = id, encodeClassicAssignment(set)
			if x&1 != 0 && id == m.cid {
				g.garbled = true
				a.MemberAssignment = []byte{0, 0, 0, 0, 0, 9}
			}
			req.GroupAssignment = append(req.GroupAssignment, a)
			if plans[id] == nil {
				plans[id] = tpSet{}
			}
			maps.Copy(plans[id], set)
		}
	}
	m.busy++
	gen, id := req.Generation, req.MemberID
	r.sendAsync(req, func(kr kmsg.Response) {
		m.busy--
		resp := kr.(*kmsg.SyncGroupResponse)
		switch resp.ErrorCode {
		case 0:
			owned, err := decodeClassicAssignment(resp.MemberAssignment)
			if err != nil && g.garbled {
				break
			}
			if err != nil {
				r.fatalf("SyncGroup of %s at generation %d: assignment %x: %v", id, gen, resp.MemberAssignment, err)
			}
			if plan, ok := g.plans[gen]; ok {
				for x := range owned {
					if !plan[id][x] {
						r.fatalf("SyncGroup of %s at generation %d gave %v, which its leader did not assign it (%v)", id, gen, x, plan[id])
					}
				}
			}
			if m.cid == id {
				m.owned = owned
			}
		case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
			if m.cid == id {
				m.cid, m.owned = "", nil
			}
		}
	})
}

func encodeClassicAssignment(set tpSet) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	for _, x := range sortedTPs(set) {
		if n := len(a.Topics); n > 0 && a.Topics[n-1].Topic == x.topic {
			a.Topics[n-1].Partitions = append(a.Topics[n-1].Partitions, x.p)
			continue
		}
		a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: x.topic, Partitions: []int32{x.p}})
	}
	return a.AppendTo(nil)
}

func decodeClassicAssignment(b []byte) (tpSet, error) {
	out := tpSet{}
	if len(b) == 0 {
		return out, nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return nil, err
	}
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			out[tp{t.Topic, p}] = true
		}
	}
	return out, nil
}

func sortedTPs(set tpSet) []tp {
	return slices.SortedFunc(maps.Keys(set), func(a, b tp) int {
		if a.topic != b.topic {
			return cmp.Compare(a.topic, b.topic)
		}
		return int(a.p - b.p)
	})
}

// heartbeat: variant bit 0 sends the previous generation, bit 1 the
// instance id.
func (r *groupRun) heartbeat(g *fuzzGroup, m *fuzzMember, v byte) {
	if m.cid == "" {
		return
	}
	req := kmsg.NewPtrHeartbeatRequest()
	req.SetVersion(4)
	req.Group, req.MemberID, req.Generation = g.id, m.cid, m.generation
	if v&1 != 0 {
		req.Generation--
	}
	if m.instance != "" && v&2 != 0 {
		req.InstanceID = kmsg.StringPtr(m.instance)
	}
	resp := r.send(req).(*kmsg.HeartbeatResponse)
	if resp.ErrorCode == kerr.UnknownMemberID.Code && m.busy == 0 {
		m.cid, m.owned = "", nil
	}
}

// leave: variant bit 0 names a static member by its instance id alone, bit
// 1 removes the KIP-848 member rather than the classic one, as an admin
// client does. A member it answers UNKNOWN_MEMBER_ID for is no member.
func (r *groupRun) leave(g *fuzzGroup, m *fuzzMember, v byte) {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.SetVersion(5)
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = m.cid
	if v&2 != 0 {
		lm.MemberID = m.kid
	}
	if v&1 != 0 && m.instance != "" {
		lm.MemberID, lm.InstanceID = "", kmsg.StringPtr(m.instance)
	}
	if lm.MemberID == "" && lm.InstanceID == nil {
		return
	}
	req.Group, req.Members = g.id, []kmsg.LeaveGroupRequestMember{lm}
	resp := r.send(req).(*kmsg.LeaveGroupResponse)
	if resp.ErrorCode != 0 || len(resp.Members) != 1 {
		r.fatalf("LeaveGroup: code %d, %d members", resp.ErrorCode, len(resp.Members))
	}
	code, id := resp.Members[0].ErrorCode, lm.MemberID
	switch {
	case id == "":
	case code == 0 && id == m.kid:
		g.left[id] = true
		m.joined, m.kowned = false, tpSet{}
	case code == 0:
		if m.busy == 0 {
			g.left[id] = true
		}
		m.cid, m.owned = "", nil
	case code == kerr.UnknownMemberID.Code && (id == m.kid || m.busy == 0):
		d := r.describeGroup(g.id)
		listed := d.classic != nil && slices.ContainsFunc(d.classic.Members, func(dm kmsg.DescribeGroupsResponseGroupMember) bool { return dm.MemberID == id })
		listed = listed || d.consumer != nil && slices.ContainsFunc(d.consumer.Members, func(dm kmsg.ConsumerGroupDescribeResponseGroupMember) bool { return dm.MemberID == id })
		if listed {
			r.fatalf("LeaveGroup of %s from group %s answered UNKNOWN_MEMBER_ID; the group lists it", id, g.id)
		}
	}
}

// consumerRequest is a ConsumerGroupHeartbeat of m at epoch, with what m
// owns.
func (r *groupRun) consumerRequest(g *fuzzGroup, m *fuzzMember, epoch int32) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.SetVersion(1)
	req.Group, req.MemberID, req.MemberEpoch = g.id, m.kid, epoch
	req.Topics = r.topicsOf(m.kowned)
	return req
}

func (r *groupRun) topicsOf(set tpSet) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, x := range sortedTPs(set) {
		if n := len(out); n > 0 && out[n-1].TopicID == r.ids[x.topic] {
			out[n-1].Partitions = append(out[n-1].Partitions, x.p)
			continue
		}
		t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		t.TopicID, t.Partitions = r.ids[x.topic], []int32{x.p}
		out = append(out, t)
	}
	return out
}

// consumerJoin: variant bit 0 joins as a static member (members 2 and 3),
// bit 1 subscribes to t1 too, bit 2 by a pattern, bits 3+ pick the
// rebalance timeout.
func (r *groupRun) consumerJoin(g *fuzzGroup, m *fuzzMember, v byte) {
	req := r.consumerRequest(g, m, 0)
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	req.RebalanceTimeoutMillis = rebalanceTimeout(v >> 3)
	if v&1 != 0 && m.instance != "" {
		req.InstanceID = kmsg.StringPtr(m.instance)
	}
	req.SubscribedTopicNames = []string{"t0"}
	if v&2 != 0 {
		req.SubscribedTopicNames = append(req.SubscribedTopicNames, "t1")
	}
	if v&4 != 0 {
		req.SubscribedTopicRegex = kmsg.StringPtr("t.*")
	}
	if v&16 != 0 {
		req.ServerAssignor = kmsg.StringPtr("range")
	}
	delete(g.left, m.kid)
	m.kowned = tpSet{}
	resp := r.send(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode == kerr.UnreleasedInstanceID.Code {
		r.checkUnreleased(g, *req.InstanceID)
	}
	r.consumerAnswer(g, m, resp)
}

// checkUnreleased wants the member holding instance, which a KIP-848 member
// could not take over, to be a KIP-848 member: a classic static member never
// leaves for now and is replaced at once (KAFKA-17228).
func (r *groupRun) checkUnreleased(g *fuzzGroup, instance string) {
	c := r.describeGroup(g.id).consumer
	if c == nil {
		return // no longer a consumer group
	}
	for _, dm := range c.Members {
		if deref(dm.InstanceID) == instance && dm.MemberType == 0 {
			r.fatalf("consumer group %s: instance %s of classic member %s not replaced by a KIP-848 member (UNRELEASED_INSTANCE_ID)", g.id, instance, dm.MemberID)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// consumerAnswer takes a ConsumerGroupHeartbeat's answer into m.
func (r *groupRun) consumerAnswer(g *fuzzGroup, m *fuzzMember, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	switch resp.ErrorCode {
	case 0:
		m.joined, m.epoch = true, resp.MemberEpoch
		if resp.Assignment != nil {
			m.kowned = tpSet{}
			for _, t := range resp.Assignment.Topics {
				name := r.topicName(t.TopicID)
				for _, p := range t.Partitions {
					m.kowned[tp{name, p}] = true
				}
			}
		}
	case kerr.UnknownMemberID.Code, kerr.FencedMemberEpoch.Code:
		m.joined, m.kowned = false, tpSet{}
	}
}

func (r *groupRun) topicName(id [16]byte) string {
	for name, tid := range r.ids {
		if tid == id {
			return name
		}
	}
	r.fatalf("unknown topic id %x", id)
	return ""
}

// consumerBeat: variant bit 0 sends the previous epoch, bit 1 a full
// request (subscription and rebalance timeout again), bit 2 says it owns
// nothing, bit 3 names the instance id, bit 4 sends the next epoch, which
// the member was never given. A member that left is no member any more.
func (r *groupRun) consumerBeat(g *fuzzGroup, m *fuzzMember, v byte) {
	if !m.joined {
		if g.left[m.kid] {
			resp := r.send(r.consumerRequest(g, m, max(m.epoch, 1))).(*kmsg.ConsumerGroupHeartbeatResponse)
			if resp.ErrorCode == 0 {
				r.fatalf("ConsumerGroupHeartbeat of %s, which left, answered epoch %d", m.kid, resp.MemberEpoch)
			}
		}
		return
	}
	req := r.consumerRequest(g, m, m.epoch)
	switch {
	case v&1 != 0:
		req.MemberEpoch--
	case v&16 != 0:
		req.MemberEpoch++
	}
	if v&2 != 0 {
		req.RebalanceTimeoutMillis = rebalanceTimeout(v >> 3)
		req.SubscribedTopicNames = []string{"t0", "t1"}
	}
	if v&4 != 0 {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		m.kowned = tpSet{}
	}
	if m.instance != "" && v&8 != 0 {
		req.InstanceID = kmsg.StringPtr(m.instance)
	}
	resp := r.send(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	switch {
	case resp.ErrorCode == 0 && req.MemberEpoch > m.epoch:
		r.fatalf("ConsumerGroupHeartbeat of %s at epoch %d, above its %d, answered epoch %d", m.kid, req.MemberEpoch, m.epoch, resp.MemberEpoch)
	case resp.ErrorCode == 0 && resp.MemberEpoch < m.epoch:
		r.fatalf("ConsumerGroupHeartbeat of %s at epoch %d moved it back to epoch %d", m.kid, m.epoch, resp.MemberEpoch)
	}
	r.consumerAnswer(g, m, resp)
}

// consumerLeave: variant bit 0 leaves for now (epoch -2) as a static member.
func (r *groupRun) consumerLeave(g *fuzzGroup, m *fuzzMember, v byte) {
	if !m.joined {
		return
	}
	req := r.consumerRequest(g, m, leaveEpoch)
	if v&1 != 0 && m.instance != "" {
		req.MemberEpoch, req.InstanceID = -2, kmsg.StringPtr(m.instance)
	}
	resp := r.send(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode == 0 && req.MemberEpoch == leaveEpoch {
		g.left[m.kid] = true
	}
	m.joined, m.kowned = false, tpSet{}
}

// commit: variant bits 0-1 commit as the classic member, the KIP-848 member
// or outside group management (simple), bit 2 with a stale generation or
// epoch, bits 3+ pick the partition.
func (r *groupRun) commit(g *fuzzGroup, m *fuzzMember, v byte) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(9)
	req.Group, req.Generation = g.id, -1
	switch v & 3 {
	case 0:
		req.MemberID, req.Generation = m.cid, m.generation
	case 1:
		req.MemberID, req.Generation = m.kid, m.epoch
	}
	if v&4 != 0 {
		req.Generation--
	}
	x := r.partition(v >> 3)
	r.offset++
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = x.topic
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset = x.p, r.offset
	t.Partitions = []kmsg.OffsetCommitRequestTopicPartition{p}
	req.Topics = []kmsg.OffsetCommitRequestTopic{t}
	resp := r.send(req).(*kmsg.OffsetCommitResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		r.fatalf("OffsetCommit: answer %+v", resp)
	}
	switch code := resp.Topics[0].Partitions[0].ErrorCode; code {
	case 0:
		g.committed[x], g.unsure[x] = r.offset, false
	case kerr.IllegalGeneration.Code, kerr.UnknownMemberID.Code, kerr.RebalanceInProgress.Code,
		kerr.StaleMemberEpoch.Code, kerr.FencedInstanceID.Code, kerr.CoordinatorNotAvailable.Code,
		kerr.GroupIDNotFound.Code:
		// Refused: nothing written.
	default:
		g.unsure[x] = true
	}
}

// partition is the variant's partition of t0 and t1.
func (r *groupRun) partition(v byte) tp {
	all := r.partitions()
	return all[int(v)%len(all)]
}

// partitions are the partitions of t0 and t1.
func (r *groupRun) partitions() []tp {
	return []tp{{"t0", 0}, {"t0", 1}, {"t0", 2}, {"t1", 0}, {"t1", 1}}
}

// offsetDelete deletes the committed offset of the variant's partition.
func (r *groupRun) offsetDelete(g *fuzzGroup, v byte) {
	x := r.partition(v)
	req := kmsg.NewPtrOffsetDeleteRequest()
	t := kmsg.NewOffsetDeleteRequestTopic()
	t.Topic = x.topic
	p := kmsg.NewOffsetDeleteRequestTopicPartition()
	p.Partition = x.p
	t.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{p}
	req.Group, req.Topics = g.id, []kmsg.OffsetDeleteRequestTopic{t}
	resp := r.send(req).(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode == 0 && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 &&
		resp.Topics[0].Partitions[0].ErrorCode == 0 {
		delete(g.committed, x)
	}
}

// deleteGroup deletes the group; when it is gone, so are its offsets.
func (r *groupRun) deleteGroup(g *fuzzGroup) {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.SetVersion(2)
	req.Groups = []string{g.id}
	resp := r.send(req).(*kmsg.DeleteGroupsResponse)
	if len(resp.Groups) != 1 {
		r.fatalf("DeleteGroups: answer %+v", resp)
	}
	switch resp.Groups[0].ErrorCode {
	case 0:
		clear(g.committed)
		if r.pending > 0 {
			break // a join under way may create the group again
		}
		if d := r.describeGroup(g.id); d.listed != "" || d.classic != nil || d.consumer != nil {
			r.fatalf("group %s deleted, then listed %q or described", g.id, d.listed)
		}
		// Nobody is a member any more.
		for _, m := range g.members {
			if m.cid != "" {
				g.left[m.cid] = true
			}
			if m.joined {
				g.left[m.kid] = true
			}
			m.cid, m.owned, m.joined, m.kowned = "", nil, false, tpSet{}
		}
	case kerr.NonEmptyGroup.Code, kerr.GroupIDNotFound.Code:
	default:
		for x := range g.committed {
			g.unsure[x] = true
		}
	}
}

// Valid state names: of a classic group, and of a consumer group.
var (
	classicStates  = []string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"}
	consumerStates = []string{"Empty", "Assigning", "Reconciling", "Stable"}
)

// check checks the invariants after a step.
func (r *groupRun) check() {
	r.t.Helper()
	if p := r.panics.take(); p != "" {
		r.fatalf("the node panicked: %s", p)
	}
	if _, err := r.n.metrics.Registry().Gather(); err != nil {
		r.fatalf("/metrics no longer gathers: %v", err)
	}
	if resp, err := http.Get("http://" + r.n.HTTPAddr() + "/console/groups"); err != nil || resp.StatusCode != http.StatusOK {
		r.fatalf("the console's groups page: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	for _, g := range r.groups {
		for _, page := range []string{r.n.HTTPAddr() + "/console/groups/" + g.id, r.n.HTTPAddr() + "/groups/" + g.id} {
			if resp, err := http.Get("http://" + page); err != nil || resp.StatusCode >= 500 {
				r.fatalf("GET %s: %v %v", page, resp, err)
			} else {
				resp.Body.Close()
			}
		}
		r.checkOffsets(g)
		r.checkDescribed(g)
	}
}

// checkOffsets wants every offset committed and not deleted fetched as it
// was committed.
func (r *groupRun) checkOffsets(g *fuzzGroup) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(9)
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = g.id
	req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	resp := r.send(req).(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		r.fatalf("OffsetFetch of %s: %+v", g.id, resp)
	}
	fetched := map[tp]int64{}
	for _, t := range resp.Groups[0].Topics {
		for _, p := range t.Partitions {
			fetched[tp{t.Topic, p.Partition}] = p.Offset
		}
	}
	for x, want := range g.committed {
		if got, ok := fetched[x]; !g.unsure[x] && (!ok || got != want) {
			r.fatalf("group %s %v: committed %d, fetched %d (found %v)", g.id, x, want, got, ok)
		}
	}
	for x, got := range fetched {
		if _, ok := g.committed[x]; !ok && !g.unsure[x] {
			r.fatalf("group %s %v: fetched %d, never committed or deleted since", g.id, x, got)
		}
	}
}

// describedGroup is what the describe APIs and ListGroups say of a group.
type describedGroup struct {
	listed, listedType, listedState string
	classic                         *kmsg.DescribeGroupsResponseGroup
	consumer                        *kmsg.ConsumerGroupDescribeResponseGroup
}

func (r *groupRun) describeGroup(id string) describedGroup {
	var d describedGroup
	list := kmsg.NewPtrListGroupsRequest()
	list.SetVersion(5)
	for _, lg := range r.send(list).(*kmsg.ListGroupsResponse).Groups {
		if lg.Group == id {
			d.listed, d.listedType, d.listedState = lg.Group, lg.GroupType, lg.GroupState
		}
	}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.SetVersion(6)
	dreq.Groups = []string{id}
	if groups := r.send(dreq).(*kmsg.DescribeGroupsResponse).Groups; len(groups) != 1 {
		r.fatalf("DescribeGroups of %s: %d groups", id, len(groups))
	} else if groups[0].ErrorCode == 0 {
		d.classic = &groups[0]
	}
	creq := kmsg.NewPtrConsumerGroupDescribeRequest()
	creq.SetVersion(1)
	creq.Groups = []string{id}
	if groups := r.send(creq).(*kmsg.ConsumerGroupDescribeResponse).Groups; len(groups) != 1 {
		r.fatalf("ConsumerGroupDescribe of %s: %d groups", id, len(groups))
	} else if groups[0].ErrorCode == 0 {
		d.consumer = &groups[0]
	}
	return d
}

// consistent is why ListGroups disagrees with the describe APIs on the
// group's type, or "".
func (d describedGroup) consistent() string {
	switch {
	case d.classic != nil && d.consumer != nil:
		return "described as both a classic and a consumer group"
	case d.listed == "" && (d.classic != nil || d.consumer != nil):
		return "described but not listed"
	case d.listed != "" && d.classic == nil && d.consumer == nil:
		return "listed but not described"
	case d.classic != nil && d.listedType != "classic", d.consumer != nil && d.listedType != "consumer":
		return fmt.Sprintf("listed as type %q", d.listedType)
	}
	return ""
}

// checkDescribed checks what the coordinator says of g's members.
func (r *groupRun) checkDescribed(g *fuzzGroup) {
	d := r.describeGroup(g.id)
	// A timer (a rebalance, revocation or sync deadline) may convert the
	// group between two of the requests: look again before failing.
	for range 3 {
		if d.consistent() == "" {
			break
		}
		d = r.describeGroup(g.id)
	}
	if why := d.consistent(); why != "" {
		r.fatalf("group %s: %s", g.id, why)
	}
	if d.listed != "" {
		states := classicStates
		if d.listedType == "consumer" {
			states = consumerStates
		}
		if !slices.Contains(states, d.listedState) {
			r.fatalf("group %s of type %s listed in state %q", g.id, d.listedType, d.listedState)
		}
	}
	if c := d.classic; c != nil {
		if !slices.Contains(classicStates, c.State) {
			r.fatalf("group %s described in state %q", g.id, c.State)
		}
		owners := map[tp]string{}
		for _, dm := range c.Members {
			if g.left[dm.MemberID] {
				r.fatalf("group %s lists member %s, which left", g.id, dm.MemberID)
			}
			set, err := decodeClassicAssignment(dm.MemberAssignment)
			if err != nil && g.garbled {
				continue
			}
			if err != nil {
				r.fatalf("group %s member %s: assignment %x: %v", g.id, dm.MemberID, dm.MemberAssignment, err)
			}
			for x := range set {
				if o, ok := owners[x]; ok && !g.overlapped {
					r.fatalf("group %s (%s): %v assigned to both %s and %s", g.id, c.State, x, o, dm.MemberID)
				}
				owners[x] = dm.MemberID
			}
		}
	}
	if c := d.consumer; c != nil {
		if !slices.Contains(consumerStates, c.State) {
			r.fatalf("consumer group %s described in state %q", g.id, c.State)
		}
		if c.AssignmentEpoch > c.Epoch {
			r.fatalf("consumer group %s: assignment epoch %d above group epoch %d", g.id, c.AssignmentEpoch, c.Epoch)
		}
		owners := map[tp]string{}
		described := map[string]kmsg.ConsumerGroupDescribeResponseGroupMember{}
		for _, dm := range c.Members {
			described[dm.MemberID] = dm
			if g.left[dm.MemberID] {
				r.fatalf("consumer group %s lists member %s, which left", g.id, dm.MemberID)
			}
			if dm.MemberEpoch > c.Epoch {
				r.fatalf("consumer group %s: member %s at epoch %d above the group's %d", g.id, dm.MemberID, dm.MemberEpoch, c.Epoch)
			}
			for _, t := range dm.Assignment.TopicPartitions {
				for _, p := range t.Partitions {
					x := tp{t.Topic, p}
					if o, ok := owners[x]; ok {
						r.fatalf("consumer group %s: %v owned by both %s and %s", g.id, x, o, dm.MemberID)
					}
					owners[x] = dm.MemberID
				}
			}
		}
		// A KIP-848 member's partitions change only with its own heartbeats:
		// what it was last told it owns, the coordinator says it owns.
		for _, m := range g.members {
			dm, ok := described[m.kid]
			if !m.joined || !ok || dm.MemberEpoch != m.epoch {
				continue
			}
			for x := range m.kowned {
				if owners[x] != m.kid {
					r.fatalf("consumer group %s: member %s at epoch %d owns %v, which the coordinator gives %q", g.id, m.kid, m.epoch, x, owners[x])
				}
			}
		}
	}
}
