package handlers

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchReq builds a Fetch v12 request naming topic t's partitions at offsets.
func fetchReq(id, epoch int32, t string, offsets map[int32]int64, forget ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.SessionID, req.SessionEpoch = id, epoch
	if len(offsets) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = t
		for p := range int32(16) {
			if o, ok := offsets[p]; ok {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset = p, o
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = t, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// answer is what a broker would read for the partitions of read: hwm per
// partition, and records for those in withData.
func answer(read *kmsg.FetchRequest, hwm map[int32]int64, withData ...int32) *kmsg.FetchResponse {
	resp := read.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range read.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hwm[rp.Partition], hwm[rp.Partition], 0
			for _, p := range withData {
				if p == rp.Partition {
					sp.RecordBatches = []byte{1}
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func partitionsOf(resp *kmsg.FetchResponse) []int32 {
	var out []int32
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.Partition)
		}
	}
	return out
}

func TestFetchSessions(t *testing.T) {
	s := newFetchSessions(2)
	hwm := map[int32]int64{0: 5, 1: 7, 2: 9}

	// A full fetch opens a session and answers every partition.
	read, sf := s.begin(fetchReq(0, 0, "t", map[int32]int64{0: 0, 1: 0, 2: 0}), true, nil)
	resp := answer(read, hwm)
	sf.finish(resp, nil)
	if resp.SessionID == 0 || len(partitionsOf(resp)) != 3 {
		t.Fatalf("full fetch: session %d, partitions %v", resp.SessionID, partitionsOf(resp))
	}
	id := resp.SessionID

	// An incremental fetch naming nothing reads every partition of the session at
	// its cached position, and answers none when nothing changed.
	read, sf = s.begin(fetchReq(id, 1, "t", nil), true, nil)
	if sf.errorCode != 0 || len(read.Topics) != 1 || len(read.Topics[0].Partitions) != 3 {
		t.Fatalf("incremental read: error %d, topics %+v", sf.errorCode, read.Topics)
	}
	resp = answer(read, hwm)
	sf.finish(resp, nil)
	if got := partitionsOf(resp); len(got) != 0 || resp.SessionID != id {
		t.Fatalf("nothing changed: session %d, partitions %v", resp.SessionID, got)
	}

	// News: records on 1, a new high-water mark on 2.
	read, sf = s.begin(fetchReq(id, 2, "t", map[int32]int64{1: 3}), true, nil)
	for _, p := range read.Topics[0].Partitions {
		if p.Partition == 1 && p.FetchOffset != 3 {
			t.Fatalf("partition 1 read at %d, want the updated 3", p.FetchOffset)
		}
	}
	hwm[2] = 10
	resp = answer(read, hwm, 1)
	sf.finish(resp, nil)
	if got := partitionsOf(resp); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("news on 1 and 2: partitions %v", got)
	}

	// Forgotten partitions are no longer read.
	read, sf = s.begin(fetchReq(id, 3, "t", nil, 0, 2), true, nil)
	if len(read.Topics) != 1 || len(read.Topics[0].Partitions) != 1 || read.Topics[0].Partitions[0].Partition != 1 {
		t.Fatalf("after forgetting 0 and 2: %+v", read.Topics)
	}
	sf.finish(answer(read, hwm), nil)

	for _, tc := range []struct {
		name      string
		id, epoch int32
		want      int16
	}{
		{"a stale epoch", id, 3, kerr.InvalidFetchSessionEpoch.Code},
		{"an epoch from the future", id, 9, kerr.InvalidFetchSessionEpoch.Code},
		{"an unknown session", id + 1, 1, kerr.FetchSessionIDNotFound.Code},
	} {
		if _, sf := s.begin(fetchReq(tc.id, tc.epoch, "t", nil), true, nil); sf.errorCode != tc.want {
			t.Errorf("%s: error %d, want %d", tc.name, sf.errorCode, tc.want)
		}
	}
	// The right epoch still works after refusals.
	if _, sf := s.begin(fetchReq(id, 4, "t", nil), true, nil); sf.errorCode != 0 {
		t.Fatalf("epoch 4: error %d", sf.errorCode)
	}

	// The cache holds two sessions. Once both are older than the eviction age,
	// a third of three partitions evicts the one of one partition
	// (TestFetchSessionEvictionRules covers the rest).
	_, sfA := s.begin(fetchReq(0, 0, "t", map[int32]int64{0: 0, 1: 0}), true, nil)
	if s.len() != 2 || sfA.session == nil {
		t.Fatalf("%d sessions cached, want 2", s.len())
	}
	later := time.Now().Add(sessionEvictionAge + time.Second)
	s.now = func() time.Time { return later }
	if _, sf := s.begin(fetchReq(id, 5, "t", nil), true, nil); sf.errorCode != 0 {
		t.Fatalf("epoch 5: error %d", sf.errorCode)
	}
	if _, sf := s.begin(fetchReq(sfA.session.id, 1, "t", nil), true, nil); sf.errorCode != 0 {
		t.Fatalf("session A: error %d", sf.errorCode)
	}
	_, sfB := s.begin(fetchReq(0, 0, "t", map[int32]int64{0: 0, 1: 0, 2: 0}), true, nil)
	if s.len() != 2 || sfB.session == nil {
		t.Fatalf("%d sessions cached, want 2", s.len())
	}
	if _, sf := s.begin(fetchReq(id, 6, "t", nil), true, nil); sf.errorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("the evicted session: error %d", sf.errorCode)
	}
	if _, sf := s.begin(fetchReq(sfB.session.id, 1, "t", nil), true, nil); sf.errorCode != 0 {
		t.Fatalf("the newest session: error %d", sf.errorCode)
	}

	// Epoch -1 closes a session and fetches without one; so does a version < 7.
	if read, sf := s.begin(fetchReq(sfA.session.id, -1, "t", map[int32]int64{0: 0}), true, nil); sf.session != nil || len(read.Topics) != 1 {
		t.Fatalf("final epoch: %+v", sf)
	}
	if _, sf := s.begin(fetchReq(sfA.session.id, 1, "t", nil), true, nil); sf.errorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("a closed session: error %d", sf.errorCode)
	}
	old := fetchReq(0, 0, "t", map[int32]int64{0: 0})
	old.SetVersion(6)
	if _, sf := s.begin(old, true, nil); sf.session != nil {
		t.Fatal("Fetch v6 opened a session")
	}
}

func TestNextSessionEpochWraps(t *testing.T) {
	if got := nextSessionEpoch(1<<31 - 1); got != 1 {
		t.Fatalf("after the largest epoch: %d, want 1", got)
	}
	if got := nextSessionEpoch(7); got != 8 {
		t.Fatalf("after 7: %d", got)
	}
}

// TestFetchSessionKeepsFileRanges: dropping partitions without news keeps each
// remaining partition's file range with it.
func TestFetchSessionKeepsFileRanges(t *testing.T) {
	s := newFetchSessions(1)
	hwm := map[int32]int64{0: 1, 1: 1, 2: 1}
	read, sf := s.begin(fetchReq(0, 0, "t", map[int32]int64{0: 0, 1: 0, 2: 0}), true, nil)
	resp := answer(read, hwm)
	sf.finish(resp, nil)

	read, sf = s.begin(fetchReq(resp.SessionID, 1, "t", nil), true, nil)
	resp = answer(read, hwm)
	f := &fileRecords{n: 42}
	files := sf.finish(resp, map[*kmsg.FetchResponseTopicPartition]*fileRecords{&resp.Topics[0].Partitions[2]: f})
	if got := partitionsOf(resp); len(got) != 1 || got[0] != 2 {
		t.Fatalf("partitions %v, want only 2", got)
	}
	if len(files) != 1 || files[&resp.Topics[0].Partitions[0]] != f {
		t.Fatalf("file ranges %v: partition 2's range is not under its answer", files)
	}
}

// TestFetchSessionEvictionRules: a full cache takes a new session only by
// evicting a stale session, or a lower-ranked one it may evict (Kafka's
// FetchSessionCache rules, see fetch_sessions.go).
func TestFetchSessionEvictionRules(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newFetchSessions(2)
	s.now = func() time.Time { return now }
	open := func(replica int32, partitions int) *fetchSession {
		t.Helper()
		offsets := map[int32]int64{}
		for p := range int32(partitions) {
			offsets[p] = 0
		}
		req := fetchReq(0, 0, "t", offsets)
		req.ReplicaID = replica
		_, sf := s.begin(req, true, nil)
		return sf.session
	}
	cached := func(sess *fetchSession) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.byID[sess.id] == sess
	}
	use := func(sess *fetchSession) {
		t.Helper()
		if _, sf := s.begin(fetchReq(sess.id, sess.nextEpoch, "t", nil), true, nil); sf.errorCode != 0 {
			t.Fatalf("session %d: error %d", sess.id, sf.errorCode)
		}
	}

	small, large := open(-1, 2), open(-1, 4)
	if small == nil || large == nil {
		t.Fatal("a cache with room opened no session")
	}
	// Young sessions: a consumer's session of as many or fewer partitions gets
	// no slot, nor one of more (a consumer evicts only sessions older than the
	// eviction age).
	for _, n := range []int{1, 2, 8} {
		if sess := open(-1, n); sess != nil {
			t.Fatalf("a consumer's session of %d partitions evicted a young one", n)
		}
	}
	// A follower's session evicts the lowest-ranked consumer session, young or not.
	follower := open(2, 1)
	if follower == nil || cached(small) || !cached(large) {
		t.Fatalf("a follower's session: opened %v, small cached %v, large cached %v", follower != nil, cached(small), cached(large))
	}
	// Another follower's may not evict a young follower's session, but may
	// evict the consumer's.
	follower2 := open(3, 1)
	if follower2 == nil || cached(large) || !cached(follower) {
		t.Fatalf("a second follower's session: opened %v, consumer's cached %v, first follower's cached %v", follower2 != nil, cached(large), cached(follower))
	}
	// Nor a third, until the sessions are older than the eviction age; then the
	// one with more partitions evicts one with fewer.
	if open(4, 2) != nil {
		t.Fatal("a follower's session evicted a young follower's")
	}
	now = now.Add(sessionEvictionAge / 2)
	use(follower)
	use(follower2)
	now = now.Add(sessionEvictionAge/2 + time.Second)
	if open(-1, 8) != nil {
		t.Fatal("a consumer's session evicted a follower's session, old but in use")
	}
	if open(4, 1) != nil {
		t.Fatal("a follower's session of one partition evicted an old follower's of as many")
	}
	follower3 := open(4, 2)
	if follower3 == nil || s.len() != 2 {
		t.Fatalf("an old follower's session was not evicted by one of more partitions (%d cached)", s.len())
	}
	// A session unused for longer than the eviction age is stale: any new
	// session evicts it, the least recently used first.
	now = now.Add(time.Second)
	use(follower3)
	now = now.Add(sessionEvictionAge + time.Second)
	for range 2 {
		if open(-1, 1) == nil {
			t.Fatal("a stale session was not evicted")
		}
	}
	if cached(follower3) {
		t.Fatal("the stale follower's session is still cached")
	}

	// No slots: no sessions.
	if _, sf := newFetchSessions(0).begin(fetchReq(0, 0, "t", map[int32]int64{0: 0}), true, nil); sf.session != nil {
		t.Fatal("a cache of 0 slots opened a session")
	}
}

// TestFetchSessionRotatesPartitionsWithData: after an incremental fetch the
// partitions that returned records are read last next time, so a small
// MaxBytes starves none of many partitions.
func TestFetchSessionRotatesPartitionsWithData(t *testing.T) {
	s := newFetchSessions(1)
	hwm := map[int32]int64{0: 9, 1: 9, 2: 9, 3: 9}
	read, sf := s.begin(fetchReq(0, 0, "t", map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}), true, nil)
	resp := answer(read, hwm, 0, 1)
	sf.finish(resp, nil)
	id := resp.SessionID

	// A full fetch keeps the order the client gave (answer lists what was read,
	// in order).
	read, sf = s.begin(fetchReq(id, 1, "t", nil), true, nil)
	if got := partitionsOf(answer(read, hwm)); !slices.Equal(got, []int32{0, 1, 2, 3}) {
		t.Fatalf("after the full fetch: read order %v", got)
	}
	// Records from 0 and 1 (one file-backed): they go to the back.
	resp = answer(read, hwm, 1)
	sf.finish(resp, map[*kmsg.FetchResponseTopicPartition]*fileRecords{&resp.Topics[0].Partitions[0]: {n: 1}})
	read, sf = s.begin(fetchReq(id, 2, "t", nil), true, nil)
	if got := partitionsOf(answer(read, hwm)); !slices.Equal(got, []int32{2, 3, 0, 1}) {
		t.Fatalf("after records from 0 and 1: read order %v", got)
	}
	// The rotated order splits the topic into runs; records from 3 move it last.
	resp = answer(read, hwm, 3)
	sf.finish(resp, nil)
	read, _ = s.begin(fetchReq(id, 3, "t", nil), true, nil)
	if got := partitionsOf(answer(read, hwm)); !slices.Equal(got, []int32{2, 0, 1, 3}) {
		t.Fatalf("after records from 3: read order %v", got)
	}
}

// TestFetchSessionResendsAfterError: a partition answered with an error is
// answered again once the error is gone, even at an unchanged high-water mark.
func TestFetchSessionResendsAfterError(t *testing.T) {
	s := newFetchSessions(1)
	hwm := map[int32]int64{0: 5, 1: 5}
	read, sf := s.begin(fetchReq(0, 0, "t", map[int32]int64{0: 0, 1: 0}), true, nil)
	resp := answer(read, hwm)
	sf.finish(resp, nil)
	id := resp.SessionID

	read, sf = s.begin(fetchReq(id, 1, "t", nil), true, nil)
	resp = answer(read, hwm)
	resp.Topics[0].Partitions[1].ErrorCode = kerr.NotLeaderForPartition.Code
	sf.finish(resp, nil)
	if got := partitionsOf(resp); !slices.Equal(got, []int32{1}) {
		t.Fatalf("with an error on 1: partitions %v", got)
	}
	read, sf = s.begin(fetchReq(id, 2, "t", nil), true, nil)
	resp = answer(read, hwm)
	sf.finish(resp, nil)
	if got := partitionsOf(resp); !slices.Equal(got, []int32{1}) {
		t.Fatalf("after the error on 1 went: partitions %v", got)
	}
}

// TestFetchSessionResendsToMovedFollower: a follower naming a partition again
// at a new leader epoch or at a lower offset (it truncated) is told the
// high-water mark again, unchanged as it is: what it held may have been cut.
// An offset that only moved on is answered only with news.
func TestFetchSessionResendsToMovedFollower(t *testing.T) {
	for _, tc := range []struct {
		name        string
		epoch       int32
		offset      int64
		wantAnswers bool
	}{
		{"same epoch, offset on", 3, 6, false},
		{"new leader epoch", 4, 5, true},
		{"offset back (truncated)", 3, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFetchSessions(1)
			hwm := map[int32]int64{0: 5}
			req := fetchReq(0, 0, "t", map[int32]int64{0: 5})
			req.Topics[0].Partitions[0].CurrentLeaderEpoch = 3
			read, sf := s.begin(req, true, nil)
			resp := answer(read, hwm)
			sf.finish(resp, nil)

			req = fetchReq(resp.SessionID, 1, "t", map[int32]int64{0: tc.offset})
			req.Topics[0].Partitions[0].CurrentLeaderEpoch = tc.epoch
			read, sf = s.begin(req, true, nil)
			resp = answer(read, hwm)
			sf.finish(resp, nil)
			if got := len(partitionsOf(resp)) == 1; got != tc.wantAnswers {
				t.Fatalf("partition answered: %v, want %v", got, tc.wantAnswers)
			}
		})
	}
}

// TestFetchSessionTopicIDUsage: a session opened by a Fetch of v13+ (topics by
// id) used by one of v12 or lower (by name), or the other way round, is
// answered FETCH_SESSION_TOPIC_ID_ERROR, as Kafka's FetchManager answers: its
// partitions cannot be matched across the two. The session stays as it was.
func TestFetchSessionTopicIDUsage(t *testing.T) {
	for _, tc := range []struct{ open, use int16 }{{13, 12}, {12, 13}} {
		s := newFetchSessions(1)
		req := fetchReq(0, 0, "t", map[int32]int64{0: 0})
		req.SetVersion(tc.open)
		_, sf := s.begin(req, true, nil)
		req = fetchReq(sf.session.id, 1, "t", nil)
		req.SetVersion(tc.use)
		if _, sf := s.begin(req, true, nil); sf.errorCode != kerr.FetchSessionTopicIDError.Code {
			t.Errorf("session of v%d used by v%d: error %d, want FETCH_SESSION_TOPIC_ID_ERROR", tc.open, tc.use, sf.errorCode)
		}
		req.SetVersion(tc.open)
		if _, sf := s.begin(req, true, nil); sf.errorCode != 0 {
			t.Errorf("session of v%d used by v%d after the refusal: error %d", tc.open, tc.open, sf.errorCode)
		}
	}
}

// TestFetchSessionClosesWhenEmpty: an incremental fetch that forgets the
// session's last partitions closes it and is answered without a session (id
// 0), as Kafka's FetchManager does; the client opens a new one with its next
// full fetch.
func TestFetchSessionClosesWhenEmpty(t *testing.T) {
	s := newFetchSessions(1)
	_, sf := s.begin(fetchReq(0, 0, "t", map[int32]int64{0: 0, 1: 0}), true, nil)
	id := sf.session.id
	read, sf := s.begin(fetchReq(id, 1, "t", nil, 0, 1), true, nil)
	resp := answer(read, nil)
	sf.finish(resp, nil)
	if resp.SessionID != 0 || sf.session != nil || s.len() != 0 {
		t.Fatalf("forgetting every partition: answered session %d, %d sessions cached; want 0 and 0", resp.SessionID, s.len())
	}
	if _, sf := s.begin(fetchReq(id, 2, "t", nil), true, nil); sf.errorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("the closed session: error %d, want FETCH_SESSION_ID_NOT_FOUND", sf.errorCode)
	}
}

// TestFullFetchIgnoresForgottenTopics: a full fetch that opens a session
// keeps every partition it names in the session, forgotten topics or not, as
// Kafka's FullFetchContext ignores them: the answer had the partition, so the
// session's incremental fetches read it too. Strata used to drop it from the
// session.
func TestFullFetchIgnoresForgottenTopics(t *testing.T) {
	s := newFetchSessions(1)
	read, sf := s.begin(fetchReq(0, 0, "t", map[int32]int64{0: 0, 1: 0}, 1), true, nil)
	resp := answer(read, nil)
	sf.finish(resp, nil)
	if got := partitionsOf(resp); !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("full fetch answered %v, want [0 1]", got)
	}
	read, _ = s.begin(fetchReq(sf.session.id, 1, "t", nil), true, nil)
	if got := partitionsOf(answer(read, nil)); !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("incremental fetch reads %v, want [0 1]", got)
	}
}
