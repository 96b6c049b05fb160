package server

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/share"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// The universe of FuzzShareSequences: one topic of two partitions holding six
// records each (batches of 2, 3 and 1), two share groups of three possible
// members. Group 0 allows two deliveries and dead-letters to dlq.<topic>;
// group 1 allows three and has no dead-letter topic.
const (
	sfTopic      = "sq"
	sfDeadLetter = "dlq.sq"
	sfPartitions = 2
	sfRecords    = 6
	sfMembers    = 3
	sfGroups     = 2
	sfMaxOps     = 30
	// sfLock is the groups' acquisition lock duration, the least Kafka allows:
	// an input's waitLocks lets the locks expire; the model knows a lock held
	// only for sfLock after its request went out.
	sfLock = time.Second
)

var (
	sfBatches = []int{2, 3, 1}
	sfLimits  = [sfGroups]int16{2, 3}
)

// FuzzShareSequences drives KIP-932 share groups of one node over the wire with
// sequences of operations (ShareGroupHeartbeat joins, heartbeats with current
// and stale epochs, leaves; ShareFetch opening, continuing, closing or
// misusing share sessions, with and without piggybacked acknowledgements,
// forgetting partitions, or long-polling while the other members go on;
// ShareAcknowledge accepting, releasing, rejecting and renewing ranges the
// member holds, another member holds, nobody holds or that lie past the log;
// AlterShareGroupOffsets and DeleteShareGroupOffsets), and checks after each
// one, against a model of what the broker answered so far, what Kafka
// guarantees:
//
//   - every request is answered, with codes the API defines, and nothing
//     panics; /metrics gathers and the console's groups page answers;
//   - session epochs: the next epoch (or -1) of an open session is accepted,
//     any other but 0 refused; a member's current epoch is accepted by a
//     heartbeat, another one fenced; ShareGroupDescribe shows the members at
//     their epochs; resetting offsets needs a group without members;
//   - a record is never acquired while a member holds its lock (its own or
//     another's), and an acknowledged (accepted, rejected, or released on its
//     last delivery) one is never delivered again, unless its offsets are reset;
//   - delivery counts grow with each delivery and never pass the group's
//     share.delivery.count.limit; acquired offsets come with their batches;
//   - acknowledging records the member holds succeeds, acknowledging one it
//     does not hold fails, and a partition's acknowledgement that fails
//     changes nothing (Kafka rolls back the partition's batches);
//   - DescribeShareGroupOffsets' start offset is at or before every record
//     still to be delivered, and its lag counts at least those;
//   - at the end, once every session is closed, every available record is
//     handed out again (none is lost), and every record of group 0 that failed
//     for good is in its dead-letter topic.
//
// Every input uses groups of its own, so inputs are independent. An input
// takes a few hundred milliseconds and the node's background work makes
// coverage vary, so fuzz with a short -fuzzminimizetime (20x): the default
// spends a minute minimizing each new input.
func FuzzShareSequences(f *testing.F) {
	fx := startShareFuzz(f)
	for _, seed := range shareSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		fx.inputs++
		s := &shareSeq{t: t, fx: fx, conns: map[int]net.Conn{}, parked: map[int]*fetchCall{}, deadLetters: map[string]bool{}}
		for g := range s.groups {
			s.groups[g] = fmt.Sprintf("sq%d-%c", fx.inputs, 'a'+g)
		}
		defer s.closeConns()
		s.configureGroups()
		dlq, err := fx.n.replicas.Partition(sfDeadLetter, 0)
		if err != nil {
			t.Fatal(err)
		}
		s.dlqStart = dlq.HighWatermark()
		r := &opReader{b: ops}
		for i := 0; i < sfMaxOps && r.more(); i++ {
			g := s.step(r)
			s.checkNode()
			s.describe(g)
		}
		s.drain()
		s.checkDeadLetters()
	})
}

// shareFuzz is the node FuzzShareSequences runs against.
type shareFuzz struct {
	n       *Node
	cl      *kgo.Client
	panics  *panicRecorder
	topicID [16]byte
	inputs  int
}

func startShareFuzz(f *testing.F) *shareFuzz {
	fx := &shareFuzz{panics: &panicRecorder{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, nodeConfig(f.TempDir()), slog.New(fx.panics), vfs.Default)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { n.Close() })
	fx.n = n
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(cl.Close)
	fx.cl = cl
	adm := kadm.NewClient(cl)
	enable := "true"
	if _, err := adm.CreateTopic(ctx, sfPartitions, 1, nil, sfTopic); err != nil {
		f.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{metadata.TopicDeadLetterGroupEnable: &enable}, sfDeadLetter); err != nil {
		f.Fatal(err)
	}
	for p := range int32(sfPartitions) {
		for _, size := range sfBatches {
			var recs []*kgo.Record
			for range size {
				recs = append(recs, &kgo.Record{Topic: sfTopic, Partition: p, Value: []byte("v")})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				f.Fatal(err)
			}
		}
	}
	fx.topicID = [16]byte(n.ctrl.Image().Topic(sfTopic).ID)
	// A group coordinator's first FindCoordinator creates __consumer_offsets.
	wait.For(f, "the group coordinator", func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "sq"
		resp, err := req.RequestWith(ctx, cl)
		return err == nil && resp.ErrorCode == 0
	})
	return fx
}

// recState is what the model knows of one record of one group.
type recState int8

const (
	recFree    recState = iota // available: never delivered, or released
	recHeld                    // acquired by member, its lock held at least until until, at most until expires
	recDone                    // accepted, or failed for good: never delivered again
	recUnknown                 // the broker may have released it or not
)

type sfRecord struct {
	state   recState
	member  int
	until   time.Time
	expires time.Time
	count   int16 // the last delivery count seen (0: never delivered)
}

// shareSeq is one input's run: the model of what the node answered so far.
type shareSeq struct {
	t      *testing.T
	fx     *shareFuzz
	groups [sfGroups]string
	conns  map[int]net.Conn   // by member; describeConn for the describe requests
	parked map[int]*fetchCall // by member: a ShareFetch not answered yet
	// memberEpoch is each member's epoch in each group (0: not a member).
	memberEpoch [sfGroups][sfMembers]int32
	// session is each member's next share session epoch (0: no session);
	// the last member is drain's.
	session [sfGroups][sfMembers + 1]int32
	recs    [sfGroups][sfPartitions][sfRecords]sfRecord
	// deadLetters holds the records of group 0 known to have failed for good
	// ("partition/offset"); dlqStart is the dead-letter topic's end offset
	// when the input began.
	deadLetters map[string]bool
	// exists says which groups exist (a member joined, or offsets were set).
	exists   [sfGroups]bool
	dlqStart int64
	history  []string
}

// describeConn is the connection of describe's requests (no member's).
const describeConn = -1

func memberID(m int) string { return fmt.Sprintf("member-%d-sfuzz", m) }

func (s *shareSeq) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s\nsteps:\n  %s", fmt.Sprintf(format, args...), strings.Join(s.history, "\n  "))
}

// configureGroups sets the groups' configs and waits for the node to apply them.
func (s *shareSeq) configureGroups() {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for g, name := range s.groups {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(metadata.ResourceGroup), name
		kv := []string{metadata.GroupShareAutoOffsetReset, "earliest", metadata.GroupShareDeliveryCountLimit, fmt.Sprint(sfLimits[g]),
			metadata.GroupShareRecordLockDuration, fmt.Sprint(sfLock.Milliseconds())}
		if g == 0 {
			kv = append(kv, metadata.GroupDeadLetterTopic, sfDeadLetter)
		}
		for i := 0; i < len(kv); i += 2 {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
			r.Configs = append(r.Configs, c)
		}
		req.Resources = append(req.Resources, r)
	}
	resp, err := req.RequestWith(context.Background(), s.fx.cl)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, r := range resp.Resources {
		if r.ErrorCode != 0 {
			s.t.Fatalf("group configs of %s: code %d", r.ResourceName, r.ErrorCode)
		}
	}
	wait.For(s.t, "the group configs to reach the node", func() bool {
		img := s.fx.n.ctrl.Image()
		return img.GroupConfig(s.groups[1], metadata.GroupShareDeliveryCountLimit) == fmt.Sprint(sfLimits[1]) &&
			img.GroupConfig(s.groups[0], metadata.GroupDeadLetterTopic) == sfDeadLetter
	})
}

// conn is member m's connection, dialled on first use.
func (s *shareSeq) conn(m int) net.Conn {
	s.t.Helper()
	c := s.conns[m]
	if c == nil {
		var err error
		if c, err = net.DialTimeout("tcp", s.fx.n.KafkaAddr(), 10*time.Second); err != nil {
			s.t.Fatal(err)
		}
		s.conns[m] = c
	}
	return c
}

func (s *shareSeq) closeConns() {
	for _, c := range s.conns {
		c.Close()
	}
}

// send sends req on member m's connection (one per member, as a client has)
// and returns the answer; no answer within 10 s fails the input (no request
// here waits longer than 20 ms for records).
func (s *shareSeq) send(m int, req kmsg.Request) kmsg.Response {
	s.t.Helper()
	c := s.conn(m)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	err := writeRequest(c, req, 1)
	var resp kmsg.Response
	if err == nil {
		resp, err = readResponse(c, req)
	}
	if err == nil {
		return resp
	}
	if p := s.fx.panics.take(); p != "" {
		s.fatalf("%s: the node panicked: %s", kmsg.NameForKey(req.Key()), p)
	}
	s.fatalf("%s: no answer: %v", kmsg.NameForKey(req.Key()), err)
	return nil
}

// checkNode wants no panic logged, /metrics to gather and the console's
// groups page to answer.
func (s *shareSeq) checkNode() {
	s.t.Helper()
	if p := s.fx.panics.take(); p != "" {
		s.fatalf("the node panicked: %s", p)
	}
	if _, err := s.fx.n.metrics.Registry().Gather(); err != nil {
		s.fatalf("/metrics no longer gathers: %v", err)
	}
	resp, err := http.Get("http://" + s.fx.n.HTTPAddr() + "/console/groups")
	if err != nil || resp.StatusCode != http.StatusOK {
		s.fatalf("the console's groups page: %v %v", resp, err)
	}
	resp.Body.Close()
}

// checkDeadLetters waits until every record of group 0 the model knows failed
// for good is in the dead-letter topic (at least once), past dlqStart, and
// counted.
func (s *shareSeq) checkDeadLetters() {
	s.t.Helper()
	if len(s.deadLetters) == 0 {
		return
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.fx.n.KafkaAddr()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{sfDeadLetter: {0: kgo.NewOffset().At(s.dlqStart)}}))
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait.DefaultTimeout)
	defer cancel()
	missing := maps.Clone(s.deadLetters)
	for len(missing) > 0 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			h := headerMap(r)
			if h[share.HeaderGroup] == s.groups[0] {
				delete(missing, h[share.HeaderPartition]+"/"+h[share.HeaderOffset])
			}
		})
	}
	if len(missing) > 0 {
		s.fatalf("records of %s missing from its dead-letter topic (partition/offset): %v", s.groups[0], slices.Sorted(maps.Keys(missing)))
	}
	// The group's dead-letter counts (/metrics) count every one written.
	var st share.DeadLetterStats
	if !wait.Until(time.Now().Add(wait.DefaultTimeout), func() bool {
		st = s.fx.n.shares.DeadLetterStats()[s.groups[0]]
		return st.Written >= int64(len(s.deadLetters))
	}) {
		s.fatalf("dead-letter counts of %s: %+v, want at least %d written", s.groups[0], st, len(s.deadLetters))
	}
}

// opReader hands out an input's bytes, zeros once they run out.
type opReader struct {
	b []byte
	i int
}

func (r *opReader) more() bool { return r.i < len(r.b) }

func (r *opReader) byte() byte {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

// Operations: the first byte's low three bits pick one, bit 3 the group, the
// rest the member (mod 3).
const (
	opShareJoin      = iota
	opShareHeartbeat // or, by its second byte, resetOffsets or waitLocks
	opShareLeave
	opFetch     // 3, 4
	opPark  = 5 // a ShareFetch answered later
	opAck   = 6 // 6, 7
)

// Session epoch kinds of ShareFetch and ShareAcknowledge.
const (
	epochNext  = iota // the session's next epoch (1 without a session)
	epochOpen         // 0
	epochFinal        // -1
	epochStale        // the next epoch less one
	epochAhead        // the next epoch plus one
)

// sfMasks are the partitions a request names.
var sfMasks = [][]int32{{0}, {1}, {0, 1}}

// step runs one operation and returns its group.
func (s *shareSeq) step(r *opReader) int {
	op := r.byte()
	g, m := int(op>>3)&1, int(op>>4)%sfMembers
	s.collect(m)
	switch k := op & 7; {
	case k == opShareJoin:
		s.heartbeat(g, m, 0)
	case k == opShareHeartbeat:
		switch b := r.byte(); {
		case b&0x80 != 0:
			s.resetOffsets(g, b)
		case b&0x70 == 0x40:
			s.waitLocks()
		default:
			s.heartbeat(g, m, 1+int(b)%3)
		}
	case k == opShareLeave:
		s.heartbeat(g, m, -1)
	case k < opPark:
		s.fetch(g, m, r)
	case k == opPark:
		s.park(g, m, r)
	default:
		s.acknowledge(g, m, r)
	}
	return g
}

// heartbeat sends a ShareGroupHeartbeat: kind 0 joins, -1 leaves, 1 uses the
// member's epoch, 2 and 3 one below and above it.
func (s *shareSeq) heartbeat(g, m, kind int) {
	s.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.SetVersion(1)
	req.GroupID, req.MemberID = s.groups[g], memberID(m)
	cur := s.memberEpoch[g][m]
	switch kind {
	case 0:
		req.SubscribedTopicNames = []string{sfTopic}
	case -1:
		req.MemberEpoch = -1
	case 1:
		req.MemberEpoch = max(cur, 1)
	case 2:
		req.MemberEpoch = cur - 1
		if req.MemberEpoch <= 0 {
			req.MemberEpoch = cur + 1
		}
	case 3:
		req.MemberEpoch = cur + 1
	}
	// A coordinator still loading its partition answers with a retriable
	// code, which a client retries.
	var resp *kmsg.ShareGroupHeartbeatResponse
	wait.For(s.t, "the group coordinator", func() bool {
		resp = s.send(m, req).(*kmsg.ShareGroupHeartbeatResponse)
		return !slices.Contains(coordinatorCodes, resp.ErrorCode)
	})
	s.history = append(s.history, fmt.Sprintf("heartbeat g%d m%d epoch %d -> code %d epoch %d", g, m, req.MemberEpoch, resp.ErrorCode, resp.MemberEpoch))
	code := resp.ErrorCode
	switch {
	case !slices.Contains(heartbeatCodes, code):
		s.fatalf("ShareGroupHeartbeat: code %d is not one the API answers", code)
	case kind == 0 && code != 0:
		s.fatalf("ShareGroupHeartbeat: a join answered code %d", code)
	case kind != 0 && cur == 0 && code == 0:
		s.fatalf("ShareGroupHeartbeat: a heartbeat of no member (epoch %d) was accepted", req.MemberEpoch)
	case (kind == -1 || kind == 1) && cur != 0 && code != 0:
		s.fatalf("ShareGroupHeartbeat: the member's own epoch %d answered code %d", req.MemberEpoch, code)
	case (kind == 2 || kind == 3) && cur != 0 && code != kerr.FencedMemberEpoch.Code:
		s.fatalf("ShareGroupHeartbeat: epoch %d of a member at %d answered code %d, want FENCED_MEMBER_EPOCH", req.MemberEpoch, cur, code)
	}
	if code == 0 {
		s.memberEpoch[g][m] = max(resp.MemberEpoch, 0)
		s.exists[g] = true
	}
}

// waitLocks lets the acquisition locks the model knows of expire (the time
// passing is the operation, not a wait for state): each of those records is
// available again, or failed for good on its last delivery.
func (s *shareSeq) waitLocks() {
	s.t.Helper()
	for m := range sfMembers {
		s.collect(m)
	}
	now := time.Now()
	var last time.Time
	type hold struct {
		g int
		p int32
		o int64
	}
	var holds []hold
	for g := range sfGroups {
		for p := range int32(sfPartitions) {
			for o := range int64(sfRecords) {
				if s.heldBy(g, p, o, now) >= 0 {
					holds = append(holds, hold{g, p, o})
					if e := s.recs[g][p][o].expires; e.After(last) {
						last = e
					}
				}
			}
		}
	}
	s.history = append(s.history, fmt.Sprintf("wait for %d locks to expire", len(holds)))
	time.Sleep(time.Until(last) + 100*time.Millisecond)
	for _, h := range holds {
		s.release(h.g, h.p, h.o)
	}
}

// resetOffsets sends AlterShareGroupOffsets (b&0x40 clear: partition b>>3&1
// starts again at offset b&7-1, -1 deleting its state) or
// DeleteShareGroupOffsets of the topic (b&0x40 set). Either needs a group
// without members; a member may still hold records through its share session
// (it left the group), which the reset takes back.
func (s *shareSeq) resetOffsets(g int, b byte) {
	s.t.Helper()
	for m := range sfMembers {
		s.collect(m) // the model applies a parked fetch's records before the reset
	}
	members := 0
	for _, epoch := range s.memberEpoch[g] {
		if epoch != 0 {
			members++
		}
	}
	var code int16
	var parts []int32
	var starts []int64
	if b&0x40 == 0 {
		p, start := int32(b>>3&1), int64(b&7)-1
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = s.groups[g]
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = sfTopic
		rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		rp.Partition, rp.StartOffset = p, start
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := s.send(describeConn, req).(*kmsg.AlterShareGroupOffsetsResponse)
		code = resp.ErrorCode
		if code == 0 && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
			s.fatalf("AlterShareGroupOffsets of g%d: %+v", g, resp.Topics)
		}
		if code == 0 {
			code = resp.Topics[0].Partitions[0].ErrorCode
		}
		s.history = append(s.history, fmt.Sprintf("AlterShareGroupOffsets g%d partition %d to %d -> code %d", g, p, start, code))
		parts, starts = []int32{p}, []int64{start}
		if code == 0 {
			s.exists[g] = true
		}
	} else {
		req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		req.GroupID = s.groups[g]
		rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
		rt.Topic = sfTopic
		req.Topics = append(req.Topics, rt)
		resp := s.send(describeConn, req).(*kmsg.DeleteShareGroupOffsetsResponse)
		code = resp.ErrorCode
		if code == 0 && len(resp.Topics) != 1 {
			s.fatalf("DeleteShareGroupOffsets of g%d: %+v", g, resp.Topics)
		}
		if code == 0 {
			code = resp.Topics[0].ErrorCode
			if code == kerr.UnknownTopicOrPartition.Code {
				code = 0 // no state to delete
			}
		}
		s.history = append(s.history, fmt.Sprintf("DeleteShareGroupOffsets g%d -> code %d", g, code))
		parts, starts = []int32{0, 1}, []int64{-1, -1}
	}
	switch {
	case members > 0 && code != kerr.NonEmptyGroup.Code:
		s.fatalf("resetting the offsets of g%d with %d members: code %d, want NON_EMPTY_GROUP", g, members, code)
	case members == 0 && s.exists[g] && code != 0:
		s.fatalf("resetting the offsets of g%d without members: code %d", g, code)
	case !s.exists[g] && code != kerr.GroupIDNotFound.Code:
		s.fatalf("deleting the offsets of g%d, which does not exist: code %d", g, code)
	}
	if code != 0 {
		return
	}
	for i, p := range parts {
		for o := range int64(sfRecords) {
			s.recs[g][p][o] = sfRecord{}
			if o < starts[i] {
				s.recs[g][p][o].state = recDone
			}
		}
	}
}

var coordinatorCodes = []int16{kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code}

var heartbeatCodes = []int16{0, kerr.InvalidRequest.Code, kerr.UnknownMemberID.Code, kerr.GroupIDNotFound.Code, kerr.GroupMaxSizeReached.Code, kerr.FencedMemberEpoch.Code}

// sessionEpoch is the epoch of a request of the given kind in member m's
// share session.
func (s *shareSeq) sessionEpoch(g, m, kind int) int32 {
	next := max(s.session[g][m], 1)
	switch kind {
	case epochOpen:
		return 0
	case epochFinal:
		return -1
	case epochStale:
		if next == 1 {
			return 2
		}
		return next - 1
	case epochAhead:
		return next + 1
	}
	return next
}

// checkSession checks a request's top-level code against the session model
// and updates the model; it reports whether the request went through.
func (s *shareSeq) checkSession(api string, g, m int, epoch int32, code int16, hasAcks bool) bool {
	s.t.Helper()
	next := s.session[g][m]
	fetch := api == "ShareFetch"
	switch {
	case !slices.Contains(shareTopCodes, code):
		s.fatalf("%s: code %d is not one the API answers", api, code)
	case epoch == 0 && fetch && !hasAcks && code != 0:
		s.fatalf("%s: opening a session answered code %d", api, code)
	case epoch == 0 && (hasAcks || !fetch) && code == 0:
		s.fatalf("%s: epoch 0 with acknowledgements was accepted", api)
	case next != 0 && (epoch == next || epoch == -1) && code != 0:
		s.fatalf("%s: epoch %d of a session at %d answered code %d", api, epoch, next, code)
	case epoch != 0 && (next == 0 || (epoch != next && epoch != -1)) && code == 0:
		s.fatalf("%s: epoch %d of a session at %d (0: none) was accepted", api, epoch, next)
	}
	if code != 0 {
		return false
	}
	switch epoch {
	case 0:
		s.session[g][m] = 1
		// Kafka may or may not drop what the member held under a session it
		// replaces (Strata unloads the group's state when no other member has
		// a session): the model no longer knows.
		for p := range int32(sfPartitions) {
			s.forget(g, m, p)
		}
	case -1:
		s.session[g][m] = 0
	default:
		s.session[g][m]++
	}
	return true
}

var shareTopCodes = []int16{0, kerr.InvalidRequest.Code, kerr.ShareSessionNotFound.Code, kerr.InvalidShareSessionEpoch.Code, kerr.ShareSessionLimitReached.Code}

// ackSpec is one partition's acknowledgement batches in a request, and
// whether they name only records the member holds (which must succeed).
type ackSpec struct {
	batches []ackRange
	own     bool
}

type ackRange struct {
	first, last int64
	types       []int8
}

func (a ackRange) String() string { return fmt.Sprintf("%d-%d%v", a.first, a.last, a.types) }

// ackBatches reads one partition's acknowledgement batches: s1%4 picks the
// ranges (0: those member m holds, 1: another member's, 2: an arbitrary one,
// 3: m's and an arbitrary one), s1>>4 the type, bit 6 RENEW instead (where
// renew allows it), bit 7 one type per offset, s2 the arbitrary range (first
// s2%9, up to two more; with s1's bit 2, 2^40 more, of one type).
func (s *shareSeq) ackBatches(g, m int, p int32, r *opReader, renew bool) ackSpec {
	s1, s2 := r.byte(), r.byte()
	typ := int(s1>>4) % 3
	perOffset := s1&0x80 != 0
	renew = renew && s1&0x40 != 0
	batch := func(first, last int64) ackRange {
		a := ackRange{first: first, last: last}
		if renew {
			a.types = []int8{int8(share.Renew)}
			return a
		}
		for o := first; o <= last; o++ {
			a.types = append(a.types, int8(1+(typ+int(o-first))%3))
			if !perOffset {
				break
			}
		}
		return a
	}
	held := func(member int) []ackRange {
		var out []ackRange
		now := time.Now()
		for o := int64(0); o < sfRecords; o++ {
			if s.heldBy(g, p, o, now) != member {
				continue
			}
			if k := len(out); k > 0 && out[k-1].last == o-1 {
				out[k-1] = batch(out[k-1].first, o)
			} else {
				out = append(out, batch(o, o))
			}
		}
		return out
	}
	first := int64(s2 % 9)
	arbitrary := batch(first, first+int64(s2/9%3))
	if s1&4 != 0 {
		arbitrary = ackRange{first: first, last: first + 1<<40, types: arbitrary.types[:1]}
	}
	var spec ackSpec
	switch s1 % 4 {
	case 0:
		spec = ackSpec{batches: held(m), own: true}
	case 1:
		for other := range sfMembers {
			if other != m && len(spec.batches) == 0 {
				spec.batches = held(other)
			}
		}
	case 3:
		spec.batches = append(held(m), arbitrary)
	}
	if len(spec.batches) == 0 {
		spec = ackSpec{batches: []ackRange{arbitrary}}
	}
	return spec
}

// heldBy is the member certainly holding a record's lock now, else -1.
func (s *shareSeq) heldBy(g int, p int32, o int64, now time.Time) int {
	r := &s.recs[g][p][o]
	if r.state == recHeld && now.Before(r.until) {
		return r.member
	}
	return -1
}

// state is a record's state as the model knows it now (a lock that may have
// expired is unknown).
func (s *shareSeq) state(g int, p int32, o int64, now time.Time) recState {
	r := &s.recs[g][p][o]
	if r.state == recHeld && !now.Before(r.until) {
		r.state = recUnknown
	}
	return r.state
}

// forget makes what member m holds of partition p in group g unknown.
func (s *shareSeq) forget(g, m int, p int32) {
	for o := range s.recs[g][p] {
		if r := &s.recs[g][p][o]; r.state == recHeld && r.member == m {
			r.state = recUnknown
		}
	}
}

// releaseAll is the model of a session's close: what member m holds in group
// g is released, or fails for good on its last delivery.
func (s *shareSeq) releaseAll(g, m int) {
	now := time.Now()
	for p := range int32(sfPartitions) {
		for o := range int64(sfRecords) {
			if s.heldBy(g, p, o, now) == m {
				s.release(g, p, o)
			}
		}
	}
}

func (s *shareSeq) release(g int, p int32, o int64) {
	r := &s.recs[g][p][o]
	if r.count >= sfLimits[g] {
		s.fail(g, p, o)
		return
	}
	r.state = recFree
}

// fail ends a held record for good: dead-lettered in group 0.
func (s *shareSeq) fail(g int, p int32, o int64) {
	s.recs[g][p][o].state = recDone
	if g == 0 {
		s.deadLetters[fmt.Sprintf("%d/%d", p, o)] = true
	}
}

// acknowledged checks a partition's acknowledgement answer (code) against
// the model and applies it; sent is when the request went out.
func (s *shareSeq) acknowledged(api string, g, m int, p int32, spec ackSpec, code int16, msg *string, sent time.Time) {
	s.t.Helper()
	what := fmt.Sprintf("%s of g%d m%d partition %d %v", api, g, m, p, spec.batches)
	if !slices.Contains(ackCodes, code) {
		s.fatalf("%s: code %d is not one the API answers", what, code)
	}
	if code != 0 {
		if spec.own && s.holdsAll(g, m, p, spec, time.Now()) {
			text := ""
			if msg != nil {
				text = *msg
			}
			s.fatalf("%s: acknowledging records the member holds answered code %d (%s)", what, code, text)
		}
		return // Kafka rolls back every batch of the partition
	}
	now := time.Now()
	for _, b := range spec.batches {
		for o := b.first; o <= b.last; o++ {
			if o < 0 || o >= sfRecords {
				s.fatalf("%s: offset %d is past the log, yet the acknowledgement succeeded", what, o)
			}
			switch st := s.state(g, p, o, now); {
			case st == recHeld && s.recs[g][p][o].member != m:
				s.fatalf("%s: offset %d is held by member %d, yet the acknowledgement succeeded", what, o, s.recs[g][p][o].member)
			case st == recFree:
				s.fatalf("%s: offset %d is not acquired, yet the acknowledgement succeeded", what, o)
			case st == recDone && s.inWindow(g, p, o, now):
				s.fatalf("%s: offset %d was acknowledged before, yet the acknowledgement succeeded", what, o)
			}
		}
	}
	for _, b := range spec.batches {
		for o := b.first; o <= b.last; o++ {
			typ := b.types[0]
			if len(b.types) > 1 {
				typ = b.types[o-b.first]
			}
			r := &s.recs[g][p][o]
			switch {
			case r.state == recDone:
				// below the start offset: skipped
			case typ == int8(share.Renew):
				if r.state == recHeld {
					r.until, r.expires = sent.Add(sfLock), now.Add(sfLock)
				}
			case typ == int8(share.Accept):
				r.state = recDone
			case r.state == recUnknown:
				if typ == int8(share.Reject) {
					r.state = recDone // dead-lettered, unless it was done already
				}
			case typ == int8(share.Reject):
				s.fail(g, p, o)
			default:
				s.release(g, p, o)
			}
		}
	}
}

// holdsAll reports whether member m certainly holds every offset spec names
// now.
func (s *shareSeq) holdsAll(g, m int, p int32, spec ackSpec, now time.Time) bool {
	for _, b := range spec.batches {
		for o := b.first; o <= b.last; o++ {
			if s.heldBy(g, p, o, now) != m {
				return false
			}
		}
	}
	return true
}

// inWindow reports whether offset o is certainly at or past the share
// partition's start offset: some offset before it is certainly not done.
func (s *shareSeq) inWindow(g int, p int32, o int64, now time.Time) bool {
	for x := range o {
		if st := s.state(g, p, x, now); st == recFree || st == recHeld {
			return true
		}
	}
	return false
}

var ackCodes = []int16{0, kerr.InvalidRecordState.Code, kerr.InvalidRequest.Code}

// delivered checks the records a ShareFetch handed member m and takes them
// into the model; sent is when the request went out (the locks last at least
// sfLock from then).
func (s *shareSeq) delivered(g, m int, p int32, records []byte, acquired []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord, sent time.Time) {
	s.t.Helper()
	var spans [][2]int64
	for rest := records; len(rest) > 0; {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(rest); err != nil {
			s.fatalf("ShareFetch g%d m%d partition %d: records do not decode: %v", g, m, p, err)
		}
		rest = rest[12+int(b.Length):]
		spans = append(spans, [2]int64{b.FirstOffset, b.FirstOffset + int64(b.LastOffsetDelta)})
	}
	now := time.Now()
	for _, a := range acquired {
		for o := a.FirstOffset; o <= a.LastOffset; o++ {
			what := fmt.Sprintf("ShareFetch g%d m%d partition %d offset %d delivery %d", g, m, p, o, a.DeliveryCount)
			if o < 0 || o >= sfRecords {
				s.fatalf("%s: past the log", what)
			}
			if !slices.ContainsFunc(spans, func(sp [2]int64) bool { return sp[0] <= o && o <= sp[1] }) {
				s.fatalf("%s: no batch of the response holds it", what)
			}
			r := &s.recs[g][p][o]
			switch st := s.state(g, p, o, now); {
			case st == recDone:
				s.fatalf("%s: delivered again after it was accepted, rejected or out of deliveries", what)
			case st == recHeld && r.member != m:
				s.fatalf("%s: acquired while member %d holds its lock", what, r.member)
			case st == recHeld:
				s.fatalf("%s: acquired again while the member holds its lock", what)
			case a.DeliveryCount <= r.count:
				s.fatalf("%s: the delivery count did not grow (was %d)", what, r.count)
			case a.DeliveryCount > sfLimits[g]:
				s.fatalf("%s: past the group's delivery count limit %d", what, sfLimits[g])
			}
			*r = sfRecord{state: recHeld, member: m, until: sent.Add(sfLock), expires: now.Add(sfLock), count: a.DeliveryCount}
		}
	}
}

// fetch sends a ShareFetch. Its first byte picks the session epoch kind (%5),
// the partitions (/5%3) and the version (/15%2+1); the second the most records
// (%4+1), the record_limit acquire mode (bit 2), piggybacked acknowledgements
// (bit 3, then two bytes per partition), a 20 ms wait (bit 4) and forgetting
// the partition not named (bit 5).
func (s *shareSeq) fetch(g, m int, r *opReader) {
	s.t.Helper()
	c := s.newFetch(g, m, r, false)
	s.fetched(c, s.send(m, c.req).(*kmsg.ShareFetchResponse))
}

// parkedWait is how long a parked ShareFetch waits for records.
const parkedWait = 300 * time.Millisecond

// park sends a ShareFetch of member m that waits up to parkedWait for records
// and leaves its answer for later (collect, before m's next operation or the
// drain) while the other members go on. It carries no acknowledgements and
// does not close the session: their effects would come before the answer,
// where the model applies them. A session it opens may drop what the member
// held at once (the model forgets it before the answer).
func (s *shareSeq) park(g, m int, r *opReader) {
	s.t.Helper()
	c := s.newFetch(g, m, r, true)
	if c.req.ShareSessionEpoch == 0 {
		for p := range int32(sfPartitions) {
			s.forget(g, m, p)
		}
	}
	s.history = append(s.history, fmt.Sprintf("parked ShareFetch g%d m%d epoch %d parts %v", g, m, c.req.ShareSessionEpoch, c.parts))
	conn := s.conn(m)
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if err := writeRequest(conn, c.req, 1); err != nil {
		s.fatalf("parked ShareFetch: %v", err)
	}
	s.parked[m] = c
}

// collect takes the answer to member m's parked ShareFetch, if any.
func (s *shareSeq) collect(m int) {
	s.t.Helper()
	c := s.parked[m]
	if c == nil {
		return
	}
	delete(s.parked, m)
	resp, err := readResponse(s.conn(m), c.req)
	if err != nil {
		if p := s.fx.panics.take(); p != "" {
			s.fatalf("parked ShareFetch: the node panicked: %s", p)
		}
		s.fatalf("parked ShareFetch: no answer: %v", err)
	}
	s.fetched(c, resp.(*kmsg.ShareFetchResponse))
}

// fetchCall is a ShareFetch sent, waiting for its answer.
type fetchCall struct {
	g, m      int
	req       *kmsg.ShareFetchRequest
	parts     []int32
	specs     map[int32]ackSpec
	forgotten []int32
	sent      time.Time
}

// newFetch reads a ShareFetch of member m in group g (fetch says how; park
// how a parked one differs).
func (s *shareSeq) newFetch(g, m int, r *opReader, parked bool) *fetchCall {
	b1, b2 := r.byte(), r.byte()
	kind, parts, version := int(b1%5), sfMasks[b1/5%3], int16(1+b1/15%2)
	if parked {
		b2 &^= 8
		if kind == epochFinal {
			kind = epochNext
		}
	}
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(version)
	group, member := s.groups[g], memberID(m)
	req.GroupID, req.MemberID = &group, &member
	req.ShareSessionEpoch = s.sessionEpoch(g, m, kind)
	req.MaxRecords = int32(1 + b2%4)
	req.BatchSize, req.MinBytes, req.MaxBytes = req.MaxRecords, 1, 1<<20
	if b2&4 != 0 && version >= 2 {
		req.ShareAcquireMode = 1
	}
	if b2&16 != 0 {
		req.MaxWaitMillis = 20
	}
	if parked {
		req.MaxWaitMillis = int32(parkedWait.Milliseconds())
	}
	specs := map[int32]ackSpec{}
	t := kmsg.NewShareFetchRequestTopic()
	t.TopicID = s.fx.topicID
	for _, p := range parts {
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = p
		if b2&8 != 0 {
			spec := s.ackBatches(g, m, p, r, false)
			specs[p] = spec
			for _, a := range spec.batches {
				b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
				b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = a.first, a.last, a.types
				rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
			}
		}
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	var forgotten []int32
	if b2&32 != 0 && len(parts) == 1 {
		forgotten = []int32{1 - parts[0]}
		ft := kmsg.NewShareFetchRequestForgottenTopicsData()
		ft.TopicID, ft.Partitions = s.fx.topicID, forgotten
		req.ForgottenTopicsData = append(req.ForgottenTopicsData, ft)
	}
	return &fetchCall{g: g, m: m, req: req, parts: parts, specs: specs, forgotten: forgotten, sent: time.Now()}
}

// fetched checks the answer to a ShareFetch against the model and applies it.
func (s *shareSeq) fetched(c *fetchCall, resp *kmsg.ShareFetchResponse) {
	s.t.Helper()
	g, m, req, specs, sent := c.g, c.m, c.req, c.specs, c.sent
	s.history = append(s.history, fmt.Sprintf("ShareFetch v%d g%d m%d epoch %d parts %v forgotten %v max %d mode %d wait %d acks %v -> %s",
		req.Version, g, m, req.ShareSessionEpoch, c.parts, c.forgotten, req.MaxRecords, req.ShareAcquireMode, req.MaxWaitMillis, specs, fetchSummary(resp)))
	if !s.checkSession("ShareFetch", g, m, req.ShareSessionEpoch, resp.ErrorCode, len(specs) > 0) {
		return
	}
	if resp.AcquisitionLockTimeoutMillis != int32(sfLock.Milliseconds()) {
		s.fatalf("ShareFetch g%d m%d: acquisition lock timeout %d ms, want the group's %v", g, m, resp.AcquisitionLockTimeoutMillis, sfLock)
	}
	for _, p := range c.forgotten {
		// Kafka may or may not release a forgotten partition's records.
		s.forget(g, m, p)
	}
	seen := map[int32]bool{}
	for _, rt := range resp.Topics {
		if rt.TopicID != s.fx.topicID {
			s.fatalf("ShareFetch: answered topic %x, not asked for", rt.TopicID)
		}
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				s.fatalf("ShareFetch g%d m%d partition %d: code %d", g, m, rp.Partition, rp.ErrorCode)
			}
			if spec, ok := specs[rp.Partition]; ok && !seen[rp.Partition] {
				s.acknowledged("ShareFetch", g, m, rp.Partition, spec, rp.AcknowledgeErrorCode, rp.AcknowledgeErrorMessage, sent)
			} else if rp.AcknowledgeErrorCode != 0 {
				s.fatalf("ShareFetch g%d m%d partition %d: acknowledgement code %d without acknowledgements", g, m, rp.Partition, rp.AcknowledgeErrorCode)
			}
			seen[rp.Partition] = true
			if req.ShareSessionEpoch == -1 && len(rp.AcquiredRecords) > 0 {
				s.fatalf("ShareFetch g%d m%d partition %d: the session's final fetch acquired %v", g, m, rp.Partition, rp.AcquiredRecords)
			}
			if rp.Partition < 0 || rp.Partition >= sfPartitions {
				s.fatalf("ShareFetch: answered partition %d", rp.Partition)
			}
			s.delivered(g, m, rp.Partition, rp.Records, rp.AcquiredRecords, sent)
		}
	}
	for p := range specs {
		if !seen[p] {
			s.fatalf("ShareFetch g%d m%d: no answer for the acknowledgements of partition %d", g, m, p)
		}
	}
	if req.ShareSessionEpoch == -1 {
		s.releaseAll(g, m)
	}
}

func fetchSummary(resp *kmsg.ShareFetchResponse) string {
	var b strings.Builder
	fmt.Fprintf(&b, "code %d", resp.ErrorCode)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			fmt.Fprintf(&b, " [p%d code %d ack %d", p.Partition, p.ErrorCode, p.AcknowledgeErrorCode)
			for _, a := range p.AcquiredRecords {
				fmt.Fprintf(&b, " %d-%d@%d", a.FirstOffset, a.LastOffset, a.DeliveryCount)
			}
			b.WriteString("]")
		}
	}
	return b.String()
}

// acknowledge sends a ShareAcknowledge. Its byte picks the session epoch kind
// (%5), the partitions (/5%3) and the version (/15%2+1); two bytes per
// partition follow (ackBatches).
func (s *shareSeq) acknowledge(g, m int, r *opReader) {
	s.t.Helper()
	b := r.byte()
	kind, parts, version := int(b%5), sfMasks[b/5%3], int16(1+b/15%2)
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.SetVersion(version)
	group, member := s.groups[g], memberID(m)
	req.GroupID, req.MemberID = &group, &member
	req.ShareSessionEpoch = s.sessionEpoch(g, m, kind)
	specs := map[int32]ackSpec{}
	t := kmsg.NewShareAcknowledgeRequestTopic()
	t.TopicID = s.fx.topicID
	for _, p := range parts {
		spec := s.ackBatches(g, m, p, r, version >= 2)
		specs[p] = spec
		rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
		rp.Partition = p
		for _, a := range spec.batches {
			b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
			b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = a.first, a.last, a.types
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
		}
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	sent := time.Now()
	resp := s.send(m, req).(*kmsg.ShareAcknowledgeResponse)
	summary := fmt.Sprintf("code %d", resp.ErrorCode)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			summary += fmt.Sprintf(" [p%d code %d]", p.Partition, p.ErrorCode)
		}
	}
	s.history = append(s.history, fmt.Sprintf("ShareAcknowledge v%d g%d m%d epoch %d acks %v -> %s", version, g, m, req.ShareSessionEpoch, specs, summary))
	if !s.checkSession("ShareAcknowledge", g, m, req.ShareSessionEpoch, resp.ErrorCode, true) {
		return
	}
	seen := map[int32]bool{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			spec, ok := specs[rp.Partition]
			if rt.TopicID != s.fx.topicID || !ok || seen[rp.Partition] {
				s.fatalf("ShareAcknowledge: answered topic %x partition %d, not asked for", rt.TopicID, rp.Partition)
			}
			seen[rp.Partition] = true
			s.acknowledged("ShareAcknowledge", g, m, rp.Partition, spec, rp.ErrorCode, rp.ErrorMessage, sent)
		}
	}
	if len(seen) != len(specs) {
		s.fatalf("ShareAcknowledge: answered %d partitions of %d", len(seen), len(specs))
	}
	if req.ShareSessionEpoch == -1 {
		s.releaseAll(g, m)
	}
}

// describe checks what ShareGroupDescribe and DescribeShareGroupOffsets say
// of group g against the model: its members and their epochs, its state; the
// start offset of each share partition is at or before every record still to
// be delivered, and the lag counts at least those.
func (s *shareSeq) describe(g int) {
	s.t.Helper()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.SetVersion(1)
	req.GroupIDs = []string{s.groups[g]}
	resp := s.send(describeConn, req).(*kmsg.ShareGroupDescribeResponse)
	want := map[string]int32{}
	for m, epoch := range s.memberEpoch[g] {
		if epoch != 0 {
			want[memberID(m)] = epoch
		}
	}
	if len(resp.Groups) != 1 {
		s.fatalf("ShareGroupDescribe of g%d: %d groups", g, len(resp.Groups))
	}
	dg := resp.Groups[0]
	got := map[string]int32{}
	for _, dm := range dg.Members {
		got[dm.MemberID] = dm.MemberEpoch
	}
	switch {
	case dg.ErrorCode == kerr.GroupIDNotFound.Code && len(want) == 0:
	case dg.ErrorCode != 0:
		s.fatalf("ShareGroupDescribe of g%d: code %d", g, dg.ErrorCode)
	case !maps.Equal(got, want):
		s.fatalf("ShareGroupDescribe of g%d: members and epochs %v, want %v", g, got, want)
	case (len(want) == 0) != (dg.GroupState == "Empty"):
		s.fatalf("ShareGroupDescribe of g%d: state %s with %d members", g, dg.GroupState, len(want))
	}

	oreq := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	oreq.SetVersion(1)
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = s.groups[g]
	rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	rt.Topic, rt.Partitions = sfTopic, []int32{0, 1}
	rg.Topics = append(rg.Topics, rt)
	oreq.Groups = append(oreq.Groups, rg)
	oresp := s.send(describeConn, oreq).(*kmsg.DescribeShareGroupOffsetsResponse)
	if len(oresp.Groups) != 1 || oresp.Groups[0].ErrorCode != 0 || len(oresp.Groups[0].Topics) != 1 || len(oresp.Groups[0].Topics[0].Partitions) != sfPartitions {
		s.fatalf("DescribeShareGroupOffsets of g%d: %+v", g, oresp.Groups)
	}
	now := time.Now()
	for _, dp := range oresp.Groups[0].Topics[0].Partitions {
		what := fmt.Sprintf("DescribeShareGroupOffsets of g%d partition %d: start offset %d lag %d", g, dp.Partition, dp.StartOffset, dp.Lag)
		if dp.ErrorCode != 0 || dp.Partition < 0 || dp.Partition >= sfPartitions {
			s.fatalf("%s: code %d", what, dp.ErrorCode)
		}
		pending := int64(0) // records certainly still to be delivered
		for o := range int64(sfRecords) {
			if st := s.state(g, dp.Partition, o, now); st == recFree || st == recHeld {
				if pending == 0 && dp.StartOffset > o {
					s.fatalf("%s: past offset %d, which is still to be delivered", what, o)
				}
				pending++
			}
		}
		switch {
		case dp.StartOffset < -1 || dp.StartOffset > sfRecords:
			s.fatalf("%s: outside the log", what)
		case dp.StartOffset >= 0 && dp.Lag != -1 && (dp.Lag < pending || dp.Lag > sfRecords-dp.StartOffset):
			s.fatalf("%s: %d records are still to be delivered", what, pending)
		}
	}
}

// drain closes every share session of the input, then has a member of its
// own take and accept whatever each group still hands out: every record the
// model knows to be available must come (none is lost).
func (s *shareSeq) drain() {
	s.t.Helper()
	final := []byte{epochFinal + 5*2 + 15, 0} // both partitions, v2, no acknowledgements
	drainer := sfMembers
	for m := range sfMembers {
		s.collect(m)
	}
	for g := range sfGroups {
		for m := range sfMembers {
			if s.session[g][m] != 0 {
				s.fetch(g, m, &opReader{b: final})
			}
		}
		var free [][2]int64 // partition, offset
		for p := range int32(sfPartitions) {
			for o := range int64(sfRecords) {
				if s.state(g, p, o, time.Now()) == recFree {
					free = append(free, [2]int64{int64(p), o})
				}
			}
		}
		// Up to 4 records, waiting up to 20 ms.
		s.fetch(g, drainer, &opReader{b: []byte{epochOpen + 5*2 + 15, 3 | 16}})
		for range 2 * sfPartitions * sfRecords {
			held := s.holds(g, drainer)
			if !held {
				break
			}
			// Accept what it holds, take more.
			s.fetch(g, drainer, &opReader{b: []byte{epochNext + 5*2 + 15, 3 | 8 | 16, 0, 0, 0, 0}})
		}
		s.fetch(g, drainer, &opReader{b: final})
		var lost [][2]int64
		for _, x := range free {
			if s.recs[g][x[0]][x[1]].state != recDone {
				lost = append(lost, x)
			}
		}
		if len(lost) > 0 {
			s.fatalf("group %d: available records (partition/offset) %v were never handed out again", g, lost)
		}
	}
}

// holds reports whether member m holds records of group g.
func (s *shareSeq) holds(g, m int) bool {
	now := time.Now()
	for p := range int32(sfPartitions) {
		for o := range int64(sfRecords) {
			if s.heldBy(g, p, o, now) == m {
				return true
			}
		}
	}
	return false
}

// shareSeeds are meaningful sequences for the fuzzer to start from.
func shareSeeds() [][]byte {
	op := func(kind, g, m int) byte { return byte(kind | g<<3 | m<<4) }
	fetch := func(g, m, epochKind, mask, maxRecords int, acks bool, specs ...byte) []byte {
		b2 := byte(maxRecords - 1)
		if acks {
			b2 |= 8
		}
		return append([]byte{op(opFetch, g, m), byte(epochKind + 5*mask + 15), b2}, specs...)
	}
	park := func(g, m, epochKind, mask, maxRecords int) []byte {
		return []byte{op(opPark, g, m), byte(epochKind + 5*mask + 15), byte(maxRecords - 1)}
	}
	ack := func(g, m, epochKind, mask int, specs ...byte) []byte {
		return append([]byte{op(opAck, g, m), byte(epochKind + 5*mask + 15)}, specs...)
	}
	// Ack specs: own records (s1%4 == 0) or an arbitrary range, with type t
	// (0 accept, 1 release, 2 reject).
	own := func(t int) []byte { return []byte{byte(t << 4), 0} }
	ownAnd := func(t, first, extra int) []byte { return []byte{byte(3 | t<<4), byte(first + 9*extra)} }
	others := func(t int) []byte { return []byte{byte(1 | t<<4), 0} }
	const accept, release, reject = 0, 1, 2
	wait := []byte{op(opShareHeartbeat, 0, 0), 0x40}
	seq := func(parts ...[]byte) []byte { return slices.Concat(parts...) }
	huge := func(t int) []byte { return []byte{byte(2 | 4 | t<<4), 0} }
	return [][]byte{
		// An acknowledgement of a range of 2^40 offsets.
		seq(fetch(1, 0, epochOpen, 0, 1, false), ack(1, 0, epochNext, 0, huge(accept)...), fetch(1, 0, epochNext, 0, 1, true, huge(release)...)),
		// Join, fetch, accept some, reject the rest, close.
		seq([]byte{op(opShareJoin, 0, 0)}, fetch(0, 0, epochOpen, 0, 3, false), fetch(0, 0, epochNext, 0, 2, true, own(accept)...),
			ack(0, 0, epochNext, 0, own(reject)...), fetch(0, 0, epochFinal, 2, 1, false)),
		// Two members: one acknowledges the other's records, the holder
		// releases them, the other takes them up to the delivery limit.
		seq([]byte{op(opShareJoin, 0, 0), op(opShareJoin, 0, 1)}, fetch(0, 0, epochOpen, 0, 2, false), fetch(0, 1, epochOpen, 0, 2, false),
			ack(0, 1, epochNext, 0, others(accept)...), ack(0, 0, epochNext, 0, own(release)...), fetch(0, 1, epochNext, 0, 4, true, own(release)...),
			fetch(0, 0, epochNext, 0, 4, true, own(release)...), fetch(0, 1, epochNext, 0, 4, false)),
		// Stale epochs: heartbeats and sessions; a session reopened while
		// holding records; a member leaving the group while holding some.
		seq([]byte{op(opShareJoin, 1, 2), op(opShareHeartbeat, 1, 2), 1, op(opShareHeartbeat, 1, 2), 2}, fetch(1, 2, epochOpen, 2, 4, false),
			fetch(1, 2, epochStale, 2, 4, false), ack(1, 2, epochAhead, 1, own(accept)...), fetch(1, 2, epochOpen, 1, 4, false),
			[]byte{op(opShareLeave, 1, 2)}, fetch(1, 0, epochOpen, 2, 4, false), ack(1, 2, epochFinal, 2, own(release)...), fetch(1, 0, epochNext, 2, 4, false)),
		// A partition's acknowledgement with a batch the member holds and one
		// it does not.
		seq(fetch(0, 0, epochOpen, 0, 2, false), ack(0, 0, epochNext, 0, ownAnd(release, 4, 1)...), fetch(0, 1, epochOpen, 0, 4, false)),
		// A member long-polls while another holds every record, and gets them
		// once they are released.
		seq(fetch(1, 1, epochOpen, 0, 4, false), fetch(1, 1, epochNext, 0, 4, false), park(1, 0, epochOpen, 0, 4),
			ack(1, 1, epochNext, 0, own(release)...), fetch(1, 1, epochNext, 0, 4, false), fetch(1, 0, epochNext, 0, 1, false)),
		// A member leaves the group holding records and goes on fetching in
		// its share session while the offsets are reset (partition 0 to
		// offset 2, then the topic's state deleted).
		seq([]byte{op(opShareJoin, 0, 0)}, fetch(0, 0, epochOpen, 2, 4, false), []byte{op(opShareLeave, 0, 0), op(opShareHeartbeat, 0, 1), 0x80 | 3},
			fetch(0, 0, epochNext, 2, 4, true, seq(own(accept), own(accept))...), ack(0, 0, epochNext, 2, seq(own(reject), own(reject))...),
			fetch(0, 1, epochOpen, 2, 4, false), []byte{op(opShareHeartbeat, 0, 1), 0xc0}, fetch(0, 0, epochNext, 2, 4, true, seq(own(release), own(release))...)),
		// Locks expire until the records run out of deliveries (dead-lettered
		// in group 0) while other members take them.
		seq(fetch(0, 0, epochOpen, 2, 4, false), wait, fetch(0, 1, epochOpen, 2, 4, false), fetch(1, 2, epochOpen, 0, 4, false), wait,
			fetch(0, 0, epochNext, 2, 4, false), fetch(1, 0, epochOpen, 0, 4, false)),
	}
}
