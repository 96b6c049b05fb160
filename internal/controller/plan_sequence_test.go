package controller

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/strata-stream/strata/internal/metadata"
)

// The sequence test registers brokers 1..seqMaxBroker; requests also name
// seqUnknownBroker, which never registers.
const (
	seqMaxBroker     = 5
	seqUnknownBroker = 6
)

// seqTopicNames are the names topics are created, deleted and addressed by;
// "g.x" and "g_x" collide, "nosuch" is never created.
var seqTopicNames = []string{"alpha", "beta", "g.x", "g_x", "nosuch"}

// seqActions weights the steps: a name listed twice is drawn twice as often.
var seqActions = []string{
	"alterPartitions", "alterPartitions", "alterPartitions", "alterPartitions",
	"heartbeat", "heartbeat", "heartbeat", "register", "register", "fence", "fence",
	"reassign", "reassign", "electLeaders", "unfence", "unregister",
	"createTopics", "createPartitions", "deleteTopics", "uncleanDuty", "setUnclean", "snapshot",
}

// TestPlanSequence plays random sequences of controller requests against the
// planners, applies what each plan returns as the controller's state machine
// would (encoded, decoded and applied as one Raft entry; a refusal applies
// nothing) and checks after every step the invariants operators and Kafka
// clients rely on: the state of every partition, how it may change from one
// step to the next, broker epochs, and what each planner's doc comment
// promises for its request.
func TestPlanSequence(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := newSeqRun(rt)
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for i := range steps {
			action := rapid.SampledFrom(seqActions).Draw(rt, "action")
			prev := s.img
			s.allow = seqAllow{}
			s.step = fmt.Sprintf("step %d (%s)", i, action)
			s.do(action)
			s.checkState()
			s.checkTransition(prev)
		}
	})
}

// seqRun is one sequence: the committed image plus what the active
// controller keeps in memory about brokers.
type seqRun struct {
	t    *rapid.T
	img  *metadata.Image
	rnd  *rand.ChaCha8 // topic ids, incarnations, directory ids
	down ShuttingDown  // brokers in controlled shutdown (liveness sessions)
	sess map[int32]*seqSession
	// epochs holds every broker epoch handed out, per broker id.
	epochs map[int32][]int64
	// disks holds each broker's data directory id (zero: a build that
	// reports none).
	disks map[int32]metadata.UUID
	step  string
	allow seqAllow
}

// seqSession is the liveness session of a broker's registration epoch.
type seqSession struct {
	epoch          int64
	unfenceOffset  int64 // -1 until known
	shutdownOffset int64
}

// seqAllow says what the current step may do beyond the invariants that
// hold for every step.
type seqAllow struct {
	// unclean: the topics whose partitions the step may give a leader from
	// outside their ISR.
	unclean   func(*metadata.Topic) bool
	isrGrowth bool // a leader's AlterPartition may add ISR members
	replicas  bool // reassignments may change replica sets
	// revert: a cancelled reassignment of a topic that allows unclean
	// elections may restart an ISR none of its original replicas is in at
	// the first of them, as Kafka's PartitionReassignmentRevert, leaderless
	// when no replica is live.
	revert bool
	create bool // topics and partitions may appear
	remove bool // topics may disappear
	// unfenced is the broker an unfence step makes live: PlanUnfenceBroker
	// elects it even while it is in controlled shutdown (the heartbeat never
	// unfences such a broker; only the unused Controller.UnfenceBroker could).
	unfenced int32
}

func uncleanConfigured(t *metadata.Topic) bool { return t.Config.UncleanLeaderElectionEnable }
func uncleanAlways(*metadata.Topic) bool       { return true }

func newSeqRun(rt *rapid.T) *seqRun {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], rapid.Uint64().Draw(rt, "seed"))
	s := &seqRun{
		t: rt, img: metadata.NewImage(), rnd: rand.NewChaCha8(seed),
		down: ShuttingDown{}, sess: map[int32]*seqSession{},
		epochs: map[int32][]int64{}, disks: map[int32]metadata.UUID{},
	}
	s.step = "setup"
	s.allow = seqAllow{create: true}
	n := int32(rapid.IntRange(3, seqMaxBroker).Draw(rt, "brokers"))
	for id := int32(1); id <= n; id++ {
		s.register(id)
	}
	for _, name := range []string{"alpha", "beta"} {
		s.createTopics([]CreateTopic{{Name: name, NumPartitions: 2, ReplicationFactor: 3,
			Configs: s.drawTopicConfigs()}})
	}
	s.checkState()
	return s
}

func (s *seqRun) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s: %s", s.step, fmt.Sprintf(format, args...))
}

func (s *seqRun) uuid() metadata.UUID {
	id, err := metadata.NewUUID(s.rnd)
	if err != nil {
		s.fatalf("NewUUID: %v", err)
	}
	return id
}

func (s *seqRun) downCopy() ShuttingDown { return maps.Clone(s.down) }

// eligible: may lead or join an ISR (registered, unfenced, not shutting down).
func (s *seqRun) eligible(img *metadata.Image, id int32) bool { return img.IsLive(id) && !s.down[id] }

func (s *seqRun) do(action string) {
	switch action {
	case "register":
		s.allow.unclean = uncleanConfigured
		s.register(int32(rapid.IntRange(1, seqMaxBroker).Draw(s.t, "id")))
	case "fence":
		s.allow.unclean = uncleanConfigured
		s.fence()
	case "unfence":
		s.allow.unclean = uncleanConfigured
		s.unfence()
	case "unregister":
		s.allow.unclean = uncleanConfigured
		s.unregister()
	case "heartbeat":
		s.allow.unclean = uncleanConfigured
		s.heartbeat()
	case "alterPartitions":
		s.allow.isrGrowth, s.allow.replicas = true, true
		s.alterPartitions()
	case "electLeaders":
		s.electLeaders()
	case "reassign":
		s.allow.replicas, s.allow.revert, s.allow.unclean = true, true, uncleanConfigured
		s.reassign()
	case "createTopics":
		s.allow.create = true
		s.drawCreateTopics()
	case "createPartitions":
		s.allow.create = true
		s.createPartitions()
	case "deleteTopics":
		s.allow.remove = true
		s.deleteTopics()
	case "uncleanDuty":
		s.allow.unclean = uncleanConfigured
		s.uncleanDuty()
	case "setUnclean":
		s.setUnclean()
	case "snapshot":
		s.snapshot()
	default:
		s.fatalf("unknown action")
	}
}

// commit applies one planned batch as the controller's state machine does:
// encoded, decoded and applied all or nothing as one Raft entry, at the next
// index (or a later one: other entries, such as configuration changes, take
// indexes too). A plan whose records do not apply is a planner bug.
func (s *seqRun) commit(recs []metadata.Record) {
	s.t.Helper()
	if len(recs) == 0 {
		return
	}

	direct, err := metadata.ApplyAll(s.img, recs)
	if err != nil {
		s.fatalf("planned records do not apply: %v\n%s", err, fmtRecords(recs))
	}
	decoded, err := metadata.DecodeBatch(metadata.EncodeBatch(recs))
	if err != nil {
		s.fatalf("planned records do not decode: %v\n%s", err, fmtRecords(recs))
	}
	next, err := metadata.ApplyAll(s.img, decoded)
	if err != nil {
		s.fatalf("decoded records do not apply: %v\n%s", err, fmtRecords(recs))
	}
	if !sameImage(direct, next) {
		s.fatalf("records apply differently after the codec\n%s", fmtRecords(recs))
	}
	gap := uint64(rapid.IntRange(0, 2).Draw(s.t, "offsetGap"))
	s.img = next.WithOffset(s.img.Offset() + 1 + gap)
}

func sameImage(a, b *metadata.Image) bool {
	return bytes.Equal(metadata.EncodeBatch(a.Records()), metadata.EncodeBatch(b.Records()))
}

// refused checks that a refusal carries no records.
func (s *seqRun) refused(what string, recs []metadata.Record, err error) {
	s.t.Helper()
	if err != nil && len(recs) > 0 {
		s.fatalf("%s refused (%v) with %d records", what, err, len(recs))
	}
}

// wantErr checks err against want (nil: success).
func (s *seqRun) wantErr(what string, err, want error) {
	s.t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		s.fatalf("%s: error %v, want %v", what, err, want)
	}
}

// session returns the liveness session of broker id's registration epoch,
// replacing one of another epoch.
func (s *seqRun) session(id int32, epoch int64) *seqSession {
	ss := s.sess[id]
	if ss == nil || ss.epoch != epoch {
		ss = &seqSession{epoch: epoch, unfenceOffset: -1}
		s.sess[id] = ss
	}
	return ss
}

// drawEpoch returns broker id's current epoch or, sometimes, a stale or made
// up one.
func (s *seqRun) drawEpoch(id int32) int64 {
	epoch := int64(1)
	if b := s.img.Broker(id); b != nil {
		epoch = b.Epoch
	}
	if s.chance("otherEpoch", 8) {
		return epoch + int64(rapid.SampledFrom([]int{-1, 1}).Draw(s.t, "epochDelta"))
	}
	return epoch
}

// chance is true one time in n (and shrinks to false).
func (s *seqRun) chance(label string, n int) bool {
	return rapid.IntRange(0, n-1).Draw(s.t, label) == n-1
}

func (s *seqRun) drawBroker(label string) int32 {
	return int32(rapid.IntRange(1, seqUnknownBroker).Draw(s.t, label))
}

// --- brokers ---------------------------------------------------------------

func (s *seqRun) register(id int32) {
	old := s.img.Broker(id)
	req := RegisterBroker{ID: id, Host: "127.0.0.1", Port: 9000 + id}
	sameProcess := old != nil && !s.chance("newIncarnation", 2)
	disk := s.disks[id]
	if sameProcess {
		req.Incarnation = old.Incarnation
	} else {
		req.Incarnation = s.uuid()
		// A new process may come up on a new, empty disk.
		if disk.IsZero() || s.chance("newDisk", 4) {
			disk = s.uuid()
		}
	}
	req.DirectoryID = disk
	if s.chance("noDirectory", 8) {
		req.DirectoryID = metadata.UUID{} // a build that reports none
	}
	if old != nil && !s.chance("otherRack", 4) {
		req.Rack = old.Rack
	} else {
		req.Rack = rapid.SampledFrom([]string{"", "r1", "r2"}).Draw(s.t, "rack")
	}
	bad := s.chance("badAddress", 16)
	if bad {
		req.Port = 0
	}
	liveSession := rapid.Bool().Draw(s.t, "liveSession")
	prev := s.img
	recs, epoch, err := PlanRegisterBroker(s.img, req, liveSession, s.downCopy())
	s.t.Logf("%s: register %d incarnation same=%v dir %v rack %q liveSession=%v: %d records, epoch %d, %v",
		s.step, id, sameProcess, req.DirectoryID, req.Rack, liveSession, len(recs), epoch, err)
	s.refused("registration", recs, err)
	switch {
	case bad:
		s.wantErr("registration with port 0", err, metadata.ErrInvalidRequest)
		return
	case old != nil && sameProcess && !old.Fenced && old.Rack == req.Rack:
		s.wantErr("retried registration", err, nil)
		if len(recs) != 0 || epoch != old.Epoch {
			s.fatalf("a retry changed something: %d records, epoch %d (was %d)", len(recs), epoch, old.Epoch)
		}
	case old != nil && !sameProcess && !old.Fenced && liveSession:
		s.wantErr("registration over a live session", err, metadata.ErrDuplicateBrokerRegistration)
		return
	default:
		s.wantErr("registration", err, nil)
		for _, e := range s.epochs[id] {
			if epoch <= e {
				s.fatalf("broker %d registered at epoch %d after epoch %d (epochs %v)", id, epoch, e, s.epochs[id])
			}
		}
		if epoch <= int64(prev.Offset()) {
			s.fatalf("broker %d epoch %d at or below the offset %d it was planned at", id, epoch, prev.Offset())
		}
		s.epochs[id] = append(s.epochs[id], epoch)
		s.commit(recs)
	}
	s.disks[id] = disk
	b := s.img.Broker(id)
	if b == nil || b.Epoch != epoch || b.Fenced || b.Incarnation != req.Incarnation {
		s.fatalf("broker %d after registering at epoch %d: %+v", id, epoch, b)
	}
	if old == nil || old.Epoch != epoch {
		delete(s.down, id) // a new registration starts a new session
		s.session(id, epoch)
	}
	newProcess := old != nil && !sameProcess && !old.Fenced
	lastDir := prev.FormerDirectory(id) // of a registration UnregisterBroker removed
	if old != nil {
		lastDir = old.DirectoryID
	}
	lostDisk := !lastDir.IsZero() && !req.DirectoryID.IsZero() && lastDir != req.DirectoryID
	s.eachPartition(prev, func(t *metadata.Topic, p, cur *metadata.Partition) {
		if cur == nil || !slices.Contains(cur.ISR, id) {
			return
		}
		unclean := t.Config.UncleanLeaderElectionEnable && cur.Leader == id && slices.Equal(cur.ISR, []int32{id})
		switch {
		case lostDisk && !unclean:
			s.fatalf("broker %d came back with an empty disk but is in the isr of %s", id, fmtPartition(t, cur))
		case newProcess && len(p.ISR) > 1 && !unclean:
			s.fatalf("broker %d restarted but kept its place in the isr of %s (was %v)", id, fmtPartition(t, cur), p.ISR)
		}
	})
	if newProcess {
		s.eachPartition(prev, func(t *metadata.Topic, p, cur *metadata.Partition) {
			if p.Leader == id && cur != nil && cur.LeaderEpoch == p.LeaderEpoch {
				s.fatalf("broker %d restarted but still leads %s at leader epoch %d", id, fmtPartition(t, cur), p.LeaderEpoch)
			}
		})
	}
	// The controller records the data directory in a proposal of its own.
	recs, err = PlanBrokerDirectory(s.img, id, epoch, req.DirectoryID)
	s.wantErr("PlanBrokerDirectory", err, nil)
	s.commit(recs)
}

func (s *seqRun) fence() {
	id := s.drawBroker("id")
	epoch := s.drawEpoch(id)
	b := s.img.Broker(id)
	recs, err := PlanFenceBroker(s.img, id, epoch, s.downCopy())
	s.t.Logf("%s: fence %d epoch %d: %d records, %v", s.step, id, epoch, len(recs), err)
	s.refused("fence", recs, err)
	switch {
	case b == nil:
		s.wantErr("fence of an unknown broker", err, metadata.ErrUnknownBroker)
	case b.Epoch != epoch:
		s.wantErr("fence at a stale epoch", err, metadata.ErrStaleBrokerEpoch)
	case b.Fenced:
		s.wantErr("fence of a fenced broker", err, nil)
		if len(recs) > 0 {
			s.fatalf("fencing a fenced broker planned %d records", len(recs))
		}
	default:
		s.wantErr("fence", err, nil)
		s.commit(recs)
		s.session(id, epoch).unfenceOffset = int64(s.img.Offset())
		s.checkLeftBroker(id)
	}
}

func (s *seqRun) unfence() {
	id := s.drawBroker("id")
	s.allow.unfenced = id
	epoch := s.drawEpoch(id)
	b := s.img.Broker(id)
	recs, err := PlanUnfenceBroker(s.img, id, epoch, s.downCopy())
	s.t.Logf("%s: unfence %d epoch %d: %d records, %v", s.step, id, epoch, len(recs), err)
	s.refused("unfence", recs, err)
	switch {
	case b == nil:
		s.wantErr("unfence of an unknown broker", err, metadata.ErrUnknownBroker)
	case b.Epoch != epoch:
		s.wantErr("unfence at a stale epoch", err, metadata.ErrStaleBrokerEpoch)
	case !b.Fenced:
		s.wantErr("unfence of a live broker", err, nil)
		if len(recs) > 0 {
			s.fatalf("unfencing a live broker planned %d records", len(recs))
		}
	default:
		s.wantErr("unfence", err, nil)
		s.commit(recs)
		if !s.img.IsLive(id) {
			s.fatalf("broker %d still fenced", id)
		}
	}
}

func (s *seqRun) unregister() {
	id := s.drawBroker("id")
	b := s.img.Broker(id)
	recs, err := PlanUnregisterBroker(s.img, id, s.downCopy())
	s.t.Logf("%s: unregister %d: %d records, %v", s.step, id, len(recs), err)
	s.refused("unregistration", recs, err)
	if b == nil {
		s.wantErr("unregistration of an unknown broker", err, metadata.ErrBrokerIDNotRegistered)
		return
	}
	s.wantErr("unregistration", err, nil)
	s.commit(recs)
	if s.img.Broker(id) != nil {
		s.fatalf("broker %d still registered", id)
	}
	s.checkLeftBroker(id)
}

// checkLeftBroker checks that broker id, just fenced or unregistered, leads
// nothing and is in no ISR but as its last member.
func (s *seqRun) checkLeftBroker(id int32) {
	s.eachPartition(s.img, func(t *metadata.Topic, p, _ *metadata.Partition) {
		if p.Leader == id || slices.Contains(p.ISR, id) && len(p.ISR) > 1 {
			s.fatalf("broker %d left, but %s", id, fmtPartition(t, p))
		}
	})
}

func (s *seqRun) heartbeat() {
	id := s.drawBroker("id")
	req := HeartbeatRequest{
		BrokerID: id, BrokerEpoch: s.drawEpoch(id),
		WantShutdown: s.chance("wantShutdown", 5),
	}
	off := int64(s.img.Offset())
	req.MetadataOffset = off
	if s.chance("behind", 4) {
		req.MetadataOffset = rapid.Int64Range(0, off).Draw(s.t, "metadataOffset")
	}
	b := s.img.Broker(id)
	valid := b != nil && b.Epoch == req.BrokerEpoch
	var st HeartbeatState
	var ss *seqSession
	if valid { // as liveness.heartbeat, which runs once the epoch checks out
		ss = s.session(id, b.Epoch)
		if req.WantShutdown {
			s.down[id] = true
		}
		if b.Fenced && ss.unfenceOffset < 0 {
			ss.unfenceOffset = off
		}
		st = HeartbeatState{ShuttingDown: s.downCopy(), UnfenceOffset: ss.unfenceOffset, ShutdownOffset: ss.shutdownOffset}
	}
	prev := s.img
	recs, res, err := PlanBrokerHeartbeat(s.img, req, st)
	s.t.Logf("%s: heartbeat %d epoch %d offset %d shutdown=%v (down %v, state %+v): %d records, %+v, %v",
		s.step, id, req.BrokerEpoch, req.MetadataOffset, req.WantShutdown, s.down, st, len(recs), res, err)
	s.refused("heartbeat", recs, err)
	if !valid {
		if err == nil {
			s.fatalf("heartbeat of an unknown or stale registration accepted")
		}
		return
	}
	s.wantErr("heartbeat", err, nil)
	shutting := s.down[id]
	var want HeartbeatResult
	wantRecs := false
	switch {
	case b.Fenced && shutting:
		want = HeartbeatResult{Fenced: true, ShouldShutdown: true}
	case b.Fenced && req.MetadataOffset < st.UnfenceOffset:
		want = HeartbeatResult{Fenced: true}
	case b.Fenced:
		wantRecs = true
	case !shutting:
	case !b.InControlledShutdown:
		wantRecs = true // the mark
	case !s.handedOff(prev, id):
		wantRecs = true
	case req.MetadataOffset < st.ShutdownOffset:
	default:
		want, wantRecs = HeartbeatResult{Fenced: true, ShouldShutdown: true}, true
	}
	if res != want || wantRecs != (len(recs) > 0) {
		s.fatalf("heartbeat answered %+v with %d records, want %+v (records: %v)", res, len(recs), want, wantRecs)
	}
	s.commit(recs)
	switch {
	case len(recs) == 0:
	case res.Fenced:
		ss.unfenceOffset = int64(s.img.Offset())
	case shutting && b.InControlledShutdown: // a hand-off, not the mark (as BrokerHeartbeat notes it)
		ss.shutdownOffset = int64(s.img.Offset())
	}
	switch {
	case b.Fenced && !shutting && wantRecs:
		if !s.img.IsLive(id) {
			s.fatalf("heartbeat did not unfence broker %d", id)
		}
	case res.ShouldShutdown && wantRecs:
		if s.img.IsLive(id) {
			s.fatalf("broker %d told to shut down but not fenced", id)
		}
		s.checkLeftBroker(id)
	case shutting && wantRecs && !b.InControlledShutdown:
		if len(recs) != 1 || !s.img.InControlledShutdown(id) {
			s.fatalf("broker %d entering controlled shutdown: %d records, marked %v, want the mark alone",
				id, len(recs), s.img.InControlledShutdown(id))
		}
	case shutting && wantRecs:
		// One hand-off moves everything that can move.
		if !s.handedOff(s.img, id) {
			s.fatalf("broker %d still has something to hand off after a hand-off", id)
		}
	}
}

// handedOff reports whether broker id, in controlled shutdown, has nothing
// left to hand off in img: it is in an ISR only as its last member or as the
// leader of a partition without another eligible ISR member.
func (s *seqRun) handedOff(img *metadata.Image, id int32) bool {
	done := true
	s.eachPartition(img, func(_ *metadata.Topic, p, _ *metadata.Partition) {
		if !slices.Contains(p.ISR, id) || slices.Equal(p.ISR, []int32{id}) {
			return
		}
		if p.Leader != id || slices.ContainsFunc(p.ISR, func(b int32) bool { return b != id && s.eligible(img, b) }) {
			done = false
		}
	})
	return done
}

// --- partitions ------------------------------------------------------------

// drawTopic picks a topic name: mostly an existing topic's.
func (s *seqRun) drawTopic() string {
	var names []string
	for _, t := range s.img.Topics() {
		names = append(names, t.Name)
	}
	if len(names) == 0 || s.chance("anyTopic", 8) {
		return rapid.SampledFrom(seqTopicNames).Draw(s.t, "topic")
	}
	return rapid.SampledFrom(names).Draw(s.t, "topic")
}

// drawPartition picks a partition: mostly an existing one, else one of an
// unknown topic or an unknown partition index.
func (s *seqRun) drawPartition() (name string, index int32) {
	name = s.drawTopic()
	n := int32(0)
	if t := s.img.Topic(name); t != nil {
		n = int32(len(t.Partitions))
	}
	if n > 0 && !s.chance("badPartition", 10) {
		return name, int32(rapid.IntRange(0, int(n)-1).Draw(s.t, "partition"))
	}
	return name, int32(rapid.IntRange(-1, 3).Draw(s.t, "partition"))
}

// drawISR proposes a new ISR for p as its leader would (shrinking or
// expanding by one), or an arbitrary one.
func (s *seqRun) drawISR(p *metadata.Partition) []int32 {
	isr := slices.Clone(p.ISR)
	switch rapid.SampledFrom([]string{"shrink", "shrink", "expand", "expand", "expand", "same", "resign", "random"}).Draw(s.t, "isrChange") {
	case "shrink":
		var others []int32
		for _, id := range isr {
			if id != p.Leader {
				others = append(others, id)
			}
		}
		if len(others) > 0 {
			drop := rapid.SampledFrom(others).Draw(s.t, "drop")
			isr = slices.DeleteFunc(isr, func(id int32) bool { return id == drop })
		}
	case "expand":
		var outside []int32
		for _, id := range p.Replicas {
			if !slices.Contains(isr, id) {
				outside = append(outside, id)
			}
		}
		if len(outside) > 0 {
			isr = append(isr, rapid.SampledFrom(outside).Draw(s.t, "add"))
		}
	case "resign":
		isr = slices.DeleteFunc(isr, func(id int32) bool { return id == p.Leader })
	case "random":
		isr = rapid.SliceOfN(rapid.Int32Range(0, seqUnknownBroker), 0, 4).Draw(s.t, "randomISR")
	}
	return isr
}

// seqAlterWant is what the doc of PlanAlterPartition says about one change.
func (s *seqRun) alterWant(img *metadata.Image, req AlterPartitionRequest) error {
	t := img.TopicByID(req.TopicID)
	if t == nil {
		return metadata.ErrUnknownTopicID
	}
	if req.Partition < 0 || int(req.Partition) >= len(t.Partitions) {
		return metadata.ErrUnknownTopic
	}
	p := t.Partitions[req.Partition]
	switch {
	case req.LeaderEpoch > p.LeaderEpoch || req.PartitionEpoch > p.PartitionEpoch:
		return ErrNotController
	case req.LeaderEpoch < p.LeaderEpoch:
		return metadata.ErrFencedLeaderEpoch
	case req.BrokerID != p.Leader:
		return metadata.ErrInvalidRequest
	case req.PartitionEpoch < p.PartitionEpoch:
		return metadata.ErrStalePartitionEpoch
	}
	for i, id := range req.NewISR {
		if !slices.Contains(p.Replicas, id) || slices.Contains(req.NewISR[:i], id) {
			return metadata.ErrInvalidRequest
		}
	}
	if len(req.NewISR) == 0 {
		return metadata.ErrInvalidRequest
	}
	for i, id := range req.NewISR {
		b := img.Broker(id)
		if b == nil || b.Fenced || s.down[id] && id != p.Leader ||
			i < len(req.NewISRBrokerEpochs) && req.NewISRBrokerEpochs[i] != -1 && req.NewISRBrokerEpochs[i] != b.Epoch {
			return metadata.ErrIneligibleReplica
		}
	}
	if !slices.Contains(req.NewISR, p.Leader) && slices.ContainsFunc(req.NewISR, func(id int32) bool { return !slices.Contains(p.ISR, id) }) {
		return metadata.ErrInvalidRequest
	}
	return nil
}

func (s *seqRun) alterPartitions() {
	n := 1
	if s.chance("moreChanges", 3) {
		n = rapid.IntRange(2, 3).Draw(s.t, "changes")
	}
	var reqs []AlterPartitionRequest
	from := int32(-1)
	for range n {
		name, index := s.drawPartition()
		req := AlterPartitionRequest{Partition: index}
		p := s.img.Partition(name, index)
		if t := s.img.Topic(name); t != nil {
			req.TopicID = t.ID
		} else {
			req.TopicID = s.uuid()
		}
		if p == nil {
			p = &metadata.Partition{Leader: metadata.NoLeader, Replicas: []int32{1, 2, 3}}
		}
		if from == -1 { // one request comes from one broker: the first partition's leader, mostly
			from = p.Leader
			if from == metadata.NoLeader || s.chance("foreignBroker", 10) {
				from = s.drawBroker("from")
			}
		}
		req.BrokerID, req.BrokerEpoch = from, s.drawEpoch(from)
		req.LeaderEpoch, req.PartitionEpoch = p.LeaderEpoch, p.PartitionEpoch
		if s.chance("otherLeaderEpoch", 10) {
			req.LeaderEpoch += int32(rapid.SampledFrom([]int{-1, 1}).Draw(s.t, "leaderEpochDelta"))
		}
		if s.chance("otherPartitionEpoch", 10) {
			req.PartitionEpoch += int32(rapid.SampledFrom([]int{-1, 1}).Draw(s.t, "partitionEpochDelta"))
		}
		req.NewISR = s.drawISR(p)
		switch rapid.IntRange(0, 3).Draw(s.t, "isrEpochs") {
		case 1: // as the leader saw them fetch: their current epochs
			for _, id := range req.NewISR {
				e := int64(-1)
				if b := s.img.Broker(id); b != nil {
					e = b.Epoch
				}
				req.NewISRBrokerEpochs = append(req.NewISRBrokerEpochs, e)
			}
		case 2: // one member fetched with another registration's epoch
			for range req.NewISR {
				req.NewISRBrokerEpochs = append(req.NewISRBrokerEpochs, -1)
			}
			if len(req.NewISR) > 0 {
				i := rapid.IntRange(0, len(req.NewISR)-1).Draw(s.t, "staleMember")
				req.NewISRBrokerEpochs[i] = s.drawEpoch(req.NewISR[i])
			}
		}
		reqs = append(reqs, req)
	}
	prev := s.img
	down := s.downCopy()
	recs, results, err := PlanAlterPartitions(s.img, reqs, down)
	s.t.Logf("%s: alter partitions %+v (down %v): %d records, %v", s.step, reqs, down, len(recs), err)
	s.refused("AlterPartition", recs, err)
	for _, req := range reqs {
		if b := prev.Broker(req.BrokerID); b == nil || b.Epoch != req.BrokerEpoch {
			s.wantErr("AlterPartition from an unknown or stale broker", err, metadata.ErrStaleBrokerEpoch)
			return
		}
	}
	s.wantErr("AlterPartition", err, nil)
	if len(results) != len(reqs) {
		s.fatalf("%d results for %d changes", len(results), len(reqs))
	}
	type key struct {
		topic metadata.UUID
		index int32
	}
	seen := map[key]bool{}
	for i, req := range reqs {
		want := s.alterWant(prev, req)
		if k := (key{req.TopicID, req.Partition}); seen[k] {
			want = metadata.ErrInvalidRequest
		} else {
			seen[k] = true
		}
		if want == nil && errors.Is(results[i].Err, metadata.ErrNewLeaderElected) {
			want = metadata.ErrNewLeaderElected // applied: checked below
		}
		s.wantErr(fmt.Sprintf("change %d %+v", i, req), results[i].Err, want)
	}
	s.commit(recs)
	for i, req := range reqs {
		res := results[i]
		t := s.img.TopicByID(req.TopicID)
		newLeader := errors.Is(res.Err, metadata.ErrNewLeaderElected)
		if res.Err != nil && !newLeader {
			if t != nil && int(req.Partition) < len(t.Partitions) && req.Partition >= 0 &&
				slices.IndexFunc(reqs[:i], func(r AlterPartitionRequest) bool { return r.TopicID == req.TopicID && r.Partition == req.Partition }) < 0 &&
				!samePartition(t.Partitions[req.Partition], prev.TopicByID(req.TopicID).Partitions[req.Partition]) {
				s.fatalf("refused change %d moved %s", i, fmtPartition(t, t.Partitions[req.Partition]))
			}
			continue
		}
		p, cur := prev.TopicByID(req.TopicID).Partitions[req.Partition], t.Partitions[req.Partition]
		if !samePartition(res.Partition, cur) {
			s.fatalf("change %d answered %s, but the image holds %s", i, fmtPartition(t, res.Partition), fmtPartition(t, cur))
		}
		completed := p.Reassigning() && !cur.Reassigning()
		// NEW_LEADER_ELECTED: a completion took the leadership from the
		// sender, which had not resigned; the answer is the partition otherwise.
		if wantNew := completed && slices.Contains(req.NewISR, p.Leader) && cur.Leader != p.Leader; newLeader != wantNew {
			s.fatalf("change %d %+v left %s answered %v; NEW_LEADER_ELECTED wanted: %v", i, req, fmtPartition(t, cur), res.Err, wantNew)
		}
		isr := slices.Clone(req.NewISR)
		if completed {
			isr = slices.DeleteFunc(isr, func(id int32) bool { return !slices.Contains(p.TargetReplicas(), id) })
			if !slices.Equal(cur.Replicas, p.TargetReplicas()) {
				s.fatalf("completed reassignment of %s, target was %v", fmtPartition(t, cur), p.TargetReplicas())
			}
		}
		if !sameSet(cur.ISR, isr) {
			s.fatalf("change %d to isr %v left %s", i, req.NewISR, fmtPartition(t, cur))
		}
		if !completed && p.Reassigning() && !slices.ContainsFunc(p.TargetReplicas(), func(id int32) bool { return !slices.Contains(cur.ISR, id) }) {
			s.fatalf("isr %v holds the whole target of %s but the reassignment did not complete", cur.ISR, fmtPartition(t, cur))
		}
		leader, leaderEpoch := p.Leader, p.LeaderEpoch
		if !slices.Contains(req.NewISR, p.Leader) { // resigned
			leader, leaderEpoch = metadata.NoLeader, leaderEpoch+1
			for _, id := range p.Replicas {
				if slices.Contains(req.NewISR, id) && s.eligible(prev, id) {
					leader = id
					break
				}
			}
		}
		if !completed && (cur.Leader != leader || cur.LeaderEpoch != leaderEpoch) {
			s.fatalf("change %d %+v left %s, want leader %d epoch %d", i, req, fmtPartition(t, cur), leader, leaderEpoch)
		}
	}
}

// electWant runs the election the doc of PlanElectLeaders describes for
// one partition, on st (the partition as earlier ones in the request left it).
func (s *seqRun) electWant(p *metadata.Partition, st *seqPart, typ ElectionType) error {
	if typ == ElectPreferred {
		pref := p.Replicas[0]
		switch {
		case st.leader == pref:
			return metadata.ErrElectionNotNeeded
		case !slices.Contains(st.isr, pref) || !s.eligible(s.img, pref):
			return metadata.ErrPreferredLeaderNotAvailable
		}
		st.leader, st.leaderEpoch = pref, st.leaderEpoch+1
		return nil
	}
	if st.leader != metadata.NoLeader {
		return metadata.ErrElectionNotNeeded
	}
	for _, id := range p.Replicas {
		if slices.Contains(st.isr, id) && s.eligible(s.img, id) {
			st.leader, st.leaderEpoch = id, st.leaderEpoch+1
			return nil
		}
	}
	for _, id := range p.Replicas {
		if s.eligible(s.img, id) {
			st.leader, st.leaderEpoch, st.isr = id, st.leaderEpoch+1, []int32{id}
			// The same batch completes a reassignment whose whole target is
			// the new leader (electionChange); removing replicas, it moves
			// the leader epoch once more.
			if slices.Equal(p.TargetReplicas(), []int32{id}) && len(p.Removing) > 0 {
				st.leaderEpoch++
			}
			return nil
		}
	}
	return metadata.ErrEligibleLeadersNotAvailable
}

// seqPart is the expected state of one partition.
type seqPart struct {
	replicas, adding, removing, isr []int32
	leader, leaderEpoch             int32
	partitionEpoch                  int32
}

func seqPartOf(p *metadata.Partition) *seqPart {
	return &seqPart{
		replicas: slices.Clone(p.Replicas), adding: slices.Clone(p.Adding), removing: slices.Clone(p.Removing),
		isr: slices.Clone(p.ISR), leader: p.Leader, leaderEpoch: p.LeaderEpoch, partitionEpoch: p.PartitionEpoch,
	}
}

func (s *seqRun) electLeaders() {
	typ := ElectionType(rapid.IntRange(0, 1).Draw(s.t, "electionType"))
	if typ == ElectUnclean {
		s.allow.unclean = uncleanAlways
	}
	var parts []TopicPartitionRef
	if rapid.IntRange(0, 2).Draw(s.t, "allPartitions") > 0 {
		for range rapid.IntRange(1, 3).Draw(s.t, "refs") {
			name, index := s.drawPartition()
			parts = append(parts, TopicPartitionRef{Topic: name, Partition: index})
		}
	}
	recs, results := PlanElectLeaders(s.img, parts, typ, s.downCopy())
	s.t.Logf("%s: elect type %d %v (down %v): %d records, %+v", s.step, typ, parts, s.down, len(recs), results)
	want := map[TopicPartitionRef]*seqPart{}
	var wantResults []ElectResult
	refs := parts
	if parts == nil {
		s.eachPartition(s.img, func(t *metadata.Topic, p, _ *metadata.Partition) {
			refs = append(refs, TopicPartitionRef{Topic: t.Name, Partition: p.Index})
		})
	}
	for _, ref := range refs {
		p := s.img.Partition(ref.Topic, ref.Partition)
		if p == nil {
			wantResults = append(wantResults, ElectResult{ref.Topic, ref.Partition, metadata.ErrUnknownTopic})
			continue
		}
		st := want[ref]
		if st == nil {
			st = seqPartOf(p)
			want[ref] = st
		}
		err := s.electWant(p, st, typ)
		wantResults = append(wantResults, ElectResult{ref.Topic, ref.Partition, err})
	}
	if len(results) != len(wantResults) {
		s.fatalf("election results %+v, want %+v", results, wantResults)
	}
	for i, r := range results {
		w := wantResults[i]
		if r.Topic != w.Topic || r.Partition != w.Partition {
			s.fatalf("election result %d for %s-%d, want %s-%d", i, r.Topic, r.Partition, w.Topic, w.Partition)
		}
		s.wantErr(fmt.Sprintf("election of %s-%d", r.Topic, r.Partition), r.Err, w.Err)
	}
	s.commit(recs)
	for ref, st := range want {
		p := s.img.Partition(ref.Topic, ref.Partition)
		if p.Leader != st.leader || p.LeaderEpoch != st.leaderEpoch || !slices.Equal(p.ISR, st.isr) {
			s.fatalf("after the election %s, want leader %d epoch %d isr %v",
				fmtPartition(s.img.Topic(ref.Topic), p), st.leader, st.leaderEpoch, st.isr)
		}
	}
}

// reassignWant applies one request of PlanAlterReassignments to st as its doc
// describes, against img (for brokers) and the current down.
func (s *seqRun) reassignWant(img *metadata.Image, st *seqPart, req Reassignment) error {
	reassigning := len(st.adding) > 0 || len(st.removing) > 0
	original := minus(st.replicas, st.adding)
	if req.Replicas == nil {
		if !reassigning {
			return metadata.ErrNoReassignmentInProgress
		}
		return s.completeWant(img, st, original, img.Topic(req.Topic).Config.UncleanLeaderElectionEnable)
	}
	target := req.Replicas
	if len(target) == 0 {
		return metadata.ErrInvalidReplicaAssignment
	}
	for i, id := range target {
		if img.Broker(id) == nil || slices.Contains(target[:i], id) {
			return metadata.ErrInvalidReplicaAssignment
		}
	}
	if req.KeepReplicationFactor && len(target) != len(original) {
		return metadata.ErrInvalidReplicationFactor
	}
	if !reassigning && slices.Equal(target, st.replicas) {
		return nil
	}
	adding, removing := minus(target, st.replicas), minus(st.replicas, target)
	st.replicas, st.adding, st.removing = append(slices.Clone(target), removing...), adding, removing
	st.partitionEpoch++
	if (len(adding) > 0 || len(removing) > 0) && len(minus(target, st.isr)) == 0 {
		return s.completeWant(img, st, target, false)
	}
	return nil
}

// completeWant ends st's reassignment at the replica set final. A cancel
// (unclean: the topic allows unclean elections) whose original replicas have
// all left the ISR restarts the ISR at the first of them, as Kafka's
// PartitionReassignmentRevert, and elects as an unclean election would.
func (s *seqRun) completeWant(img *metadata.Image, st *seqPart, final []int32, unclean bool) error {
	isr := slices.DeleteFunc(slices.Clone(st.isr), func(id int32) bool { return !slices.Contains(final, id) })
	uncleanRevert := len(isr) == 0 && unclean
	switch {
	case uncleanRevert:
		isr = final[:1]
	case len(isr) == 0:
		return metadata.ErrInvalidReplicaAssignment
	}
	if len(minus(st.replicas, final)) > 0 { // a replica leaves: the leader epoch moves on
		st.leaderEpoch++
	}
	if !slices.Contains(isr, st.leader) {
		st.leader = metadata.NoLeader
		for _, id := range final {
			if slices.Contains(isr, id) && s.eligible(img, id) {
				st.leader = id
				break
			}
		}
		if st.leader == metadata.NoLeader && uncleanRevert {
			for _, id := range final {
				if s.eligible(img, id) {
					st.leader, isr = id, []int32{id}
					break
				}
			}
		}
	}
	st.replicas, st.adding, st.removing, st.isr = slices.Clone(final), nil, nil, isr
	st.partitionEpoch++
	return nil
}

// minus returns a without the members of b, in a's order.
func minus(a, b []int32) []int32 {
	var out []int32
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}

func (s *seqRun) reassign() {
	var reqs []Reassignment
	for range rapid.IntRange(1, 2).Draw(s.t, "reassignments") {
		name, index := s.drawPartition()
		req := Reassignment{Topic: name, Partition: index, KeepReplicationFactor: s.chance("keepRF", 4)}
		if !s.chance("cancel", 4) {
			req.Replicas = []int32{}
			if !s.chance("emptyTarget", 16) {
				req.Replicas = s.drawReplicas(rapid.IntRange(1, 4).Draw(s.t, "targetSize"))
			}
		}
		reqs = append(reqs, req)
	}
	prev := s.img
	recs, errs := PlanAlterReassignments(s.img, reqs, s.downCopy())
	s.t.Logf("%s: reassign %+v (down %v): %d records, %v", s.step, reqs, s.down, len(recs), errs)
	want := map[TopicPartitionRef]*seqPart{}
	for i, req := range reqs {
		ref := TopicPartitionRef{Topic: req.Topic, Partition: req.Partition}
		p := prev.Partition(ref.Topic, ref.Partition)
		if p == nil {
			s.wantErr("reassignment of an unknown partition", errs[i], metadata.ErrUnknownTopic)
			continue
		}
		st := want[ref]
		if st == nil {
			st = seqPartOf(p)
		}
		next := *st
		err := s.reassignWant(prev, &next, req)
		s.wantErr(fmt.Sprintf("reassignment %d %+v of %s", i, req, fmtPartition(prev.Topic(req.Topic), p)), errs[i], err)
		if err == nil {
			want[ref] = &next
		} else if want[ref] == nil {
			want[ref] = st
		}
	}
	s.commit(recs)
	for ref, st := range want {
		t := s.img.Topic(ref.Topic)
		p := t.Partitions[ref.Partition]
		if !slices.Equal(p.Replicas, st.replicas) || !sameSet(p.Adding, st.adding) || !sameSet(p.Removing, st.removing) ||
			!sameSet(p.ISR, st.isr) || p.Leader != st.leader || p.LeaderEpoch != st.leaderEpoch || p.PartitionEpoch != st.partitionEpoch {
			s.fatalf("after the reassignment %s, want %+v", fmtPartition(t, p), *st)
		}
	}
}

// --- topics ----------------------------------------------------------------

func (s *seqRun) drawTopicConfigs() map[string]string {
	if s.chance("unclean", 3) {
		return map[string]string{"unclean.leader.election.enable": "true"}
	}
	return nil
}

// drawAssignment draws a manual assignment of n partitions with rf replicas
// each (sometimes naming an unknown broker or one twice).
func (s *seqRun) drawAssignment(n, rf int) [][]int32 {
	out := make([][]int32, n)
	for i := range out {
		out[i] = s.drawReplicas(rf)
	}
	return out
}

// drawReplicas draws n distinct brokers, sometimes with one repeated or
// unknown.
func (s *seqRun) drawReplicas(n int) []int32 {
	ids := rapid.Permutation([]int32{1, 2, 3, 4, 5}).Draw(s.t, "replicas")[:min(n, seqMaxBroker)]
	if s.chance("badReplica", 10) {
		ids[rapid.IntRange(0, len(ids)-1).Draw(s.t, "badIndex")] = rapid.SampledFrom([]int32{1, seqUnknownBroker}).Draw(s.t, "badID")
	}
	return ids
}

func (s *seqRun) drawCreateTopics() {
	var reqs []CreateTopic
	for range rapid.IntRange(1, 2).Draw(s.t, "topics") {
		req := CreateTopic{
			Name:              rapid.SampledFrom(seqTopicNames[:4]).Draw(s.t, "name"),
			NumPartitions:     int32(rapid.SampledFrom([]int{-1, 1, 2, 3, 0}).Draw(s.t, "numPartitions")),
			ReplicationFactor: int16(rapid.SampledFrom([]int{-1, 1, 2, 3, 3, 6}).Draw(s.t, "replicationFactor")),
			Configs:           s.drawTopicConfigs(),
		}
		if s.chance("manual", 4) {
			req.Assignment = inOrder(s.drawAssignment(rapid.IntRange(1, 3).Draw(s.t, "partitions"), rapid.IntRange(1, 3).Draw(s.t, "rf"))...)
			req.NumPartitions, req.ReplicationFactor = -1, -1
		}
		reqs = append(reqs, req)
	}
	s.createTopics(reqs)
}

func (s *seqRun) createTopics(reqs []CreateTopic) {
	prev := s.img
	recs, results := PlanCreateTopics(s.img, reqs, 2, s.rnd, s.downCopy(), true)
	s.t.Logf("%s: create topics %+v: %d records", s.step, reqs, len(recs))
	s.commit(recs)
	for i, res := range results {
		t := s.img.Topic(res.Name)
		if res.Err != nil {
			named := 0
			for _, r := range reqs {
				if r.Name == res.Name {
					named++
				}
			}
			if prev.Topic(res.Name) == nil && t != nil && named == 1 {
				s.fatalf("topic %q created although refused: %v", res.Name, res.Err)
			}
			if prev.Topic(reqs[i].Name) != nil && named == 1 {
				s.wantErr("creating an existing topic", res.Err, metadata.ErrTopicExists)
			}
			continue
		}
		if prev.Topic(res.Name) != nil || t == nil || t.ID != res.ID || len(t.Partitions) != int(res.NumPartitions) {
			s.fatalf("topic %q created as %+v, image has %+v", res.Name, res, t)
		}
		s.checkNewPartitions(t, 0)
	}
}

// checkNewPartitions checks topic t's partitions from index first on, just
// created: the ISR is the eligible replicas (live, not shutting down) and the
// leader the first of them (partitionRecords), at epoch 0; a replica placed
// automatically is never one shutting down.
func (s *seqRun) checkNewPartitions(t *metadata.Topic, first int) {
	rf := len(t.Partitions[0].Replicas)
	for _, p := range t.Partitions[first:] {
		live := slices.DeleteFunc(slices.Clone(p.Replicas), func(id int32) bool { return !s.eligible(s.img, id) })
		leader := metadata.NoLeader
		if len(live) > 0 {
			leader = live[0]
		}
		if len(p.Replicas) != rf || !slices.Equal(p.ISR, live) || p.Leader != leader ||
			p.LeaderEpoch != 0 || p.PartitionEpoch != 0 || len(live) == 0 {
			s.fatalf("new partition %s (replication factor %d)", fmtPartition(t, p), rf)
		}
	}
}

func (s *seqRun) createPartitions() {
	name := s.drawTopic()
	have := 0
	if t := s.img.Topic(name); t != nil {
		have = len(t.Partitions)
	}
	req := CreatePartitions{Topic: name, Count: int32(have + rapid.IntRange(-1, 2).Draw(s.t, "more"))}
	if req.Count > int32(have) && s.chance("manual", 3) {
		req.Assignment = s.drawAssignment(int(req.Count)-have, rapid.IntRange(1, 3).Draw(s.t, "rf"))
	}
	prev := s.img
	recs, results := PlanCreatePartitions(s.img, []CreatePartitions{req}, s.downCopy())
	s.t.Logf("%s: create partitions %+v: %d records, %+v", s.step, req, len(recs), results)
	s.refused("CreatePartitions", recs, results[0].Err)
	s.commit(recs)
	t := s.img.Topic(name)
	switch {
	case results[0].Err != nil:
		if t != nil && len(t.Partitions) != have {
			s.fatalf("refused CreatePartitions changed %q", name)
		}
		if prev.Topic(name) == nil {
			s.wantErr("CreatePartitions of an unknown topic", results[0].Err, metadata.ErrUnknownTopic)
		} else if req.Count <= int32(have) {
			s.wantErr("CreatePartitions without new partitions", results[0].Err, metadata.ErrInvalidPartitions)
		}
	case len(t.Partitions) != int(req.Count):
		s.fatalf("CreatePartitions to %d left %q with %d", req.Count, name, len(t.Partitions))
	default:
		s.checkNewPartitions(t, have)
	}
}

func (s *seqRun) deleteTopics() {
	var refs []TopicRef
	for range rapid.IntRange(1, 2).Draw(s.t, "refs") {
		name := s.drawTopic()
		ref := TopicRef{Name: name}
		if rapid.Bool().Draw(s.t, "byID") {
			ref = TopicRef{ID: s.uuid()}
			if t := s.img.Topic(name); t != nil {
				ref.ID = t.ID
			}
		}
		refs = append(refs, ref)
	}
	prev := s.img
	recs, results := PlanDeleteTopics(s.img, refs)
	s.t.Logf("%s: delete topics %+v: %d records, %+v", s.step, refs, len(recs), results)
	s.commit(recs)
	for _, res := range results {
		existed := prev.TopicByID(res.ID) != nil
		gone := s.img.TopicByID(res.ID) == nil
		if res.Err == nil && (!existed || !gone) {
			s.fatalf("deleted topic %q %v: existed %v, gone %v", res.Name, res.ID, existed, gone)
		}
	}
}

// uncleanDuty is the active controller's periodic unclean election
// (PlanUncleanElections) for topics that allow it.
func (s *seqRun) uncleanDuty() {
	recs := PlanUncleanElections(s.img, s.downCopy())
	s.t.Logf("%s: unclean elections (down %v): %d records", s.step, s.down, len(recs))
	s.commit(recs)
	s.eachPartition(s.img, func(t *metadata.Topic, p, _ *metadata.Partition) {
		if t.Config.UncleanLeaderElectionEnable && p.Leader == metadata.NoLeader &&
			slices.ContainsFunc(p.Replicas, func(id int32) bool { return s.eligible(s.img, id) }) {
			s.fatalf("unclean elections left %s leaderless", fmtPartition(t, p))
		}
	})
}

// setUnclean turns unclean.leader.election.enable on or off for a topic or
// as the cluster-wide default (AlterConfigs), which changes no partition: the
// unclean election duty acts on it.
func (s *seqRun) setUnclean() {
	res := AlterConfigsResource{Type: metadata.ResourceTopic, Name: s.drawTopic()}
	if s.chance("clusterDefault", 3) {
		res = AlterConfigsResource{Type: metadata.ResourceBroker}
	}
	res.Configs = map[string]string{"unclean.leader.election.enable": rapid.SampledFrom([]string{"true", "false"}).Draw(s.t, "value")}
	recs, results := PlanAlterConfigs(s.img, []AlterConfigsResource{res}, true)
	s.t.Logf("%s: alter configs %+v: %d records, %+v", s.step, res, len(recs), results)
	s.commit(recs)
}

// snapshot rebuilds the image from its snapshot records, as a controller
// restarting or catching up from a snapshot does.
func (s *seqRun) snapshot() {
	rebuilt, err := metadata.ApplyAll(metadata.NewImage(), s.img.Records())
	if err != nil {
		s.fatalf("snapshot records do not apply: %v", err)
	}
	if !sameImage(rebuilt, s.img) {
		s.fatalf("the image rebuilt from its snapshot differs")
	}
	s.img = rebuilt.WithOffset(s.img.Offset())
}

// --- invariants ------------------------------------------------------------

// eachPartition calls fn for every partition p of img with the partition of
// the same topic id and index in s.img (nil if gone).
func (s *seqRun) eachPartition(img *metadata.Image, fn func(t *metadata.Topic, p, cur *metadata.Partition)) {
	for _, t := range img.Topics() {
		ct := s.img.TopicByID(t.ID)
		for _, p := range t.Partitions {
			var cur *metadata.Partition
			if ct != nil && int(p.Index) < len(ct.Partitions) {
				cur = ct.Partitions[p.Index]
			}
			fn(t, p, cur)
		}
	}
}

// checkState checks what holds of every partition after every step.
func (s *seqRun) checkState() {
	s.eachPartition(s.img, func(t *metadata.Topic, p, _ *metadata.Partition) {
		bad := func(why string) { s.fatalf("%s: %s", fmtPartition(t, p), why) }
		if len(p.Replicas) == 0 {
			bad("no replicas")
		}
		for i, id := range p.Replicas {
			if id < 1 || id > seqMaxBroker || slices.Contains(p.Replicas[:i], id) {
				bad("replica ids")
			}
		}
		for i, id := range p.ISR {
			if !slices.Contains(p.Replicas, id) || slices.Contains(p.ISR[:i], id) {
				bad("isr not a set of replicas")
			}
			// Fencing and unregistering leave every ISR but as its last member.
			if len(p.ISR) > 1 && !s.img.IsLive(id) {
				bad(fmt.Sprintf("isr member %d is not live", id))
			}
		}
		switch {
		case p.Leader != metadata.NoLeader && !slices.Contains(p.ISR, p.Leader):
			bad("leader outside the isr")
		case p.Leader != metadata.NoLeader && !s.img.IsLive(p.Leader):
			bad("leader not live")
		case p.Leader == metadata.NoLeader && slices.ContainsFunc(p.ISR, func(id int32) bool { return s.eligible(s.img, id) }):
			bad(fmt.Sprintf("leaderless with an eligible isr member (down %v)", s.down))
		}
		for _, set := range [][]int32{p.Adding, p.Removing} {
			for i, id := range set {
				if !slices.Contains(p.Replicas, id) || slices.Contains(set[:i], id) {
					bad("adding or removing not a set of replicas")
				}
			}
		}
		if len(minus(p.Adding, p.Removing)) != len(p.Adding) || len(p.Removing) == len(p.Replicas) {
			bad("adding and removing overlap or remove everything")
		}
		if p.Reassigning() && len(minus(p.TargetReplicas(), p.ISR)) == 0 {
			bad("the isr holds the whole target, but the reassignment is still in progress")
		}
	})
}

// checkTransition checks how every partition and broker may have changed in
// the step that turned prev into s.img.
func (s *seqRun) checkTransition(prev *metadata.Image) {
	s.eachPartition(prev, func(t *metadata.Topic, p, cur *metadata.Partition) {
		if cur == nil {
			if !s.allow.remove || s.img.TopicByID(t.ID) != nil {
				s.fatalf("%s vanished", fmtPartition(t, p))
			}
			return
		}
		ct := s.img.TopicByID(t.ID)
		bad := func(why string) { s.fatalf("%s became %s: %s", fmtPartition(t, p), fmtPartition(ct, cur), why) }
		changed := !samePartition(p, cur)
		switch {
		case cur.LeaderEpoch < p.LeaderEpoch || cur.PartitionEpoch < p.PartitionEpoch:
			bad("an epoch went back")
		case changed && cur.PartitionEpoch == p.PartitionEpoch:
			bad("changed at the same partition epoch")
		case cur.Leader != p.Leader && cur.LeaderEpoch == p.LeaderEpoch:
			bad("new leader at the same leader epoch")
		case !s.allow.replicas && (!slices.Equal(p.Replicas, cur.Replicas) || !slices.Equal(p.Adding, cur.Adding) || !slices.Equal(p.Removing, cur.Removing)) &&
			!(p.Reassigning() && !cur.Reassigning() && slices.Equal(cur.Replicas, p.TargetReplicas())):
			// An election that leaves the ISR holding the whole target
			// completes the reassignment.
			bad("replicas changed outside a reassignment")
		}
		newLeader := cur.Leader != p.Leader && cur.Leader != metadata.NoLeader
		// A leader's AlterPartition may complete a reassignment that elects
		// a member it has just added to the ISR.
		unclean := newLeader && !slices.Contains(p.ISR, cur.Leader) && !s.allow.isrGrowth
		if unclean && (s.allow.unclean == nil || !s.allow.unclean(ct) || !slices.Equal(cur.ISR, []int32{cur.Leader})) {
			bad("a leader from outside the isr")
		}
		if newLeader && s.down[cur.Leader] && cur.Leader != s.allow.unfenced {
			bad(fmt.Sprintf("a new leader in controlled shutdown (down %v)", s.down))
		}
		restarted := s.allow.revert && ct.Config.UncleanLeaderElectionEnable && p.Reassigning() && !cur.Reassigning() &&
			len(cur.ISR) == 1 && cur.ISR[0] == cur.Replicas[0] && len(minus(p.ISR, cur.Replicas)) == len(p.ISR)
		if grown := minus(cur.ISR, p.ISR); len(grown) > 0 && !s.allow.isrGrowth && !unclean && !restarted {
			bad(fmt.Sprintf("isr grew by %v", grown))
		}
	})
	for _, t := range s.img.Topics() {
		pt := prev.TopicByID(t.ID)
		if (pt == nil || len(pt.Partitions) < len(t.Partitions)) && !s.allow.create {
			s.fatalf("topic %q grew outside CreateTopics or CreatePartitions", t.Name)
		}
	}
	for id := int32(1); id <= seqUnknownBroker; id++ {
		b, pb := s.img.Broker(id), prev.Broker(id)
		switch {
		case id == seqUnknownBroker && b != nil:
			s.fatalf("broker %d registered", id)
		case b != nil && pb != nil && b.Epoch < pb.Epoch:
			s.fatalf("broker %d epoch went back from %d to %d", id, pb.Epoch, b.Epoch)
		case b != nil && (pb == nil || b.Epoch != pb.Epoch) && !slices.Contains(s.epochs[id], b.Epoch):
			s.fatalf("broker %d epoch %d was not handed out by a registration", id, b.Epoch)
		}
	}
}

func samePartition(a, b *metadata.Partition) bool {
	return slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR) && a.Leader == b.Leader &&
		a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch &&
		slices.Equal(a.Adding, b.Adding) && slices.Equal(a.Removing, b.Removing)
}

func sameSet(a, b []int32) bool {
	return len(a) == len(b) && len(minus(a, b)) == 0
}

func fmtPartition(t *metadata.Topic, p *metadata.Partition) string {
	name := "?"
	if t != nil {
		name = t.Name
	}
	if p == nil {
		return name + "-?"
	}
	return fmt.Sprintf("%s-%d{replicas %v adding %v removing %v isr %v leader %d epoch %d partition epoch %d}",
		name, p.Index, p.Replicas, p.Adding, p.Removing, p.ISR, p.Leader, p.LeaderEpoch, p.PartitionEpoch)
}

func fmtRecords(recs []metadata.Record) string {
	var b bytes.Buffer
	for _, r := range recs {
		fmt.Fprintf(&b, "  %T %+v\n", r, r)
	}
	return b.String()
}
