package handlers

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareFetchCurrentLeader: a ShareFetch partition names its current leader
// (and the response that leader's endpoint) only with NOT_LEADER_OR_FOLLOWER;
// otherwise CurrentLeader keeps its schema default 0/0, as a Kafka 4.4 broker
// answered (interop/cmd/sharecompare; Strata answered -1/-1).
func TestShareFetchCurrentLeader(t *testing.T) {
	h := newShareErrorsHandlers(t, Config{})
	for _, tc := range []struct {
		name      string
		partition int32
		leader    int32
		endpoints int
	}{
		{"records acquired", 0, 0, 0},
		{"partition out of range", 9, 0, 0},
		{"led by broker 2", 2, 2, 1},
	} {
		resp := serve(t, h, shareFetchReq("m-"+tc.name, 0, errTopicID, tc.partition)).(*kmsg.ShareFetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("%s: %+v", tc.name, resp)
		}
		cl := resp.Topics[0].Partitions[0].CurrentLeader
		if cl.LeaderID != tc.leader || (tc.leader == 0 && cl.LeaderEpoch != 0) || len(resp.NodeEndpoints) != tc.endpoints {
			t.Errorf("%s: current leader %d epoch %d, %d endpoints; want leader %d, %d endpoints", tc.name, cl.LeaderID, cl.LeaderEpoch, len(resp.NodeEndpoints), tc.leader, tc.endpoints)
		}
	}
}
