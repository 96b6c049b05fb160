package handlers

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamsGroups is recordingGroups with the streams-group APIs: a heartbeat
// answers MISSING_INTERNAL_TOPICS and names changelog "app-chg" to create; a
// described group has topology (source "t", changelog "app-chg").
type streamsGroups struct {
	*recordingGroups
}

func (g streamsGroups) StreamsGroupHeartbeat(_ context.Context, req *kmsg.StreamsGroupHeartbeatRequest) (*kmsg.StreamsGroupHeartbeatResponse, []kmsg.CreateTopicsRequestTopic) {
	g.got = append(g.got, req.Group)
	resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
	st := kmsg.NewStreamsGroupHeartbeatResponseStatus()
	st.StatusCode, st.StatusDetail = 3, "Internal topics are missing: app-chg"
	resp.Status = append(resp.Status, st)
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = "app-chg", 4, -1
	return resp, []kmsg.CreateTopicsRequestTopic{t}
}

func (g streamsGroups) StreamsGroupDescribe(_ context.Context, req *kmsg.StreamsGroupDescribeRequest) *kmsg.StreamsGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.StreamsGroupDescribeResponse)
	for _, id := range req.Groups {
		g.got = append(g.got, id)
		dg := kmsg.NewStreamsGroupDescribeResponseGroup()
		dg.Group, dg.State = id, "Stable"
		top := kmsg.NewStreamsGroupDescribeResponseGroupTopology()
		s := kmsg.NewStreamsGroupDescribeResponseGroupTopologySubtopology()
		s.SubtopologyID, s.SourceTopics = "0", []string{"t"}
		s.StateChangelogTopics = []kmsg.TopicInfo{{Topic: "app-chg"}}
		top.Subtopologies = append(top.Subtopologies, s)
		dg.Topology = &top
		dg.Members = []kmsg.StreamsGroupDescribeResponseGroupMember{kmsg.NewStreamsGroupDescribeResponseGroupMember()}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func streamsJoin(group string) *kmsg.StreamsGroupHeartbeatRequest {
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.RebalanceTimeoutMillis = group, "m", 30000
	top := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	s := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s.SubtopologyID, s.SourceTopics = "0", []string{"t"}
	s.StateChangelogTopics = []kmsg.TopicInfo{{Topic: "app-chg"}}
	top.Subtopologies = append(top.Subtopologies, s)
	req.Topology = &top
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	return req
}

// TestStreamsGroupHeartbeatAuthorization: as Kafka's broker, READ on the group
// (GROUP_AUTHORIZATION_FAILED), DESCRIBE on every topic of the topology
// (TOPIC_AUTHORIZATION_FAILED, naming them, before the coordinator), and CREATE
// on the cluster or on each internal topic to create, else the
// MISSING_INTERNAL_TOPICS status says so and nothing is created.
func TestStreamsGroupHeartbeatAuthorization(t *testing.T) {
	read, describe := kmsg.ACLOperationRead, kmsg.ACLOperationDescribe
	h, rec := newGroupHandlers(t, allowAnonymous(read, resGroup, "g", describe, resTopic, "t", describe, resTopic, "app-chg"))
	h.groups = streamsGroups{rec}

	resp := serve(t, h, streamsJoin("other")).(*kmsg.StreamsGroupHeartbeatResponse)
	if resp.ErrorCode != kerr.GroupAuthorizationFailed.Code || len(rec.got) != 0 {
		t.Errorf("group not readable: %v (coordinator got %v), want GROUP_AUTHORIZATION_FAILED before the coordinator", kerr.ErrorForCode(resp.ErrorCode), rec.got)
	}

	hidden := streamsJoin("g")
	hidden.Topology.Subtopologies[0].SourceTopics = []string{"t", "hidden"}
	resp = serve(t, h, hidden).(*kmsg.StreamsGroupHeartbeatResponse)
	if resp.ErrorCode != kerr.TopicAuthorizationFailed.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "hidden") || len(rec.got) != 0 {
		t.Errorf("a topology with a hidden topic: %v %v (coordinator got %v), want TOPIC_AUTHORIZATION_FAILED naming it", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage, rec.got)
	}

	resp = serve(t, h, streamsJoin("g")).(*kmsg.StreamsGroupHeartbeatResponse)
	if resp.ErrorCode != 0 || !slices.Equal(rec.got, []string{"g"}) {
		t.Fatalf("an allowed join: %v (coordinator got %v)", kerr.ErrorForCode(resp.ErrorCode), rec.got)
	}
	if len(resp.Status) != 1 || resp.Status[0].StatusDetail != "Internal topics are missing: app-chg; Unauthorized to CREATE on topics app-chg." {
		t.Errorf("without CREATE: status %+v, want the missing topics and who may not create them", resp.Status)
	}
}

// TestStreamsGroupDescribeAuthorization: DESCRIBE on each group
// (GROUP_AUTHORIZATION_FAILED without asking the coordinator); a group whose
// topology names a topic the principal may not DESCRIBE is
// TOPIC_AUTHORIZATION_FAILED without its topology and members.
func TestStreamsGroupDescribeAuthorization(t *testing.T) {
	describe := kmsg.ACLOperationDescribe
	h, rec := newGroupHandlers(t, allowAnonymous(describe, resGroup, "g", describe, resGroup, "h", describe, resTopic, "t", describe, resTopic, "app-chg"))
	h.groups = streamsGroups{rec}
	req := kmsg.NewPtrStreamsGroupDescribeRequest()
	req.Groups = []string{"g", "nope"}
	got := map[string]kmsg.StreamsGroupDescribeResponseGroup{}
	for _, g := range serve(t, h, req).(*kmsg.StreamsGroupDescribeResponse).Groups {
		got[g.Group] = g
	}
	if g := got["g"]; g.ErrorCode != 0 || len(g.Members) != 1 || g.Topology == nil {
		t.Errorf("group g: %v, want its topology and member", kerr.ErrorForCode(g.ErrorCode))
	}
	if g := got["nope"]; g.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("group nope: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(g.ErrorCode))
	}
	if !slices.Equal(rec.got, []string{"g"}) {
		t.Errorf("the coordinator described %v, want only g", rec.got)
	}

	h2, rec2 := newGroupHandlers(t, allowAnonymous(describe, resGroup, "g", describe, resTopic, "t"))
	h2.groups = streamsGroups{rec2}
	req.Groups = []string{"g"}
	g := serve(t, h2, req).(*kmsg.StreamsGroupDescribeResponse).Groups[0]
	if g.ErrorCode != kerr.TopicAuthorizationFailed.Code || g.Topology != nil || len(g.Members) != 0 {
		t.Errorf("a topology with a hidden changelog: %v, want TOPIC_AUTHORIZATION_FAILED without topology and members", kerr.ErrorForCode(g.ErrorCode))
	}
}
