package handlers

// Incremental fetch sessions (KIP-227, Fetch v7+). A consumer of many partitions
// names them all once; afterwards each request names only the partitions whose
// fetch position changed, and each answer lists only the partitions with news
// (records, an error, or a new high-water mark, last stable offset or log start).
//
// A request's (SessionID, SessionEpoch) says what it is:
//
//	0, -1    a full fetch without a session (the only kind before v7)
//	0 or S, 0  a full fetch that opens a new session (closing S); the answer carries
//	         the new session's id (0 when the cache has no room: no session)
//	S, -1    closes S; a full fetch without a session
//	S, E>0   an incremental fetch in S; E must be S's next epoch
//
// Only an incremental fetch forgets partitions: a full fetch's forgotten
// topics are ignored, as Kafka's full and sessionless fetch contexts do.
// An unknown S answers FETCH_SESSION_ID_NOT_FOUND, a wrong E
// INVALID_FETCH_SESSION_EPOCH, and a request naming topics otherwise than the
// one that opened S (by id from v13, by name before) FETCH_SESSION_TOPIC_ID_ERROR,
// each with no partitions: the client then opens a new session with a full
// fetch. An incremental fetch that forgets the session's last partitions closes
// it and is answered without a session (id 0).
//
// Fairness: an incremental fetch reads the session's partitions in its order and
// stops reading records when the response's MaxBytes is spent, so after each
// one the partitions that returned records move to the end of the order (as
// Kafka's incremental fetch context does): with many partitions and a small
// MaxBytes, none is starved by those ahead of it.
//
// The cache holds max.incremental.fetch.session.cache.slots sessions
// (Config.FetchSessionCacheSlots, 1,000 by default; 0: no sessions, every fetch
// is full). When it is full, a new session
// takes a slot by evicting, as Kafka's FetchSessionCache does:
//  1. the least recently used session, if it was last used more than
//     sessionEvictionAge (min.incremental.fetch.session.eviction.ms) ago;
//  2. else the lowest-ranked session it may evict, if the new one ranks higher.
//     Ranks: a follower's session (privileged) above a consumer's, then more
//     partitions above fewer. A consumer's new session may evict only sessions
//     older than sessionEvictionAge; a follower's may also evict consumers'
//     sessions of any age.
//
// Otherwise the full fetch is answered without a session (session id 0) and the
// client keeps sending full fetches. An evicted session's next fetch is told
// FETCH_SESSION_ID_NOT_FOUND.

import (
	"container/list"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
)

// sessionEvictionAge is Kafka's min.incremental.fetch.session.eviction.ms: a
// session younger than it is evicted only by a follower's, and one used within
// it is not stale.
const sessionEvictionAge = 120 * time.Second

// Session epochs with a meaning of their own.
const (
	sessionEpochInitial int32 = 0
	sessionEpochFinal   int32 = -1
)

// sessionPartitionKey names a partition of a session: by topic id from v13
// (topic blank), by name before (topicID zero); see fetchSession.key.
type sessionPartitionKey struct {
	topic     string
	topicID   [16]byte
	partition int32
}

// sessionPartition is one partition of a session: what the client last asked for
// it and what it was last told.
type sessionPartition struct {
	key sessionPartitionKey
	// topic is the topic's name when the partition joined (from v13, what
	// the fetch handler found for its id then; if unknown, "" until an
	// incremental fetch finds it), read from then on as Kafka's
	// CachedPartition is: once the topic is deleted and another made under
	// its name, the partition is that one's, whose log has another id
	// (INCONSISTENT_TOPIC_ID).
	topic string
	req   kmsg.FetchRequestTopicPartition
	// Last sent to the client; -2 before the first answer, so it is sent then.
	highWatermark, lastStableOffset, logStartOffset int64
}

// fetchSession is a cached session. Its partitions keep the order in which the
// client first named them.
type fetchSession struct {
	id        int32
	nextEpoch int32
	elem      *list.Element // in fetchSessions.lru
	// usesTopicIDs: opened by a Fetch v13+, so its partitions are keyed by
	// topic id, and only v13+ may use it (v12 and lower only without).
	usesTopicIDs bool
	// privileged: a follower's session. created and lastUsed are read and
	// written under fetchSessions.mu, size too (len(parts) at the last use).
	privileged        bool
	created, lastUsed time.Time
	size              int

	mu    sync.Mutex // guards parts, order and topics across a fetch and its answer
	parts map[sessionPartitionKey]*sessionPartition
	order []sessionPartitionKey
	// unnamed counts the partitions whose topic is "" (from v13: id
	// unknown so far), so a fetch looks names up only while there are some.
	unnamed int
	// topics is what request last built, kept while no partition is added,
	// changed, forgotten or moved (nil: build again): an idle follower's
	// requests change nothing, and its session may hold thousands of
	// partitions. Fetches only read it; a change builds new slices.
	topics []kmsg.FetchRequestTopic
}

// fetchSessions is the bounded cache of this broker's fetch sessions.
type fetchSessions struct {
	mu    sync.Mutex
	slots int
	now   func() time.Time // time.Now; tests step a fake clock
	byID  map[int32]*fetchSession
	lru   list.List // front: most recently used
}

func newFetchSessions(slots int) *fetchSessions {
	return &fetchSessions{slots: slots, now: time.Now, byID: map[int32]*fetchSession{}}
}

// sessionFetch is how one Fetch request uses sessions.
type sessionFetch struct {
	session     *fetchSession // nil: a fetch without a session
	incremental bool          // answer only the partitions with news
	errorCode   int16         // non-zero: answer this error and nothing else
}

// begin resolves req's session fields (see the package comment above) and returns
// the request to read: req itself, or for an incremental fetch every partition of
// the session at the positions the client last gave. Without mayOpen a full
// fetch opens no session (it still closes the one it names). An incremental
// fetch names in img (nil: none) its session's partitions that joined with
// their topic id unknown.
func (s *fetchSessions) begin(req *kmsg.FetchRequest, mayOpen bool, img *metadata.Image) (*kmsg.FetchRequest, sessionFetch) {
	if req.Version < 7 {
		return req, sessionFetch{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.SessionEpoch == sessionEpochInitial || req.SessionEpoch == sessionEpochFinal {
		if old := s.byID[req.SessionID]; old != nil {
			s.removeLocked(old)
		}
		if req.SessionEpoch == sessionEpochFinal || !mayOpen {
			return req, sessionFetch{}
		}
		privileged, size := fetchReplicaID(req) >= 0, requestPartitions(req)
		sess := s.createLocked(privileged, size)
		if sess == nil {
			return req, sessionFetch{}
		}
		sess.usesTopicIDs = req.Version >= 13
		sess.mu.Lock()
		sess.update(req.Topics, nil) // a full fetch's forgotten topics mean nothing, as in Kafka
		sess.size = len(sess.parts)
		sess.mu.Unlock()
		return req, sessionFetch{session: sess}
	}
	sess := s.byID[req.SessionID]
	switch {
	case sess == nil:
		return req, sessionFetch{errorCode: kerr.FetchSessionIDNotFound.Code}
	case req.SessionEpoch != sess.nextEpoch:
		return req, sessionFetch{errorCode: kerr.InvalidFetchSessionEpoch.Code}
	case sess.usesTopicIDs != (req.Version >= 13):
		return req, sessionFetch{errorCode: kerr.FetchSessionTopicIDError.Code}
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.update(req.Topics, req.ForgottenTopics)
	sess.nameLate(img)
	if len(sess.parts) == 0 {
		// Nothing left to fetch: the session closes and the fetch is
		// answered without one.
		s.removeLocked(sess)
		return req, sessionFetch{}
	}
	sess.nextEpoch = nextSessionEpoch(sess.nextEpoch)
	s.lru.MoveToFront(sess.elem)
	sess.lastUsed = s.now()
	sess.size = len(sess.parts)
	return sess.request(req), sessionFetch{session: sess, incremental: true}
}

// nextSessionEpoch follows e, wrapping past the largest epoch to 1 (0 and -1 have
// their own meanings).
func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// createLocked opens a session of size partitions, evicting one when the cache
// is full and the rules above allow it; nil when there is no slot for it.
func (s *fetchSessions) createLocked(privileged bool, size int) *fetchSession {
	if s.slots <= 0 {
		return nil
	}
	now := s.now()
	if len(s.byID) >= s.slots {
		victim := s.victimLocked(privileged, size, now)
		if victim == nil {
			return nil
		}
		s.removeLocked(victim)
	}
	id := rand.Int32()
	for id == 0 || s.byID[id] != nil {
		id = rand.Int32()
	}
	sess := &fetchSession{id: id, nextEpoch: 1, privileged: privileged, created: now, lastUsed: now, size: size,
		parts: map[sessionPartitionKey]*sessionPartition{}}
	sess.elem = s.lru.PushFront(sess)
	s.byID[id] = sess
	return sess
}

// victimLocked is the session a new one (privileged, of size partitions) may
// evict from a full cache, or nil.
func (s *fetchSessions) victimLocked(privileged bool, size int, now time.Time) *fetchSession {
	if lru := s.lru.Back().Value.(*fetchSession); now.Sub(lru.lastUsed) > sessionEvictionAge {
		return lru // stale
	}
	var low *fetchSession
	for e := s.lru.Back(); e != nil; e = e.Prev() {
		sess := e.Value.(*fetchSession)
		old := now.Sub(sess.created) > sessionEvictionAge
		if !old && (!privileged || sess.privileged) {
			continue // not evictable by this session
		}
		if low == nil || rankBelow(sess, low) {
			low = sess
		}
	}
	if low == nil || !rankBelow(low, &fetchSession{privileged: privileged, size: size}) {
		return nil
	}
	return low
}

// rankBelow orders sessions for eviction: a consumer's below a follower's, then
// fewer partitions below more.
func rankBelow(a, b *fetchSession) bool {
	if a.privileged != b.privileged {
		return !a.privileged
	}
	return a.size < b.size
}

// requestPartitions counts the partitions a request names.
func requestPartitions(req *kmsg.FetchRequest) int {
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	return n
}

func (s *fetchSessions) removeLocked(sess *fetchSession) {
	s.lru.Remove(sess.elem)
	delete(s.byID, sess.id)
}

// len is the number of cached sessions.
func (s *fetchSessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// key is the session's key of a partition of a request's or response's topic:
// from v13 the name it carries is not part of it.
func (sess *fetchSession) key(topic string, topicID [16]byte, partition int32) sessionPartitionKey {
	if sess.usesTopicIDs {
		topic = ""
	}
	return sessionPartitionKey{topic, topicID, partition}
}

// update applies the partitions of topics (added, or with new positions) and
// forgets those of forgotten. sess.mu is held.
func (sess *fetchSession) update(topics []kmsg.FetchRequestTopic, forgotten []kmsg.FetchRequestForgottenTopic) {
	for _, t := range topics {
		for _, p := range t.Partitions {
			sess.topics = nil
			k := sess.key(t.Topic, t.TopicID, p.Partition)
			if sp := sess.parts[k]; sp != nil {
				if p.CurrentLeaderEpoch != sp.req.CurrentLeaderEpoch || p.FetchOffset < sp.req.FetchOffset {
					// A new leadership or a truncated follower: its
					// high-water mark may no longer be what it was told.
					sp.highWatermark = -2
				}
				sp.req = p
				continue
			}
			sess.parts[k] = &sessionPartition{key: k, topic: t.Topic, req: p, highWatermark: -2, lastStableOffset: -2, logStartOffset: -2}
			if t.Topic == "" {
				sess.unnamed++
			}
			sess.order = append(sess.order, k)
		}
	}
	forgot := false
	for _, t := range forgotten {
		for _, p := range t.Partitions {
			k := sess.key(t.Topic, t.TopicID, p)
			if sp := sess.parts[k]; sp != nil {
				if sp.topic == "" {
					sess.unnamed--
				}
				delete(sess.parts, k)
				forgot = true
			}
		}
	}
	if forgot {
		sess.topics = nil
		kept := sess.order[:0]
		for _, k := range sess.order {
			if sess.parts[k] != nil {
				kept = append(kept, k)
			}
		}
		sess.order = kept
	}
}

// nameLate gives the session's partitions whose topic id was unknown their
// topic's name in img, once it is there: kept from then on, as Kafka's
// CachedPartition resolves an unknown name once. sess.mu is held.
func (sess *fetchSession) nameLate(img *metadata.Image) {
	if sess.unnamed == 0 || img == nil {
		return
	}
	for _, sp := range sess.parts {
		if sp.topic != "" {
			continue
		}
		if t := img.TopicByID(sp.key.topicID); t != nil {
			sp.topic = t.Name
			sess.unnamed--
			sess.topics = nil
		}
	}
}

// request is req with every partition of the session, grouped by topic in the
// order the client first named them. sess.mu is held.
func (sess *fetchSession) request(req *kmsg.FetchRequest) *kmsg.FetchRequest {
	full := *req
	full.ForgottenTopics = nil
	if sess.topics == nil {
		sess.topics = []kmsg.FetchRequestTopic{}
		for _, k := range sess.order {
			sp := sess.parts[k]
			n := len(sess.topics)
			if n == 0 || sess.topics[n-1].Topic != sp.topic || sess.topics[n-1].TopicID != k.topicID {
				t := kmsg.NewFetchRequestTopic()
				t.Topic, t.TopicID = sp.topic, k.topicID
				sess.topics = append(sess.topics, t)
				n++
			}
			sess.topics[n-1].Partitions = append(sess.topics[n-1].Partitions, sp.req)
		}
	}
	full.Topics = sess.topics
	return &full
}

// finish shapes the answer to a fetch that used sf: it records what the client is
// told and, for an incremental fetch, drops the partitions without news (releasing
// nothing: a partition with file-backed records always has news). It returns the
// answer's partitions' file ranges, re-keyed when partitions were dropped.
func (sf sessionFetch) finish(resp *kmsg.FetchResponse, files map[*kmsg.FetchResponseTopicPartition]*fileRecords) map[*kmsg.FetchResponseTopicPartition]*fileRecords {
	sess := sf.session
	if sess == nil {
		return files
	}
	resp.SessionID = sess.id
	sess.mu.Lock()
	defer sess.mu.Unlock()
	kept := make(map[*kmsg.FetchResponseTopicPartition]*fileRecords, len(files))
	var read []sessionPartitionKey // partitions that returned records
	topics := resp.Topics[:0]
	for _, t := range resp.Topics {
		parts := t.Partitions[:0]
		for i := range t.Partitions {
			p := &t.Partitions[i]
			f := files[p]
			news := f != nil || len(p.RecordBatches) > 0 || p.ErrorCode != 0 ||
				p.DivergingEpoch.Epoch >= 0 || p.PreferredReadReplica >= 0
			if sp := sess.parts[sess.key(t.Topic, t.TopicID, p.Partition)]; sp != nil {
				if sp.highWatermark != p.HighWatermark || sp.lastStableOffset != p.LastStableOffset || sp.logStartOffset != p.LogStartOffset {
					news = true
					sp.highWatermark, sp.lastStableOffset, sp.logStartOffset = p.HighWatermark, p.LastStableOffset, p.LogStartOffset
				}
				if p.ErrorCode != 0 {
					// Forget what was sent, so the first answer without the
					// error is sent too (Kafka resets its cached HWM likewise).
					sp.highWatermark = -2
				}
			}
			if sf.incremental && !news {
				continue
			}
			parts = append(parts, *p)
			if f != nil {
				kept[&parts[len(parts)-1]] = f
			}
			if sf.incremental && (f != nil || len(p.RecordBatches) > 0) {
				read = append(read, sess.key(t.Topic, t.TopicID, p.Partition))
			}
		}
		if len(parts) > 0 || !sf.incremental {
			t.Partitions = parts
			topics = append(topics, t)
		}
	}
	resp.Topics = topics
	sess.moveToEnd(read)
	return kept
}

// moveToEnd moves the partitions keys (that just returned records) to the end
// of the session's order, keeping the order of the rest and of keys. sess.mu
// is held.
func (sess *fetchSession) moveToEnd(keys []sessionPartitionKey) {
	if len(keys) == 0 {
		return
	}
	sess.topics = nil
	moved := make(map[sessionPartitionKey]bool, len(keys))
	for _, k := range keys {
		moved[k] = true
	}
	kept := sess.order[:0]
	for _, k := range sess.order {
		if !moved[k] {
			kept = append(kept, k)
		}
	}
	for _, k := range keys {
		if moved[k] && sess.parts[k] != nil {
			moved[k] = false // a partition named twice moves once
			kept = append(kept, k)
		}
	}
	sess.order = kept
}
