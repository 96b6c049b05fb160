package handlers

// StreamsGroupHeartbeat (key 88), v0-v1: the KIP-1071 streams group protocol
// (Kafka Streams with group.protocol=streams), served by the group coordinator
// (package group).
//   v1: the int64 acceptable recovery lag; TopologyDescriptionRequired is never
//   set (no topology description plugin, as a Kafka broker without one).
// Authorization, as Kafka's: READ on the group (authorize.go); a topology naming
// a topic the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED without
// reaching the coordinator. The coordinator names the internal topics
// (repartition, changelog) the group lacks; this handler creates them through
// the controller when the principal may CREATE on the cluster or on each of
// them, else the MISSING_INTERNAL_TOPICS status says who may not. The answer
// still says MISSING_INTERNAL_TOPICS: the member's next heartbeat finds them.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) streamsGroupHeartbeat(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.StreamsGroupHeartbeatRequest)
	if req.Topology != nil {
		describable := h.topicCheck(ctx, c, kmsg.ACLOperationDescribe)
		var denied []string
		for _, t := range streamsTopologyTopics(req.Topology) {
			if !describable(t) {
				denied = append(denied, t)
			}
		}
		if len(denied) > 0 {
			resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
			resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Unauthorized to DESCRIBE on topics %s.", strings.Join(denied, ", ")))
			return reply(resp)
		}
	}
	cl := group.Client{ID: c.ClientID(), Host: hostOf(c.RemoteAddr)}
	return waitFor(func(ctx context.Context) kmsg.Response {
		resp, create := h.groups.StreamsGroupHeartbeat(group.WithClient(ctx, cl), req)
		if len(create) == 0 {
			return resp
		}
		var denied []string
		if !h.authorizeCluster(ctx, c, kmsg.ACLOperationCreate) {
			creatable := h.topicCheck(ctx, c, kmsg.ACLOperationCreate)
			for _, t := range create {
				if !creatable(t.Topic) {
					denied = append(denied, t.Topic)
				}
			}
		}
		if len(denied) > 0 {
			for i := range resp.Status {
				if st := &resp.Status[i]; st.StatusCode == 3 { // MISSING_INTERNAL_TOPICS
					st.StatusDetail += fmt.Sprintf("; Unauthorized to CREATE on topics %s.", strings.Join(denied, ", "))
				}
			}
			return resp
		}
		h.createOwnTopics(ctx, "streams group internal topic", create)
		return resp
	})
}

// streamsTopologyTopics lists every topic a streams topology names, sorted.
func streamsTopologyTopics(top *kmsg.StreamsGroupHeartbeatRequestTopology) []string {
	var out []string
	for _, s := range top.Subtopologies {
		out = append(out, s.SourceTopics...)
		out = append(out, s.RepartitionSinkTopics...)
		for _, ti := range slices.Concat(s.RepartitionSourceTopics, s.StateChangelogTopics) {
			out = append(out, ti.Topic)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
