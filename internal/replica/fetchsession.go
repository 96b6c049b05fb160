package replica

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
)

// Follower fetch sessions (KIP-227), the follower's half; the leader's is
// handlers/fetch_sessions.go. A fetcher's first request to its leader names
// every partition it fetches and opens a session (epoch 0); the leader answers
// with the session's id. Each later request carries the next epoch and names
// only the partitions added or changed since the last answered request
// (position, leader epoch, log start, ...), and forgets those the fetcher no
// longer fetches; the leader reads every partition of its session at the
// positions last named and answers only those with news (records, an error, a
// divergence, a new high-water mark or log start). An idle follower of
// thousands of partitions thus sends and receives almost nothing.
//
// The two halves must agree on the session's partitions. Any doubt starts over
// with a full fetch (epoch 0, closing the old session): a request with no answer
// (the leader may have applied it), FETCH_SESSION_ID_NOT_FOUND (the leader
// restarted or evicted the session; a new id), INVALID_FETCH_SESSION_EPOCH or
// any other top-level error. A leader answering a full fetch without a session
// id (its cache is full or off) gets full fetches, each asking for a session.

// sessionKey names a partition in a follower's session.
type sessionKey struct {
	topic     string
	topicID   metadata.UUID
	partition int32
}

// sessionPosition is what a follower last told the leader's session about a
// partition: a request naming it again differs in one of these.
type sessionPosition struct {
	currentLeaderEpoch, lastFetchedEpoch int32
	fetchOffset, logStartOffset          int64
	maxBytes                             int32
}

func positionOf(rp *kmsg.FetchRequestTopicPartition) sessionPosition {
	return sessionPosition{rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.FetchOffset, rp.LogStartOffset, rp.PartitionMaxBytes}
}

// sessionPartition is a partition a fetcher wants this round, as a full
// request would name it.
type sessionPartition struct {
	key sessionKey
	req kmsg.FetchRequestTopicPartition
}

// followerSession is a fetcher's session with its leader broker. Only the
// fetcher's goroutine uses it.
type followerSession struct {
	id    int32 // 0: none (yet)
	epoch int32 // of the next request: 0 opens a session with a full fetch
	// parts is the session's partitions as last named, with the round that
	// last wanted each (stale ones are forgotten).
	parts map[sessionKey]*sessionEntry
	round uint64
	// topics and forgotten index the request's topic entries while it is
	// built (reused).
	topics, forgotten map[topicKey]int
}

type sessionEntry struct {
	pos   sessionPosition
	round uint64
}

// build fills req's session fields, its topics and forgotten topics for a
// round that fetches want: every partition of want for a full fetch, else
// those added or changed since the last request and the forgotten ones. It
// takes the request as answered: every other outcome must call reset (done by
// answered).
func (s *followerSession) build(req *kmsg.FetchRequest, want []sessionPartition) {
	req.SessionID, req.SessionEpoch = s.id, s.epoch
	req.Topics, req.ForgottenTopics = req.Topics[:0], req.ForgottenTopics[:0]
	if s.parts == nil {
		s.parts = make(map[sessionKey]*sessionEntry, len(want))
	}
	if s.epoch == sessionEpochInitial {
		clear(s.parts) // a full fetch names every partition
	}
	if s.topics == nil {
		s.topics, s.forgotten = map[topicKey]int{}, map[topicKey]int{}
	}
	clear(s.topics)
	clear(s.forgotten)
	s.round++
	for i := range want {
		w := &want[i]
		pos := positionOf(&w.req)
		e := s.parts[w.key]
		switch {
		case e == nil:
			s.parts[w.key] = &sessionEntry{pos: pos, round: s.round}
		case e.pos != pos:
			e.pos, e.round = pos, s.round
		default:
			e.round = s.round
			continue // the leader's session has it as it is
		}
		t := s.requestTopic(req, w.key)
		t.Partitions = append(t.Partitions, w.req)
	}
	for k, e := range s.parts {
		if e.round == s.round {
			continue
		}
		delete(s.parts, k)
		t := s.forgottenTopic(req, k)
		t.Partitions = append(t.Partitions, k.partition)
	}
}

// topicKey names a topic of a request.
type topicKey struct {
	topic   string
	topicID metadata.UUID
}

// requestTopic is req's entry for k's topic, added when missing (a request
// names a topic once).
func (s *followerSession) requestTopic(req *kmsg.FetchRequest, k sessionKey) *kmsg.FetchRequestTopic {
	tk := topicKey{k.topic, k.topicID}
	if i, ok := s.topics[tk]; ok {
		return &req.Topics[i]
	}
	s.topics[tk] = len(req.Topics)
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = k.topic, k.topicID
	req.Topics = append(req.Topics, t)
	return &req.Topics[len(req.Topics)-1]
}

// forgottenTopic is requestTopic for the topics of forgotten partitions.
func (s *followerSession) forgottenTopic(req *kmsg.FetchRequest, k sessionKey) *kmsg.FetchRequestForgottenTopic {
	tk := topicKey{k.topic, k.topicID}
	if i, ok := s.forgotten[tk]; ok {
		return &req.ForgottenTopics[i]
	}
	s.forgotten[tk] = len(req.ForgottenTopics)
	t := kmsg.NewFetchRequestForgottenTopic()
	t.Topic, t.TopicID = k.topic, k.topicID
	req.ForgottenTopics = append(req.ForgottenTopics, t)
	return &req.ForgottenTopics[len(req.ForgottenTopics)-1]
}

// answered moves the session on after the request build made: err is the
// transport's (no answer), else resp is the leader's answer. It reports
// whether the answer's partitions may be applied.
func (s *followerSession) answered(resp *kmsg.FetchResponse, err error) bool {
	switch {
	case err != nil:
		s.reset(false)
		return false
	case resp.ErrorCode == kerr.FetchSessionIDNotFound.Code:
		s.reset(true)
		return false
	case resp.ErrorCode != 0:
		s.reset(false)
		return false
	case resp.SessionID == 0:
		// No session: the leader's cache had no room, or it closed ours.
		s.reset(true)
	case s.epoch == sessionEpochInitial:
		s.id, s.epoch = resp.SessionID, 1
	default:
		s.epoch = nextSessionEpoch(s.epoch)
	}
	return true
}

// reset makes the next request a full fetch opening a new session; unless
// forget, it names the current one so that the leader closes it.
func (s *followerSession) reset(forget bool) {
	if forget {
		s.id = 0
	}
	s.epoch = sessionEpochInitial
	clear(s.parts)
}

// sessionEpochInitial is the session epoch of a full fetch that opens a
// session (KIP-227).
const sessionEpochInitial int32 = 0

// nextSessionEpoch follows e, wrapping past the largest epoch to 1 (0 and -1
// have their own meanings), as the leader does.
func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}
