package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
)

// Share-group consumers (KIP-932) over HTTP, beyond Kafka's own API. A poll with
// "share": true makes its consumer instance a member of a share group: records
// are acquired under an acquisition lock rather than read from a position, several
// members may read one partition, and each record is acknowledged on its own with
// POST /ack (accept, release or reject). The instance speaks the Kafka protocol to
// the cluster as the Java KafkaShareConsumer does, so the share-partition leaders
// and the group's dead-letter topic treat it like any other member:
//
//  1. ShareGroupHeartbeat (to the group's coordinator) joins the group with a
//     member id of its own and keeps it, at the interval the coordinator asks for;
//     its answers carry the member's assignment.
//  2. A poll sends ShareFetch to the leader of each assigned partition, one share
//     session per leader, and answers the acquired records with their
//     delivery_count.
//  3. POST /ack sends ShareAcknowledge to the leader that handed the record out.
//  4. Closing the instance (DELETE, idle expiry, shutdown) closes its share
//     sessions, which gives back the records it still holds, and leaves the group.

// shareMember is the share-group side of a consumer instance.
type shareMember struct {
	key      instanceKey
	topic    string
	memberID string
	cl       *kgo.Client
	leaders  func(partition int32) (leader int32, ok bool)
	log      func(msg string, args ...any)

	// assigned closes when the coordinator first assigns the member partitions.
	assigned     chan struct{}
	markAssigned func()
	stop, done   chan struct{}

	// sessMu orders the requests of the member's share sessions (polls and
	// acknowledgements), whose epochs must arrive in sequence. It is held across
	// them; mu is not.
	sessMu sync.Mutex
	mu     struct {
		sync.Mutex
		topicID    [16]byte
		epoch      int32   // the member epoch; 0 to (re)join
		partitions []int32 // assigned partitions of topic
		interval   time.Duration
		sessions   map[int32]*shareSession // by leader
		held       map[heldRecord]int32    // records handed out, by the leader that did
		// coordinator is the group coordinator heartbeats go to; -1: find it
		// first. franz-go keeps a coordinator cached for a non-leave
		// ShareGroupHeartbeat even when it answers NOT_COORDINATOR, so the
		// member looks it up itself and forgets it on that answer.
		coordinator int32
	}
}

// shareSession is the member's share session with one leader.
type shareSession struct {
	epoch      int32   // the next request's; 0 opens
	partitions []int32 // in the session
}

type heldRecord struct {
	partition int32
	offset    int64
}

// Share-group heartbeat epochs (KIP-932).
const (
	shareJoinEpoch  = 0
	shareLeaveEpoch = -1
	// shareFinalEpoch closes a share session.
	shareFinalEpoch = -1
)

// newShareMember starts the member of instance key on topic: its heartbeats run
// until close.
func newShareMember(key instanceKey, topic string, cl *kgo.Client, leaders func(int32) (int32, bool), log func(string, ...any)) *shareMember {
	id := make([]byte, 16)
	rand.Read(id)
	s := &shareMember{key: key, topic: topic, memberID: base64.RawURLEncoding.EncodeToString(id), cl: cl, leaders: leaders, log: log,
		assigned: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	s.markAssigned = sync.OnceFunc(func() { close(s.assigned) })
	s.mu.sessions = map[int32]*shareSession{}
	s.mu.held = map[heldRecord]int32{}
	s.mu.interval = 5 * time.Second
	s.mu.coordinator = -1
	go s.heartbeatLoop()
	return s
}

func (s *shareMember) heartbeatLoop() {
	defer close(s.done)
	// Closing the member ends a heartbeat in flight.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		s.heartbeat(ctx, shareJoinEpoch)
		t := time.NewTimer(s.interval())
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// interval is the heartbeat interval the coordinator asks for.
func (s *shareMember) interval() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.interval
}

// memberEpoch is the member's epoch; 0 to (re)join.
func (s *shareMember) memberEpoch() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.epoch
}

// heartbeat sends one ShareGroupHeartbeat: a join when the member has no epoch
// yet, a leave when epoch is shareLeaveEpoch, else a heartbeat at its epoch.
// It waits 10 s at most, and not past ctx.
func (s *shareMember) heartbeat(ctx context.Context, epoch int32) {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID = s.key.group, s.memberID
	if epoch != shareLeaveEpoch {
		epoch = s.memberEpoch()
	}
	req.MemberEpoch = epoch
	if epoch == shareJoinEpoch {
		req.SubscribedTopicNames = []string{s.topic}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if epoch == shareLeaveEpoch {
		req.RequestWith(ctx, s.cl) // franz-go finds the coordinator again for a leave
		return
	}
	coordinator, err := s.findCoordinator(ctx)
	if err != nil {
		s.log("share group heartbeat: finding the coordinator", "group", s.key.group, "consumer", s.key.consumer, "err", err)
		return
	}
	resp, err := req.RequestWith(ctx, s.cl.Broker(int(coordinator)))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.mu.coordinator = -1
		return
	}
	switch resp.ErrorCode {
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code:
		s.mu.coordinator = -1
		return
	case 0:
	case kerr.UnknownMemberID.Code, kerr.FencedMemberEpoch.Code, kerr.GroupIDNotFound.Code:
		// Join again at the next beat. GROUP_ID_NOT_FOUND: the coordinator
		// does not know the group, which a move of the coordinator does to a
		// share group (its membership is held in memory only).
		s.mu.epoch = shareJoinEpoch
		return
	default:
		s.log("share group heartbeat failed", "group", s.key.group, "consumer", s.key.consumer, "err", kerr.ErrorForCode(resp.ErrorCode))
		return
	}
	s.mu.epoch = resp.MemberEpoch
	if resp.HeartbeatIntervalMillis > 0 {
		s.mu.interval = time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond
	}
	if a := resp.Assignment; a != nil {
		s.mu.partitions = nil
		for _, tp := range a.TopicPartitions {
			s.mu.topicID = tp.TopicID
			s.mu.partitions = append(s.mu.partitions, tp.Partitions...)
		}
		slices.Sort(s.mu.partitions)
		if len(s.mu.partitions) > 0 {
			s.markAssigned()
		}
	}
}

// findCoordinator returns the group's coordinator, asking FindCoordinator when
// the member has none.
func (s *shareMember) findCoordinator(ctx context.Context) (int32, error) {
	if c := s.coordinator(); c >= 0 {
		return c, nil
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = []string{s.key.group}
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return 0, err
	}
	if len(resp.Coordinators) != 1 {
		return 0, errors.New("no coordinator in the answer")
	}
	rc := resp.Coordinators[0]
	if err := kerr.ErrorForCode(rc.ErrorCode); err != nil {
		return 0, err
	}
	s.setCoordinator(rc.NodeID)
	return rc.NodeID, nil
}

// coordinator is the group coordinator heartbeats go to; -1: find it first.
func (s *shareMember) coordinator() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.coordinator
}

func (s *shareMember) setCoordinator(id int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.coordinator = id
}

// shareRecord is one acquired record of a poll.
type shareRecord struct {
	rec           *kgo.Record
	deliveryCount int16
}

// poll acquires up to maxRecords records of the member's partitions, waiting up to
// wait for the first (and, on the first poll, up to assignmentWait for an
// assignment).
func (s *shareMember) poll(ctx context.Context, maxRecords int, wait, assignmentWait time.Duration) ([]shareRecord, error) {
	select {
	case <-s.assigned:
	default:
		t := time.NewTimer(assignmentWait)
		select {
		case <-s.assigned:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	calls := s.shareFetches(maxRecords, wait)
	results := make([]shareFetched, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			resp, err := c.req.RequestWith(ctx, s.cl.Broker(int(c.leader)))
			results[i] = shareFetched{c.leader, resp, err}
		})
	}
	wg.Wait()
	return s.polled(results)
}

// shareFetch is one ShareFetch of a poll, to leader.
type shareFetch struct {
	leader int32
	req    *kmsg.ShareFetchRequest
}

// shareFetches returns a poll's ShareFetch requests, one per leader of the
// member's partitions, and moves each leader's share session to its
// partitions. sessMu must be held.
func (s *shareMember) shareFetches(maxRecords int, wait time.Duration) []shareFetch {
	s.mu.Lock()
	defer s.mu.Unlock()
	topicID := s.mu.topicID
	byLeader := map[int32][]int32{}
	for _, p := range s.mu.partitions {
		if l, ok := s.leaders(p); ok {
			byLeader[l] = append(byLeader[l], p)
		}
	}
	// Leaders the member no longer fetches from keep their sessions (and locks)
	// until the instance closes.
	var calls []shareFetch
	for leader, parts := range byLeader {
		sess := s.mu.sessions[leader]
		if sess == nil {
			sess = &shareSession{}
			s.mu.sessions[leader] = sess
		}
		req := kmsg.NewPtrShareFetchRequest()
		req.GroupID, req.MemberID = kmsg.StringPtr(s.key.group), kmsg.StringPtr(s.memberID)
		req.ShareSessionEpoch = sess.epoch
		req.MaxWaitMillis = int32(wait / time.Millisecond)
		req.MinBytes, req.MaxBytes = 1, 50<<20
		req.MaxRecords, req.BatchSize = int32(maxRecords), int32(maxRecords)
		req.ShareAcquireMode = 1 // record_limit: never more than max_records
		t := kmsg.NewShareFetchRequestTopic()
		t.TopicID = topicID
		for _, p := range parts {
			tp := kmsg.NewShareFetchRequestTopicPartition()
			tp.Partition = p
			t.Partitions = append(t.Partitions, tp)
		}
		req.Topics = append(req.Topics, t)
		if sess.epoch != 0 {
			var gone []int32
			for _, p := range sess.partitions {
				if !slices.Contains(parts, p) {
					gone = append(gone, p)
				}
			}
			if len(gone) > 0 {
				ft := kmsg.NewShareFetchRequestForgottenTopicsData()
				ft.TopicID, ft.Partitions = topicID, gone
				req.ForgottenTopicsData = append(req.ForgottenTopicsData, ft)
			}
		}
		sess.partitions = parts
		calls = append(calls, shareFetch{leader, req})
	}
	return calls
}

// shareFetched is a leader's answer to a poll's shareFetch.
type shareFetched struct {
	leader int32
	resp   *kmsg.ShareFetchResponse
	err    error
}

// polled takes the leaders' answers to a poll: it advances or resets their
// share sessions, notes the records they handed out and returns them, by
// partition and offset. sessMu must be held.
func (s *shareMember) polled(results []shareFetched) ([]shareRecord, error) {
	var out []shareRecord
	var first error
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range results {
		sess := s.mu.sessions[r.leader]
		if r.err == nil && r.resp.ErrorCode != 0 {
			r.err = kerr.ErrorForCode(r.resp.ErrorCode)
		}
		if r.err != nil {
			// The session is lost (a new leader, an evicted session): open a new
			// one next time; what it held comes back when its locks expire.
			sess.epoch = 0
			if first == nil && !errors.Is(r.err, context.Canceled) && !errors.Is(r.err, context.DeadlineExceeded) {
				first = r.err
			}
			continue
		}
		if sess.epoch++; sess.epoch <= 0 {
			sess.epoch = 1
		}
		for _, t := range r.resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					if first == nil {
						first = sharePartitionError(p.ErrorCode)
					}
					continue
				}
				recs, err := decodeAcquired(s.topic, p)
				if err != nil {
					return nil, err
				}
				for _, sr := range recs {
					s.mu.held[heldRecord{sr.rec.Partition, sr.rec.Offset}] = r.leader
				}
				out = append(out, recs...)
			}
		}
	}
	if len(out) == 0 && first != nil {
		return nil, first
	}
	slices.SortFunc(out, func(a, b shareRecord) int {
		if a.rec.Partition != b.rec.Partition {
			return int(a.rec.Partition - b.rec.Partition)
		}
		return int(a.rec.Offset - b.rec.Offset)
	})
	return out, nil
}

// sharePartitionError is the error of a share poll's partition that failed with
// code. UNKNOWN_SERVER_ERROR is what a leader answers when it could not read or
// write the partition's share state (Kafka 4.4's mapping of its persister's
// errors): the next poll reloads the state, so it is a 503, not a 500.
func sharePartitionError(code int16) error {
	if code == kerr.UnknownServerError.Code {
		return errorf(http.StatusServiceUnavailable, kerr.UnknownServerError.Message, "the share partition's state could not be read or written: retry later")
	}
	return kerr.ErrorForCode(code)
}

// decodeAcquired returns the records of p that p.AcquiredRecords hands out (its
// batches may hold others).
func decodeAcquired(topic string, p kmsg.ShareFetchResponseTopicPartition) ([]shareRecord, error) {
	counts := map[int64]int16{}
	for _, a := range p.AcquiredRecords {
		for o := a.FirstOffset; o <= a.LastOffset; o++ {
			counts[o] = a.DeliveryCount
		}
	}
	var out []shareRecord
	it := batch.NewStoredIter(p.Records)
	for it.Next() {
		h := it.Header()
		if h.Control() {
			continue
		}
		err := batch.Records(it.Batch(), func(h batch.Header, r batch.Record) error {
			o := h.BaseOffset + int64(r.OffsetDelta)
			count, ok := counts[o]
			if !ok {
				return nil
			}
			ts := h.FirstTimestamp + r.TimestampDelta
			if h.LogAppendTime() {
				ts = h.MaxTimestamp
			}
			kr := &kgo.Record{Topic: topic, Partition: p.Partition, Offset: o, Timestamp: time.UnixMilli(ts),
				Key: cloneBytes(r.Key), Value: cloneBytes(r.Value)}
			for _, hd := range r.Headers {
				kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: hd.Key, Value: cloneBytes(hd.Value)})
			}
			out = append(out, shareRecord{kr, count})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// errNotHeld: the member holds no such record.
var errNotHeld = errors.New("not held")

// ack acknowledges one record with ShareAcknowledge to the leader that handed it
// out. A record the member does not hold is errNotHeld, or the leader's
// INVALID_RECORD_STATE.
func (s *shareMember) ack(ctx context.Context, partition int32, offset int64, typ int8) error {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	leader, sess, req := s.ackRequest(partition, offset, typ)
	if req == nil {
		return errNotHeld
	}
	resp, err := req.RequestWith(ctx, s.cl.Broker(int(leader)))
	if err == nil && resp.ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		sess.epoch = 0
		return err
	}
	delete(s.mu.held, heldRecord{partition, offset})
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				return kerr.ErrorForCode(rp.ErrorCode)
			}
		}
	}
	return nil
}

// ackRequest returns the ShareAcknowledge of one held record, the leader that
// handed it out and that leader's share session, whose epoch it advances; a nil
// request when the member does not hold the record. sessMu must be held.
func (s *shareMember) ackRequest(partition int32, offset int64, typ int8) (int32, *shareSession, *kmsg.ShareAcknowledgeRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	leader, ok := s.mu.held[heldRecord{partition, offset}]
	sess := s.mu.sessions[leader]
	if !ok || sess == nil || sess.epoch == 0 {
		return 0, nil, nil
	}
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr(s.key.group), kmsg.StringPtr(s.memberID)
	req.ShareSessionEpoch = sess.epoch
	t := kmsg.NewShareAcknowledgeRequestTopic()
	t.TopicID = s.mu.topicID
	tp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	tp.Partition = partition
	b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = offset, offset, []int8{typ}
	tp.AcknowledgementBatches = append(tp.AcknowledgementBatches, b)
	t.Partitions = append(t.Partitions, tp)
	req.Topics = append(req.Topics, t)
	sess.epoch++
	return leader, sess, req
}

// close closes the member's share sessions (giving back what it holds) and leaves
// the group, waiting until ctx is done at most.
func (s *shareMember) close(ctx context.Context) {
	close(s.stop)
	<-s.done
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	var wg sync.WaitGroup
	for _, l := range s.sessionLeaders() {
		wg.Go(func() {
			req := kmsg.NewPtrShareAcknowledgeRequest()
			req.GroupID, req.MemberID = kmsg.StringPtr(s.key.group), kmsg.StringPtr(s.memberID)
			req.ShareSessionEpoch = shareFinalEpoch
			req.RequestWith(ctx, s.cl.Broker(int(l)))
		})
	}
	wg.Wait()
	s.heartbeat(ctx, shareLeaveEpoch)
}

// sessionLeaders returns the leaders the member has an open share session with.
func (s *shareMember) sessionLeaders() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var leaders []int32
	for l, sess := range s.mu.sessions {
		if sess.epoch != 0 {
			leaders = append(leaders, l)
		}
	}
	return leaders
}

// ackJSON is the body of POST /ack.
type ackJSON struct {
	Group     string `json:"group"`
	Consumer  string `json:"consumer"`
	Topic     string `json:"topic"`
	Partition *int32 `json:"partition"`
	Offset    *int64 `json:"offset"`
	Result    string `json:"result"`
}

// ackTypes are the results of POST /ack, with Kafka's acknowledgement types.
var ackTypes = map[string]int8{"accept": 1, "release": 2, "reject": 3}

type ackAnswer struct {
	Acknowledged bool `json:"acknowledged"`
}

func (a *API) handleAck(w http.ResponseWriter, r *http.Request) {
	body, aerr := readBody(w, r, a.cfg.MaxBodyBytes)
	var req ackJSON
	if aerr == nil {
		aerr = decodeControl(body, &req)
	}
	typ, known := ackTypes[req.Result]
	switch {
	case aerr != nil:
	case req.Group == "" || req.Topic == "" || req.Partition == nil || req.Offset == nil:
		aerr = invalid("group, topic, partition and offset are required")
	case *req.Partition < 0 || *req.Offset < 0:
		aerr = invalid("partition and offset must not be negative")
	case !known:
		aerr = invalid(`result: must be "accept", "release" or "reject", got %q`, req.Result)
	}
	if aerr == nil {
		aerr = authorize(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group)
	}
	if aerr == nil {
		aerr = authorize(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, req.Topic)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	key := instanceKey{req.Group, req.Consumer}
	if key.consumer == "" {
		key.consumer = defaultConsumer
	}
	inst := a.consumers.lookup(key)
	if inst == nil {
		if a.forwarded(w, r, body, key, true) {
			return
		}
		writeError(w, notHeld(key, req.Topic, *req.Partition, *req.Offset))
		return
	}
	defer a.consumers.release(inst)
	if inst.share == nil || inst.topic != req.Topic {
		writeError(w, notHeld(key, req.Topic, *req.Partition, *req.Offset))
		return
	}
	err := inst.share.ack(r.Context(), *req.Partition, *req.Offset, typ)
	switch {
	case errors.Is(err, errNotHeld), errors.Is(err, kerr.InvalidRecordState):
		writeError(w, notHeld(key, req.Topic, *req.Partition, *req.Offset))
		return
	case err != nil:
		writeError(w, fromErr(err))
		return
	}
	a.markConsumerNode(w)
	writeJSON(w, http.StatusOK, ackAnswer{true})
}

// notHeld is the 409 for an acknowledgement of a record the member does not hold.
func notHeld(key instanceKey, topic string, partition int32, offset int64) *apiError {
	return errorf(http.StatusConflict, kerr.InvalidRecordState.Message,
		"share consumer %q of group %q does not hold %s/%d/%d: never acquired by it, lock expired, or already acknowledged",
		key.consumer, key.group, topic, partition, offset)
}

// shareRecordOut is one record of a share poll.
type shareRecordOut struct {
	recordOut
	DeliveryCount int16 `json:"delivery_count"`
}

type sharePollAnswer struct {
	Records []shareRecordOut `json:"records"`
}

// handleSharePoll serves a poll with "share": true.
func (a *API) handleSharePoll(w http.ResponseWriter, r *http.Request, body []byte, call pollCall) {
	inst := a.consumers.lookup(call.key)
	if inst == nil {
		if a.forwarded(w, r, body, call.key, true) {
			return
		}
		var aerr *apiError
		if inst, aerr = a.consumers.acquire(call.key, call.opts); aerr != nil {
			writeError(w, aerr)
			return
		}
	}
	defer a.consumers.release(inst)
	if inst.topic != call.opts.topic {
		writeError(w, consumerTopicConflict(call.key, inst.topic, call.opts.topic))
		return
	}
	if inst.share == nil {
		writeError(w, consumerKindConflict(call.key, "a consumer-group member", "a share poll"))
		return
	}
	recs, err := inst.sharePoll(r.Context(), call)
	if err != nil {
		writeError(w, fromErr(err))
		return
	}
	ans := sharePollAnswer{Records: make([]shareRecordOut, len(recs))}
	for i, sr := range recs {
		ans.Records[i] = shareRecordOut{toRecordOut(sr.rec), sr.deliveryCount}
	}
	a.markConsumerNode(w)
	writeJSON(w, http.StatusOK, ans)
}

// sharePoll is one poll of the instance's share-group member, serialised with
// the instance's other polls.
func (inst *instance) sharePoll(ctx context.Context, call pollCall) ([]shareRecord, error) {
	inst.pollMu.Lock()
	defer inst.pollMu.Unlock()
	return inst.share.poll(ctx, call.maxRecords, call.timeout, call.assignmentWait)
}

// codeConsumerKind: a share poll for a consumer-group instance, or the reverse.
const codeConsumerKind = "CONSUMER_KIND_MISMATCH"

func consumerKindConflict(key instanceKey, is, asked string) *apiError {
	return errorf(http.StatusConflict, codeConsumerKind, "consumer %q of group %q is %s; use another consumer name for %s",
		key.consumer, key.group, is, asked)
}

// newShareInstanceLocked creates the instance of a share-group member: a Kafka
// client whose client id names the consumer and this node (forward.go), and the
// member's heartbeats.
func (c *consumers) newShareInstanceLocked(key instanceKey, opts instanceOptions, session time.Duration) (*instance, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(c.cfg.KafkaAddr),
		kgo.ClientID(memberClientID(key, c.cfg.AdvertisedAddr)),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}, c.cfg.ClientOpts...)...)
	if err != nil {
		return nil, err
	}
	leaders := func(partition int32) (int32, bool) {
		p := c.cfg.Cluster.Image().Partition(opts.topic, partition)
		if p == nil || p.Leader < 0 {
			return 0, false
		}
		return p.Leader, true
	}
	inst := &instance{key: key, topic: opts.topic, cl: cl, idleFor: session, lastUsed: time.Now()}
	inst.share = newShareMember(key, opts.topic, cl, leaders, c.cfg.Logger.Warn)
	return c.addLocked(inst, session), nil
}
