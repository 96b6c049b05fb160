package share

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/replica"
)

// Share session epochs (KIP-932).
const (
	openEpoch  = 0  // a new session: the request names every partition
	finalEpoch = -1 // the last request of a session: acknowledge and close
)

// recordLimitMode is ShareFetch v2's ShareAcquireMode that acquires at most
// MaxRecords records, splitting batches (0, batch_optimized, takes whole batches).
const recordLimitMode = 1

// defaultMaxRecords bounds the records one ShareFetch acquires when the request
// does not say (v0), as the Java client's max.poll.records default.
const defaultMaxRecords = 500

type sessionKey struct{ group, member string }

type topicPartition struct {
	id        [16]byte
	partition int32
}

// session is one member's share session with this node: the partitions it fetches
// and the epoch its next request must carry.
type session struct {
	epoch int32
	parts []topicPartition // in the order they were added
	used  time.Time        // the last request
	conn  uint64           // the connection that opened it (WithConnection); 0: unknown
}

// connKey is the context key of the client connection a request came on.
type connKey struct{}

// WithConnection returns ctx carrying the id of the client connection
// (protocol.ConnInfo.ID, never 0) a ShareFetch came on: a share session belongs
// to the connection that opened it, and ends when ConnectionClosed reports it.
func WithConnection(ctx context.Context, id uint64) context.Context {
	return context.WithValue(ctx, connKey{}, id)
}

func connectionOf(ctx context.Context) uint64 {
	id, _ := ctx.Value(connKey{}).(uint64)
	return id
}

// sessionIdle is how long a share session may go unused before a new session on
// the node evicts it (its member is gone; its records' locks expire on their own).
// A member that comes back gets SHARE_SESSION_NOT_FOUND and opens a new one.
const sessionIdle = 5 * time.Minute

func (s *session) add(tp topicPartition) {
	if !slices.Contains(s.parts, tp) {
		s.parts = append(s.parts, tp)
	}
}

func (s *session) remove(tp topicPartition) {
	s.parts = slices.DeleteFunc(s.parts, func(x topicPartition) bool { return x == tp })
}

// sessionStep applies a request's session epoch: it opens (on connection conn),
// advances or closes the member's session and returns it, or the top-level
// error code.
func (m *Manager) sessionStep(group, member string, epoch int32, fetch bool, conn uint64) (*session, int16) {
	k := sessionKey{group, member}
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.mu.sessions[k]
	if s != nil {
		s.used = now
	}
	switch {
	case epoch == openEpoch:
		if !fetch {
			return nil, kerr.InvalidShareSessionEpoch.Code
		}
		for sk, old := range m.mu.sessions {
			if now.Sub(old.used) > sessionIdle {
				delete(m.mu.sessions, sk)
			}
		}
		s = &session{epoch: 1, used: now, conn: conn}
		m.mu.sessions[k] = s
		return s, 0
	case s == nil:
		return nil, kerr.ShareSessionNotFound.Code
	case epoch == finalEpoch:
		delete(m.mu.sessions, k)
		return s, 0
	case epoch != s.epoch:
		return nil, kerr.InvalidShareSessionEpoch.Code
	}
	s.epoch++
	if s.epoch < 0 {
		s.epoch = 1
	}
	return s, 0
}

// decodeAcks turns a request's acknowledgement batches (either request's type, read
// through get) into AckBatches; false when one is malformed or uses RENEW before v2.
func decodeAcks[B any](version int16, batches []B, get func(B) (first, last int64, types []int8)) ([]AckBatch, bool) {
	var out []AckBatch
	for _, b := range batches {
		first, last, types := get(b)
		a := AckBatch{First: first, Last: last}
		for _, t := range types {
			if AckType(t) == Renew && version < 2 {
				return nil, false
			}
			a.Types = append(a.Types, AckType(t))
		}
		if len(a.Types) == 0 {
			return nil, false
		}
		out = append(out, a)
	}
	return out, true
}

// ShareFetch serves ShareFetch v0-v2 for the partitions this node leads:
// acknowledgements first, then acquisition of up to MaxRecords records (v1+; 500
// before) across the session's partitions, waiting up to MaxWaitMillis when none is
// available. Epoch 0 opens a share session, -1 acknowledges and closes it (releasing
// what the member still holds), anything else must be the session's next epoch.
func (m *Manager) ShareFetch(ctx context.Context, req *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	group, member := deref(req.GroupID), deref(req.MemberID)

	fail := func(code int16) *kmsg.ShareFetchResponse {
		resp.ErrorCode = code // Kafka 4.4 answers these without a message
		return resp
	}
	if group == "" || member == "" {
		return fail(kerr.InvalidRequest.Code)
	}
	hasAcks := false
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			hasAcks = hasAcks || len(p.AcknowledgementBatches) > 0
		}
	}
	if req.ShareSessionEpoch == openEpoch && hasAcks {
		return fail(kerr.InvalidRequest.Code)
	}
	s, code := m.sessionStep(group, member, req.ShareSessionEpoch, true, connectionOf(ctx))
	if code != 0 {
		return fail(code)
	}
	if req.ShareSessionEpoch == openEpoch {
		m.unloadGroupIfIdle(group, member) // the first member back reads the durable state
	}
	cfg := m.groupConfig(group)
	resp.AcquisitionLockTimeoutMillis = int32(cfg.LockDuration.Milliseconds())
	out := newResponseParts(m)

	// Session membership first (forgotten partitions go, requested ones join).
	if req.ShareSessionEpoch != finalEpoch {
		m.updateSession(s, req)
	}

	maxRecords := int(req.MaxRecords)
	if req.Version < 1 || maxRecords <= 0 {
		maxRecords = defaultMaxRecords
	}
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 50 << 20
	}
	strict := req.ShareAcquireMode == recordLimitMode

	// Acknowledgements, each partition's with its acquisition (one save for
	// both) unless the session closes.
	got := 0
	var served []topicPartition // acquired from with their acknowledgements
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			acks, ok := decodeAcks(req.Version, p.AcknowledgementBatches, func(b kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
				return b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
			})
			tp := topicPartition{t.TopicID, p.Partition}
			if req.ShareSessionEpoch == finalEpoch {
				rp := out.part(t.TopicID, p.Partition)
				rp.AcknowledgeErrorCode, rp.AcknowledgeErrorMessage = m.acknowledge(ctx, group, member, cfg, t.TopicID, p.Partition, acks, ok)
				continue
			}
			if n := m.acknowledgeAndFetch(ctx, out, group, member, cfg, tp, acks, ok, maxRecords-got, maxBytes, strict); n > 0 {
				got += n
				served = append(served, tp)
			}
		}
	}
	if req.ShareSessionEpoch == finalEpoch {
		m.releaseSession(ctx, group, member, s, cfg)
		return out.into(resp)
	}
	if req.ShareSessionEpoch == openEpoch {
		for _, tp := range m.sessionParts(s) {
			out.part(tp.id, tp.partition)
		}
	}

	// Acquisition, long-polling while nothing is available.
	start := time.Now()
	deadline := start.Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	var w *replica.Watcher
	var watched []*replica.Partition
	var waitingOn []*sharePartition
	defer func() {
		for _, rp := range watched {
			rp.Unwatch(w)
		}
		for _, sp := range waitingOn {
			sp.unwait(w)
		}
	}()
	parts := m.sessionParts(s)
	m.counts.fetches.Add(1)
	woken, held := false, false
	for {
		for _, tp := range parts {
			if got >= maxRecords {
				break
			}
			if slices.Contains(served, tp) {
				continue // got > 0: this is the only round
			}
			f := m.fetchPartition(ctx, out, group, member, cfg, tp, w, maxRecords-got, maxBytes, strict)
			got += f.n
			if w != nil && f.rp != nil && !slices.Contains(watched, f.rp) {
				f.rp.Watch(w)
				watched = append(watched, f.rp)
			}
			if f.sp != nil && !slices.Contains(waitingOn, f.sp) {
				waitingOn = append(waitingOn, f.sp)
			}
			if f.held && !held {
				held = true
				deadline = minTime(deadline, start.Add(heldWait))
			}
		}
		m.counts.acquired.Add(int64(got))
		if woken && got == 0 {
			m.counts.idle.Add(1)
		}
		if got > 0 || out.failed() || !time.Now().Before(deadline) || ctx.Err() != nil || len(parts) == 0 {
			if got == 0 && w != nil && !out.failed() && ctx.Err() == nil {
				if held {
					m.counts.held.Add(1)
				} else {
					m.counts.expired.Add(1)
				}
			}
			return out.into(resp)
		}
		if w == nil {
			w = replica.NewWatcher()
			continue // watch, then look once more so no wake-up is missed
		}
		timer := time.NewTimer(time.Until(deadline))
		woken = false
		select {
		case <-w.C:
			woken = true
			m.counts.wakeups.Add(1)
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
	}
}

// updateSession applies a ShareFetch's forgotten and requested partitions to
// its session s.
func (m *Manager) updateSession(s *session, req *kmsg.ShareFetchRequest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ft := range req.ForgottenTopicsData {
		for _, p := range ft.Partitions {
			s.remove(topicPartition{ft.TopicID, p})
		}
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			s.add(topicPartition{t.TopicID, p.Partition})
		}
	}
}

// sessionParts returns a copy of session s's partitions.
func (m *Manager) sessionParts(s *session) []topicPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(s.parts)
}

// partitionFetch is what fetchPartition did for one partition.
type partitionFetch struct {
	n    int                // offsets acquired
	rp   *replica.Partition // to watch for appends (nil: none)
	sp   *sharePartition    // where the fetch waits for records (nil: nowhere)
	held bool               // acquisition.held
}

// fetchPartition acquires records of one session partition into out. When it
// acquires nothing and w is not nil, w waits on the share partition (under the
// same hold of its lock, so no wake-up is missed); the result says what else to
// watch.
func (m *Manager) fetchPartition(ctx context.Context, out *responseParts, group, member string, cfg GroupConfig, tp topicPartition, w *replica.Watcher, maxRecords, maxBytes int, strict bool) partitionFetch {
	rp, topic, code := m.lookup(tp.id, tp.partition)
	if code != 0 {
		r := out.part(tp.id, tp.partition)
		r.ErrorCode = code
		if code == kerr.NotLeaderForPartition.Code { // as Kafka 4.4: no leader hint with other codes
			out.leader(r, topic, tp.partition)
		}
		return partitionFetch{}
	}
	sp, code := m.share(ctx, Key{group, tp.id, tp.partition}, topic, rp)
	if code != 0 {
		out.stateFailed(tp, topic, code)
		return partitionFetch{rp: rp}
	}
	defer sp.mu.Unlock()
	a, err := m.acquireLocked(sp, rp, member, cfg, maxRecords, maxBytes, strict)
	if err != nil {
		m.log.Warn("share fetch read", "group", group, "topic", topic, "partition", tp.partition, "err", err)
		r := out.part(tp.id, tp.partition)
		r.ErrorCode = kerr.UnknownServerError.Code
		if errorsIsNotLeader(err) {
			r.ErrorCode = kerr.NotLeaderForPartition.Code
			out.leader(r, topic, tp.partition)
		}
		return partitionFetch{}
	}
	if len(a.acquired) == 0 {
		f := partitionFetch{held: a.held}
		if !a.full {
			f.rp = rp // appends may bring records to acquire
		}
		if w != nil {
			sp.waitLocked(w, maxRecords)
			f.sp = sp
		}
		return f
	}
	// The delivery counts are made durable before the records go out: a failed
	// save or a failover then reloads them at least at these counts, so a
	// record is never handed out again at a count it had, nor past the limit.
	if code := m.saveLocked(ctx, sp); code != 0 {
		out.stateFailed(tp, topic, code)
		return partitionFetch{}
	}
	return partitionFetch{n: out.acquired(tp, a), rp: rp, sp: sp}
}

// acknowledgeAndFetch applies the acknowledgement batches a ShareFetch carries
// for one partition (ok false: they did not decode) and acquires up to
// maxRecords of its records for member, both made durable by one state save;
// it returns how many offsets it acquired. A franz-go or Java member
// acknowledges on its next fetch, so this halves the saves of the fetch path.
func (m *Manager) acknowledgeAndFetch(ctx context.Context, out *responseParts, group, member string, cfg GroupConfig, tp topicPartition, acks []AckBatch, ok bool, maxRecords, maxBytes int, strict bool) int {
	ack := func(code int16, msg *string) {
		r := out.part(tp.id, tp.partition)
		r.AcknowledgeErrorCode, r.AcknowledgeErrorMessage = code, msg
	}
	if !ok {
		ack(kerr.InvalidRequest.Code, nil)
		return 0
	}
	rp, topic, code := m.lookup(tp.id, tp.partition)
	if code != 0 {
		ack(code, nil)
		return 0
	}
	sp, code := m.share(ctx, Key{group, tp.id, tp.partition}, topic, rp)
	if code != 0 {
		ack(code, nil)
		return 0
	}
	defer sp.mu.Unlock()
	ackCode, msg, changed := m.applyAcksLocked(sp, member, cfg, acks)
	p := sp.p
	var a acquisition
	if maxRecords > 0 {
		// A failed read is left to the fetch of the partition that follows.
		a, _ = m.acquireLocked(sp, rp, member, cfg, maxRecords, maxBytes, strict)
	}
	if changed && sp.p != p {
		// The state was dropped while the log was read, the acknowledgements
		// with it.
		ackCode, msg, changed = kerr.RequestTimedOut.Code, nil, false
	}
	if !changed && len(a.acquired) == 0 {
		ack(ackCode, msg)
		return 0
	}
	if code := m.saveLocked(ctx, sp); code != 0 {
		if changed {
			ackCode, msg = code, nil
		}
		ack(ackCode, msg)
		if len(a.acquired) > 0 {
			out.stateFailed(tp, topic, code)
		}
		return 0
	}
	if changed {
		m.acknowledgedLocked(sp, cfg)
	}
	ack(ackCode, msg)
	return out.acquired(tp, a)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// acknowledge applies one partition's decoded acknowledgement batches (ok false:
// they did not decode); it returns the partition's code and message.
func (m *Manager) acknowledge(ctx context.Context, group, member string, cfg GroupConfig, id [16]byte, partition int32, acks []AckBatch, ok bool) (int16, *string) {
	if !ok {
		return kerr.InvalidRequest.Code, nil
	}
	rp, topic, code := m.lookup(id, partition)
	if code != 0 {
		return code, nil
	}
	sp, code := m.share(ctx, Key{group, id, partition}, topic, rp)
	if code != 0 {
		return code, nil
	}
	defer sp.mu.Unlock()
	return m.acknowledgeLocked(ctx, sp, member, cfg, acks)
}

// releaseSession gives back what member still holds in the session's partitions,
// and unloads the group's share partitions when no other session of the group here is live.
func (m *Manager) releaseSession(ctx context.Context, group, member string, s *session, cfg GroupConfig) {
	for _, tp := range m.sessionParts(s) {
		if sp := m.loaded(Key{group, tp.id, tp.partition}); sp != nil {
			m.releaseMember(ctx, sp, member, cfg)
		}
	}
	m.unloadGroupIfIdle(group, member)
}

// ConnectionClosed ends the share sessions opened on the client connection id
// (WithConnection) and releases, in the background, what their members still
// hold, as a final-epoch request would (Kafka 4.1+, KAFKA-19015): a consumer
// that crashed or lost its connection does not keep its records locked for the
// acquisition lock duration. A session its member opened again on another
// connection belongs to that one and stays.
func (m *Manager) ConnectionClosed(id uint64) {
	if id == 0 {
		return
	}
	type ended struct {
		key sessionKey
		s   *session
	}
	var gone []ended
	func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for k, s := range m.mu.sessions {
			if s.conn == id {
				delete(m.mu.sessions, k)
				gone = append(gone, ended{k, s})
			}
		}
	}()
	for _, e := range gone {
		m.goBackground(func() {
			m.releaseSession(m.ctx, e.key.group, e.key.member, e.s, m.groupConfig(e.key.group))
		})
	}
}

// releaseMember gives back what member holds in sp.
func (m *Manager) releaseMember(ctx context.Context, sp *sharePartition, member string, cfg GroupConfig) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.p == nil {
		return
	}
	if archived := sp.p.ReleaseMember(member, cfg.Limits); len(archived) > 0 && m.saveLocked(ctx, sp) == 0 {
		m.maybeDeadLetterLocked(sp)
	}
	sp.wakeLocked(cfg.Limits, 0)
}

// ShareAcknowledge serves ShareAcknowledge v0-v2: acknowledgements outside a fetch.
// The session epoch must be the session's next one, or -1 to close it.
func (m *Manager) ShareAcknowledge(ctx context.Context, req *kmsg.ShareAcknowledgeRequest) *kmsg.ShareAcknowledgeResponse {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	group, member := deref(req.GroupID), deref(req.MemberID)
	fail := func(code int16) *kmsg.ShareAcknowledgeResponse {
		resp.ErrorCode = code // Kafka 4.4 answers these without a message
		return resp
	}
	if group == "" || member == "" {
		return fail(kerr.InvalidRequest.Code)
	}
	s, code := m.sessionStep(group, member, req.ShareSessionEpoch, false, 0)
	if code != 0 {
		return fail(code)
	}
	cfg := m.groupConfig(group)
	img := m.parts.Image()
	for _, t := range req.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			acks, ok := decodeAcks(req.Version, p.AcknowledgementBatches, func(b kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
				return b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
			})
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode, rp.ErrorMessage = m.acknowledge(ctx, group, member, cfg, t.TopicID, p.Partition, acks, ok)
			if rp.ErrorCode == kerr.NotLeaderForPartition.Code {
				if topic := img.TopicByID(metadataUUID(t.TopicID)); topic != nil {
					rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = leaderOf(img, topic.Name, p.Partition)
					addAckEndpoint(resp, img, rp.CurrentLeader.LeaderID)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.ShareSessionEpoch == finalEpoch {
		m.releaseSession(ctx, group, member, s, cfg)
	}
	return resp
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
