package share

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFailedAcknowledgementChangesNothing: a ShareAcknowledge whose batches for
// a partition are a release of a record the member holds and an acceptance of
// one it does not fails as a whole, as in Kafka: the released record stays
// with the member, and another member does not get it.
func TestFailedAcknowledgementChangesNothing(t *testing.T) {
	m, _ := newGroupCommitManager(t, &memStore{}, 3)
	if o := fetchOne(t, m, "m1"); o != 0 {
		t.Fatalf("m1 acquired offset %d, want 0", o)
	}
	g, member := "g", "m1"
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch = 1, &g, &member, 1
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = gcTopicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	for _, b := range []struct {
		offset int64
		typ    AckType
	}{{0, Release}, {1, Accept}} {
		ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b.offset, b.offset, []int8{int8(b.typ)}
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := m.ShareAcknowledge(context.Background(), req)
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("acknowledgement: %+v, want the partition's INVALID_REQUEST (offset 1 is past the records in flight)", resp)
	}
	if o := fetchOne(t, m, "m2"); o != 1 {
		t.Fatalf("m2 acquired offset %d, want 1: offset 0 is still m1's", o)
	}
}

// TestAcknowledgeHugeRange: a batch naming 2^40 offsets with one type is
// answered at once (the last offset is past the records in flight). The types
// used to be checked offset by offset over the whole range: one
// ShareAcknowledge kept a core busy for hours, holding the share partition's
// lock against every other member.
func TestAcknowledgeHugeRange(t *testing.T) {
	p := NewPartition(0)
	lim := Limits{LockDuration: time.Minute, DeliveryLimit: 5}
	now := time.Unix(0, 0)
	if got := p.Acquire("m", now, lim, []Batch{{First: 0, Last: 1}}, 10, false); len(got) != 1 {
		t.Fatalf("acquired %+v", got)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Acknowledge("m", now, lim, []AckBatch{{First: 0, Last: 1 << 40, Types: []AckType{Accept}}})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errAckLastPast) {
			t.Fatalf("error %v, want %v", err, errAckLastPast)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the acknowledgement of 2^40 offsets is still being checked after 5s")
	}
}
