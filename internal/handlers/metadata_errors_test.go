package handlers

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
)

// TestMetadataErrors: Metadata v12 and v13 for an unknown name, an invalid
// name, an unknown topic id, beside a topic that exists; the internal topics
// are marked internal. v13's top-level error is 0, as a Kafka 4.4 broker
// answered the same names.
func TestMetadataErrors(t *testing.T) {
	h := newErrorsHandlers(t)
	for _, version := range []int16{12, 13} {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(version)
		for _, rt := range []kmsg.MetadataRequestTopic{
			{Topic: kmsg.StringPtr("t")},
			{Topic: kmsg.StringPtr("nope")},
			{Topic: kmsg.StringPtr("a/b")},
			{Topic: kmsg.StringPtr("")},
			{TopicID: metadata.UUID{99}},
			{Topic: kmsg.StringPtr(OffsetsTopic)},
		} {
			req.Topics = append(req.Topics, rt)
		}
		resp := serve(t, h, req).(*kmsg.MetadataResponse)
		if resp.ErrorCode != 0 {
			t.Errorf("v%d: top-level error %v", version, kerr.ErrorForCode(resp.ErrorCode))
		}
		want := []struct {
			code     *kerr.Error
			internal bool
		}{{nil, false}, {kerr.UnknownTopicOrPartition, false}, {kerr.InvalidTopicException, false},
			{kerr.InvalidTopicException, false}, {kerr.UnknownTopicID, false}, {nil, true}}
		if len(resp.Topics) != len(want) {
			t.Fatalf("v%d: %d topics answered for %d asked", version, len(resp.Topics), len(want))
		}
		for i, rt := range resp.Topics {
			code := int16(0)
			if want[i].code != nil {
				code = want[i].code.Code
			}
			if rt.ErrorCode != code || rt.IsInternal != want[i].internal {
				t.Errorf("v%d: topic %d (%v): %v internal %t, want %v internal %t", version, i, nullable(rt.Topic),
					kerr.ErrorForCode(rt.ErrorCode), rt.IsInternal, kerr.ErrorForCode(code), want[i].internal)
			}
		}
		if len(resp.Topics[0].Partitions) != 4 {
			t.Errorf("v%d: topic t lists %d partitions, want 4", version, len(resp.Topics[0].Partitions))
		}
	}
}
