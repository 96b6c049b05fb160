package share

import (
	"context"
	"testing"

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
