package handlers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// committingGroups is a group coordinator that commits every partition it
// is given and remembers them; its other methods are not called.
type committingGroups struct {
	Groups
	got []string
}

func (g *committingGroups) OffsetCommit(_ context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			g.got = append(g.got, fmt.Sprintf("%s/%d", t.Topic, p.Partition))
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// TestOffsetCommitUnknownPartitions: the partitions of an unknown topic, or
// unknown partitions of a known one, are answered UNKNOWN_TOPIC_OR_PARTITION
// without reaching the coordinator, which commits the others; a commit of
// nothing but unknown partitions does not reach it at all.
func TestOffsetCommitUnknownPartitions(t *testing.T) {
	base := newErrorsHandlers(t)
	groups := &committingGroups{}
	h := New(base.cfg, base.cluster, base.replicas, groups, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	commit := func(parts map[string][]int32, order ...string) []string {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(8)
		req.Group, req.Generation = "g", -1
		for _, topic := range order {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = topic
			for _, p := range parts[topic] {
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset = p, 1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		var got []string
		for _, rt := range serve(t, h, req).(*kmsg.OffsetCommitResponse).Topics {
			for _, p := range rt.Partitions {
				got = append(got, fmt.Sprintf("%s/%d=%v", rt.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode)))
			}
		}
		slices.Sort(got)
		return got
	}
	unknown := kerr.UnknownTopicOrPartition.Error()
	got := commit(map[string][]int32{"t": {0, 9}, "nope": {0, 1}}, "t", "nope")
	want := []string{"nope/0=" + unknown, "nope/1=" + unknown, "t/0=<nil>", "t/9=" + unknown}
	if !slices.Equal(got, want) {
		t.Errorf("answers %q, want %q", got, want)
	}
	if !slices.Equal(groups.got, []string{"t/0"}) {
		t.Errorf("the coordinator committed %v, want only t/0", groups.got)
	}
	groups.got = nil
	if got := commit(map[string][]int32{"nope": {0}}, "nope"); !slices.Equal(got, []string{"nope/0=" + unknown}) || groups.got != nil {
		t.Errorf("a commit of unknown partitions only: answers %q, coordinator committed %v", got, groups.got)
	}
}
