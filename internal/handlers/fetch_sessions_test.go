package handlers

import (
	"testing"

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
	read, sf := s.begin(fetchReq(0, 0, "t", map[int32]int64{0: 0, 1: 0, 2: 0}))
	resp := answer(read, hwm)
	sf.finish(resp, nil)
	if resp.SessionID == 0 || len(partitionsOf(resp)) != 3 {
		t.Fatalf("full fetch: session %d, partitions %v", resp.SessionID, partitionsOf(resp))
	}
	id := resp.SessionID

	// An incremental fetch naming nothing reads every partition of the session at
	// its cached position, and answers none when nothing changed.
	read, sf = s.begin(fetchReq(id, 1, "t", nil))
	if sf.errorCode != 0 || len(read.Topics) != 1 || len(read.Topics[0].Partitions) != 3 {
		t.Fatalf("incremental read: error %d, topics %+v", sf.errorCode, read.Topics)
	}
	resp = answer(read, hwm)
	sf.finish(resp, nil)
	if got := partitionsOf(resp); len(got) != 0 || resp.SessionID != id {
		t.Fatalf("nothing changed: session %d, partitions %v", resp.SessionID, got)
	}

	// News: records on 1, a new high-water mark on 2.
	read, sf = s.begin(fetchReq(id, 2, "t", map[int32]int64{1: 3}))
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
	read, sf = s.begin(fetchReq(id, 3, "t", nil, 0, 2))
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
		if _, sf := s.begin(fetchReq(tc.id, tc.epoch, "t", nil)); sf.errorCode != tc.want {
			t.Errorf("%s: error %d, want %d", tc.name, sf.errorCode, tc.want)
		}
	}
	// The right epoch still works after refusals.
	if _, sf := s.begin(fetchReq(id, 4, "t", nil)); sf.errorCode != 0 {
		t.Fatalf("epoch 4: error %d", sf.errorCode)
	}

	// The cache holds two sessions: a third evicts the least recently used.
	_, sfA := s.begin(fetchReq(0, 0, "t", map[int32]int64{0: 0}))
	_, sfB := s.begin(fetchReq(0, 0, "t", map[int32]int64{0: 0}))
	if s.len() != 2 {
		t.Fatalf("%d sessions cached, want 2", s.len())
	}
	if _, sf := s.begin(fetchReq(id, 5, "t", nil)); sf.errorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("the evicted session: error %d", sf.errorCode)
	}
	if _, sf := s.begin(fetchReq(sfB.session.id, 1, "t", nil)); sf.errorCode != 0 {
		t.Fatalf("the newest session: error %d", sf.errorCode)
	}

	// Epoch -1 closes a session and fetches without one; so does a version < 7.
	if read, sf := s.begin(fetchReq(sfA.session.id, -1, "t", map[int32]int64{0: 0})); sf.session != nil || len(read.Topics) != 1 {
		t.Fatalf("final epoch: %+v", sf)
	}
	if _, sf := s.begin(fetchReq(sfA.session.id, 1, "t", nil)); sf.errorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("a closed session: error %d", sf.errorCode)
	}
	old := fetchReq(0, 0, "t", map[int32]int64{0: 0})
	old.SetVersion(6)
	if _, sf := s.begin(old); sf.session != nil {
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
	read, sf := s.begin(fetchReq(0, 0, "t", map[int32]int64{0: 0, 1: 0, 2: 0}))
	resp := answer(read, hwm)
	sf.finish(resp, nil)

	read, sf = s.begin(fetchReq(resp.SessionID, 1, "t", nil))
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
