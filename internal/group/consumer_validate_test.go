package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestValidateConsumerHeartbeatBlankFields checks the request checks Kafka
// makes before looking the group up: a present group, member, instance or rack
// id that is empty or only blanks is INVALID_REQUEST, the member id first.
func TestValidateConsumerHeartbeatBlankFields(t *testing.T) {
	join := func(edit func(*kmsg.ConsumerGroupHeartbeatRequest)) *kmsg.ConsumerGroupHeartbeatRequest {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID = "g", "m1"
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{"t"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		edit(req)
		return req
	}
	for _, tc := range []struct {
		name string
		req  *kmsg.ConsumerGroupHeartbeatRequest
		msg  string
	}{
		{"blank group", join(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "  " }), "GroupId can't be empty."},
		{"empty instance", join(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = kmsg.StringPtr("") }), "InstanceId can't be empty."},
		{"blank instance", join(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = kmsg.StringPtr(" ") }), "InstanceId can't be empty."},
		{"blank rack", join(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RackID = kmsg.StringPtr("\t") }), "RackId can't be empty."},
		{"blank member", join(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = " " }), "MemberId can't be empty."},
		{"member before group", join(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID, r.Group = "", "" }), "MemberId can't be empty."},
		{"instance before rack", join(func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.InstanceID, r.RackID = kmsg.StringPtr(""), kmsg.StringPtr("")
		}), "InstanceId can't be empty."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := validateConsumerHeartbeat(tc.req)
			if r.code != kerr.InvalidRequest.Code || r.msg != tc.msg {
				t.Fatalf("got %d %q, want INVALID_REQUEST %q", r.code, r.msg, tc.msg)
			}
		})
	}
}
