package httpapi

import (
	"net/http"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSharePollPartitionErrors: a share poll whose partitions all failed is
// answered by the first partition's code; a failed read or write of a
// partition's share state (UNKNOWN_SERVER_ERROR from Kafka 4.4's persister
// mapping) is a 503, as the next poll reloads the state.
func TestSharePollPartitionErrors(t *testing.T) {
	for _, tc := range []struct {
		code   int16
		status int
	}{
		{kerr.CoordinatorNotAvailable.Code, http.StatusServiceUnavailable},
		{kerr.NotLeaderForPartition.Code, http.StatusServiceUnavailable},
		{kerr.UnknownServerError.Code, http.StatusServiceUnavailable},
		{kerr.UnknownTopicOrPartition.Code, http.StatusNotFound},
	} {
		s := &shareMember{}
		s.mu.sessions = map[int32]*shareSession{1: {}}
		s.mu.held = map[heldRecord]int32{}
		resp := kmsg.NewPtrShareFetchResponse()
		rt := kmsg.NewShareFetchResponseTopic()
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.ErrorCode = tc.code
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		_, err := s.polled([]shareFetched{{leader: 1, resp: resp}})
		if err == nil {
			t.Fatalf("code %d: no error", tc.code)
		}
		ae := fromErr(err)
		if ae.status != tc.status || ae.code != kerr.ErrorForCode(tc.code).(*kerr.Error).Message {
			t.Errorf("code %d: %d %s, want %d %s", tc.code, ae.status, ae.code, tc.status, kerr.ErrorForCode(tc.code).(*kerr.Error).Message)
		}
	}
}
