package replica

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
)

// sessionRound is one fetch of a follower's session: the partitions wanted
// (name "t-0" or "u-1" at an offset), the request expected, then the answer.
type sessionRound struct {
	want map[string]int64 // partition -> fetch offset; leader epoch 1 unless in epochs
	// epochs overrides a partition's leader epoch.
	epochs map[string]int32

	// The request: its session id and epoch, the partitions it names and
	// those it forgets (sorted "topic-partition").
	id, epoch      int32
	named, forgets []string

	// The answer: err (transport), code (top-level error), else a session id.
	err      error
	code     int16
	answerID int32
}

func TestFollowerSession(t *testing.T) {
	lost := errors.New("connection reset")
	idle := map[string]int64{"t-0": 5, "t-1": 7, "u-0": 3}
	for _, tc := range []struct {
		name   string
		rounds []sessionRound
	}{
		{"idle: full, then nothing", []sessionRound{
			{want: idle, id: 0, epoch: 0, named: []string{"t-0", "t-1", "u-0"}, answerID: 42},
			{want: idle, id: 42, epoch: 1, answerID: 42},
			{want: idle, id: 42, epoch: 2, answerID: 42},
		}},
		{"moved offsets and a new leader epoch are named", []sessionRound{
			{want: idle, named: []string{"t-0", "t-1", "u-0"}, answerID: 42},
			{want: map[string]int64{"t-0": 6, "t-1": 7, "u-0": 3}, id: 42, epoch: 1, named: []string{"t-0"}, answerID: 42},
			{want: map[string]int64{"t-0": 6, "t-1": 7, "u-0": 3}, epochs: map[string]int32{"u-0": 2}, id: 42, epoch: 2, named: []string{"u-0"}, answerID: 42},
			{want: map[string]int64{"t-0": 6, "t-1": 7, "u-0": 3}, epochs: map[string]int32{"u-0": 2}, id: 42, epoch: 3, answerID: 42},
		}},
		{"added and removed partitions", []sessionRound{
			{want: idle, named: []string{"t-0", "t-1", "u-0"}, answerID: 42},
			{want: map[string]int64{"t-0": 5, "t-2": 0}, id: 42, epoch: 1, named: []string{"t-2"}, forgets: []string{"t-1", "u-0"}, answerID: 42},
			{want: map[string]int64{"t-0": 5, "t-2": 0, "u-0": 3}, id: 42, epoch: 2, named: []string{"u-0"}, answerID: 42},
		}},
		{"lost answer: full fetch closing the session", []sessionRound{
			{want: idle, named: []string{"t-0", "t-1", "u-0"}, answerID: 42},
			{want: map[string]int64{"t-0": 6, "t-1": 7, "u-0": 3}, id: 42, epoch: 1, named: []string{"t-0"}, err: lost},
			{want: map[string]int64{"t-0": 6, "t-1": 7, "u-0": 3}, id: 42, epoch: 0, named: []string{"t-0", "t-1", "u-0"}, answerID: 43},
			{want: map[string]int64{"t-0": 6, "t-1": 7, "u-0": 3}, id: 43, epoch: 1, answerID: 43},
		}},
		{"session not found (evicted, leader restarted): a new one", []sessionRound{
			{want: idle, named: []string{"t-0", "t-1", "u-0"}, answerID: 42},
			{want: idle, id: 42, epoch: 1, code: kerr.FetchSessionIDNotFound.Code},
			{want: idle, id: 0, epoch: 0, named: []string{"t-0", "t-1", "u-0"}, answerID: 7},
			{want: idle, id: 7, epoch: 1, answerID: 7},
		}},
		{"invalid epoch: closes and reopens", []sessionRound{
			{want: idle, named: []string{"t-0", "t-1", "u-0"}, answerID: 42},
			{want: idle, id: 42, epoch: 1, answerID: 42},
			{want: idle, id: 42, epoch: 2, code: kerr.InvalidFetchSessionEpoch.Code},
			{want: idle, id: 42, epoch: 0, named: []string{"t-0", "t-1", "u-0"}, answerID: 42},
			{want: idle, id: 42, epoch: 1, answerID: 42},
		}},
		{"other top-level error: full fetch", []sessionRound{
			{want: idle, named: []string{"t-0", "t-1", "u-0"}, answerID: 42},
			{want: idle, id: 42, epoch: 1, code: kerr.ClusterAuthorizationFailed.Code},
			{want: idle, id: 42, epoch: 0, named: []string{"t-0", "t-1", "u-0"}, answerID: 42},
		}},
		{"no session from the leader: full fetches asking for one", []sessionRound{
			{want: idle, named: []string{"t-0", "t-1", "u-0"}, answerID: 0},
			{want: idle, id: 0, epoch: 0, named: []string{"t-0", "t-1", "u-0"}, answerID: 0},
			{want: idle, id: 0, epoch: 0, named: []string{"t-0", "t-1", "u-0"}, answerID: 9},
			{want: idle, id: 9, epoch: 1, answerID: 9},
		}},
		{"session closed by the leader in an incremental answer", []sessionRound{
			{want: idle, named: []string{"t-0", "t-1", "u-0"}, answerID: 42},
			{want: idle, id: 42, epoch: 1, answerID: 0},
			{want: idle, id: 0, epoch: 0, named: []string{"t-0", "t-1", "u-0"}, answerID: 5},
		}},
		{"everything removed, then added back", []sessionRound{
			{want: idle, named: []string{"t-0", "t-1", "u-0"}, answerID: 42},
			{want: map[string]int64{"t-0": 5}, id: 42, epoch: 1, forgets: []string{"t-1", "u-0"}, answerID: 42},
			{want: idle, id: 42, epoch: 2, named: []string{"t-1", "u-0"}, answerID: 42},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s followerSession
			for i, r := range tc.rounds {
				req := kmsg.NewPtrFetchRequest()
				s.build(req, wantOf(r.want, r.epochs))
				named, forgets := requestNames(req)
				if req.SessionID != r.id || req.SessionEpoch != r.epoch || !slices.Equal(named, r.named) || !slices.Equal(forgets, r.forgets) {
					t.Fatalf("round %d: request session %d epoch %d naming %v forgetting %v; want session %d epoch %d naming %v forgetting %v",
						i, req.SessionID, req.SessionEpoch, named, forgets, r.id, r.epoch, r.named, r.forgets)
				}
				resp := kmsg.NewPtrFetchResponse()
				resp.ErrorCode, resp.SessionID = r.code, r.answerID
				if r.err != nil {
					resp = nil
				}
				if ok := s.answered(resp, r.err); ok != (r.err == nil && r.code == 0) {
					t.Fatalf("round %d: answered %v", i, ok)
				}
			}
		})
	}
}

// TestFollowerSessionEpochWraps: past the largest epoch the session goes on at
// 1, as the leader expects (0 would open a new session).
func TestFollowerSessionEpochWraps(t *testing.T) {
	s := followerSession{id: 42, epoch: 1<<31 - 1}
	req := kmsg.NewPtrFetchRequest()
	s.build(req, nil)
	resp := kmsg.NewPtrFetchResponse()
	resp.SessionID = 42
	s.answered(resp, nil)
	if s.epoch != 1 {
		t.Fatalf("epoch after the largest: %d, want 1", s.epoch)
	}
}

// wantOf builds a round's partitions from "topic-partition" names.
func wantOf(offsets map[string]int64, epochs map[string]int32) []sessionPartition {
	var want []sessionPartition
	for name, off := range offsets {
		var topic string
		var index int32
		if _, err := fmt.Sscanf(name, "%1s-%d", &topic, &index); err != nil {
			panic(name)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch = index, off, 1
		if e, ok := epochs[name]; ok {
			rp.CurrentLeaderEpoch = e
		}
		want = append(want, sessionPartition{key: sessionKey{topic, metadata.UUID{topic[0]}, index}, req: rp})
	}
	return want
}

// requestNames lists the partitions a request names and forgets, sorted,
// checking that each topic appears once with its id.
func requestNames(req *kmsg.FetchRequest) (named, forgets []string) {
	seen := map[string]bool{}
	for _, t := range req.Topics {
		if seen[t.Topic] || t.TopicID != [16]byte(metadata.UUID{t.Topic[0]}) {
			panic("topic named twice or without its id: " + t.Topic)
		}
		seen[t.Topic] = true
		for _, p := range t.Partitions {
			named = append(named, fmt.Sprintf("%s-%d", t.Topic, p.Partition))
		}
	}
	clear(seen)
	for _, t := range req.ForgottenTopics {
		if seen[t.Topic] {
			panic("topic forgotten twice: " + t.Topic)
		}
		seen[t.Topic] = true
		for _, p := range t.Partitions {
			forgets = append(forgets, fmt.Sprintf("%s-%d", t.Topic, p))
		}
	}
	slices.Sort(named)
	slices.Sort(forgets)
	return named, forgets
}
