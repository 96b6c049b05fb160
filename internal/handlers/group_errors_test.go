package handlers

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
)

// recordingGroups is a group coordinator that remembers what reached it and
// answers as a coordinator with no errors would: every partition and group
// it is given succeeds, committed offsets are 5. groupErr, when set, is the
// group-level error of OffsetDelete; members are ConsumerGroupDescribe's
// members of every group.
type recordingGroups struct {
	Groups
	got      []string
	groupErr *kerr.Error
	members  []kmsg.ConsumerGroupDescribeResponseGroupMember
}

func (g *recordingGroups) OffsetDelete(_ context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if g.groupErr != nil {
		resp.ErrorCode = g.groupErr.Code
		return resp
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			g.got = append(g.got, fmt.Sprintf("%s/%d", t.Topic, p.Partition))
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (g *recordingGroups) SyncGroup(_ context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	g.got = append(g.got, "sync "+req.Group)
	return req.ResponseKind().(*kmsg.SyncGroupResponse)
}

func (g *recordingGroups) OffsetCommit(_ context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	g.got = append(g.got, "commit")
	return req.ResponseKind().(*kmsg.OffsetCommitResponse)
}

func (g *recordingGroups) DeleteGroups(_ context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		g.got = append(g.got, id)
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		if slices.Contains(g.got[:len(g.got)-1], id) { // deleted already
			rg.ErrorCode = kerr.GroupIDNotFound.Code
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func (g *recordingGroups) OffsetFetch(_ context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	for _, rg := range req.Groups {
		sg := kmsg.NewOffsetFetchResponseGroup()
		sg.Group = rg.Group
		topics := rg.Topics
		if topics == nil { // every commit: one on each of t and hidden
			topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}, {Topic: "hidden", Partitions: []int32{0}}}
		}
		for _, t := range topics {
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				g.got = append(g.got, fmt.Sprintf("%s/%d", t.Topic, p))
				sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				sp.Partition, sp.Offset = p, 5
				st.Partitions = append(st.Partitions, sp)
			}
			sg.Topics = append(sg.Topics, st)
		}
		resp.Groups = append(resp.Groups, sg)
	}
	return resp
}

func (g *recordingGroups) DescribeGroups(_ context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		g.got = append(g.got, id)
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group, dg.State = id, "Empty"
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (g *recordingGroups) ConsumerGroupDescribe(_ context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		g.got = append(g.got, id)
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group, dg.State, dg.Members = id, "Stable", g.members
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (g *recordingGroups) ConsumerGroupHeartbeat(_ context.Context, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	g.got = append(g.got, req.Group)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.MemberEpoch = 1
	return resp
}

// newGroupHandlers is newErrorsHandlers (topic "t" with partitions 0-3) with
// a recordingGroups coordinator and, when authorizer is set, that authorizer.
func newGroupHandlers(t *testing.T, authorizer func() *acl.Authorizer) (*Handlers, *recordingGroups) {
	t.Helper()
	base := newErrorsHandlersWith(t, Config{Authorizer: authorizer})
	groups := &recordingGroups{}
	return New(base.cfg, base.cluster, base.replicas, groups, nil, base.log), groups
}

// partitionCodes lists "topic/partition=error" answers, sorted.
func partitionCodes[T any](topics []T, each func(T, func(topic string, partition int32, code int16))) []string {
	var got []string
	for _, t := range topics {
		each(t, func(topic string, p int32, code int16) {
			got = append(got, fmt.Sprintf("%s/%d=%v", topic, p, kerr.ErrorForCode(code)))
		})
	}
	slices.Sort(got)
	return got
}

// TestOffsetDeleteErrors: as Kafka's broker does, OffsetDelete answers the
// partitions of unknown topics and unknown partitions of known ones
// UNKNOWN_TOPIC_OR_PARTITION without asking the coordinator (which used to
// "delete" them and answer success); topics the principal may not READ are
// TOPIC_AUTHORIZATION_FAILED; a group-level error is the whole answer.
func TestOffsetDeleteErrors(t *testing.T) {
	read, del := kmsg.ACLOperationRead, kmsg.ACLOperationDelete
	unknown, denied := kerr.UnknownTopicOrPartition.Error(), kerr.TopicAuthorizationFailed.Error()
	for _, tc := range []struct {
		name       string
		authorizer func() *acl.Authorizer
		groupErr   *kerr.Error
		wantTop    *kerr.Error
		want       []string
		wantAsked  []string
	}{
		{"no authorizer", nil, nil, nil,
			[]string{"compacted/0=<nil>", "nope/0=" + unknown, "nope/1=" + unknown, "t/0=<nil>", "t/9=" + unknown},
			[]string{"t/0", "compacted/0"}},
		{"a topic not readable", allowAnonymous(del, resGroup, "g", read, resTopic, "t"), nil, nil,
			[]string{"compacted/0=" + denied, "nope/0=" + denied, "nope/1=" + denied, "t/0=<nil>", "t/9=" + unknown},
			[]string{"t/0"}},
		{"group not deletable", allowAnonymous(read, resTopic, "t"), nil, kerr.GroupAuthorizationFailed, nil, nil},
		{"group error", nil, kerr.GroupIDNotFound, kerr.GroupIDNotFound, nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, groups := newGroupHandlers(t, tc.authorizer)
			groups.groupErr = tc.groupErr
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Group = "g"
			for _, tp := range []struct {
				topic string
				parts []int32
			}{{"t", []int32{0, 9}}, {"nope", []int32{0, 1}}, {"compacted", []int32{0}}} {
				rt := kmsg.NewOffsetDeleteRequestTopic()
				rt.Topic = tp.topic
				for _, p := range tp.parts {
					rp := kmsg.NewOffsetDeleteRequestTopicPartition()
					rp.Partition = p
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
			}
			resp := serve(t, h, req).(*kmsg.OffsetDeleteResponse)
			wantTop := int16(0)
			if tc.wantTop != nil {
				wantTop = tc.wantTop.Code
			}
			if resp.ErrorCode != wantTop {
				t.Errorf("error %v, want %v", kerr.ErrorForCode(resp.ErrorCode), tc.wantTop)
			}
			got := partitionCodes(resp.Topics, func(rt kmsg.OffsetDeleteResponseTopic, add func(string, int32, int16)) {
				for _, p := range rt.Partitions {
					add(rt.Topic, p.Partition, p.ErrorCode)
				}
			})
			if !slices.Equal(got, tc.want) {
				t.Errorf("answers %q, want %q", got, tc.want)
			}
			if tc.wantAsked != nil && !slices.Equal(groups.got, tc.wantAsked) {
				t.Errorf("the coordinator was asked to delete %v, want %v", groups.got, tc.wantAsked)
			}
		})
	}
}

// TestDeleteGroupsDuplicates: a group named twice in one DeleteGroups is
// deleted and answered once, as Kafka does (the second occurrence used to be
// answered GROUP_ID_NOT_FOUND), with or without an authorizer; a group the
// principal may not DELETE is GROUP_AUTHORIZATION_FAILED, once too.
func TestDeleteGroupsDuplicates(t *testing.T) {
	del := kmsg.ACLOperationDelete
	for _, tc := range []struct {
		name       string
		authorizer func() *acl.Authorizer
		want       []string
		wantAsked  []string
	}{
		{"no authorizer", nil, []string{"a=<nil>", "b=<nil>", "c=<nil>"}, []string{"a", "b", "c"}},
		{"c not deletable", allowAnonymous(del, resGroup, "a", del, resGroup, "b"),
			[]string{"a=<nil>", "b=<nil>", "c=" + kerr.GroupAuthorizationFailed.Error()}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, groups := newGroupHandlers(t, tc.authorizer)
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.SetVersion(2)
			req.Groups = []string{"a", "b", "a", "c", "c"}
			var got []string
			for _, g := range serve(t, h, req).(*kmsg.DeleteGroupsResponse).Groups {
				got = append(got, fmt.Sprintf("%s=%v", g.Group, kerr.ErrorForCode(g.ErrorCode)))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("answers %q, want %q", got, tc.want)
			}
			if !slices.Equal(groups.got, tc.wantAsked) {
				t.Errorf("the coordinator was asked to delete %v, want %v", groups.got, tc.wantAsked)
			}
		})
	}
}

// TestOffsetFetchTopicAuthorization: OffsetFetch v8+ answers each partition
// of a named topic the principal may not DESCRIBE TOPIC_AUTHORIZATION_FAILED
// with offset -1 without asking the coordinator for it (such topics used to
// vanish from the answer); asked for every commit (null topics) it leaves
// them out; a group it may not DESCRIBE is GROUP_AUTHORIZATION_FAILED.
func TestOffsetFetchTopicAuthorization(t *testing.T) {
	describe := kmsg.ACLOperationDescribe
	h, groups := newGroupHandlers(t, allowAnonymous(describe, resGroup, "g", describe, resGroup, "all", describe, resTopic, "t"))
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(8)
	named := kmsg.NewOffsetFetchRequestGroup()
	named.Group = "g"
	named.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}, {Topic: "hidden", Partitions: []int32{0, 1}}}
	all := kmsg.NewOffsetFetchRequestGroup()
	all.Group = "all"
	denied := kmsg.NewOffsetFetchRequestGroup()
	denied.Group = "nope"
	denied.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
	req.Groups = []kmsg.OffsetFetchRequestGroup{named, all, denied}
	resp := serve(t, h, req).(*kmsg.OffsetFetchResponse)
	got := map[string][]string{}
	for _, g := range resp.Groups {
		got[g.Group] = append(got[g.Group], fmt.Sprintf("group=%v", kerr.ErrorForCode(g.ErrorCode)))
		for _, rt := range g.Topics {
			for _, p := range rt.Partitions {
				got[g.Group] = append(got[g.Group], fmt.Sprintf("%s/%d@%d=%v", rt.Topic, p.Partition, p.Offset, kerr.ErrorForCode(p.ErrorCode)))
			}
		}
	}
	tae := kerr.TopicAuthorizationFailed.Error()
	for group, want := range map[string][]string{
		"g":    {"group=<nil>", "t/0@5=<nil>", "hidden/0@-1=" + tae, "hidden/1@-1=" + tae},
		"all":  {"group=<nil>", "t/0@5=<nil>"},
		"nope": {"group=" + kerr.GroupAuthorizationFailed.Error()},
	} {
		if !slices.Equal(got[group], want) {
			t.Errorf("group %s: %q, want %q", group, got[group], want)
		}
	}
	if slices.Contains(groups.got, "hidden/1") {
		t.Errorf("the coordinator was asked for a topic the principal may not describe: %v", groups.got)
	}
}

// TestGroupAuthorizedOperations: DescribeGroups v3+ and ConsumerGroupDescribe
// asked for the authorized operations answer what the principal may do on
// the group, out of Kafka's group operations (READ, DESCRIBE, DELETE,
// DESCRIBE_CONFIGS, ALTER_CONFIGS): all of them without an authorizer. It
// was a constant READ, DESCRIBE, DELETE whatever the ACLs.
func TestGroupAuthorizedOperations(t *testing.T) {
	read, describe, del := kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete
	for _, tc := range []struct {
		name       string
		authorizer func() *acl.Authorizer
		want       int32
	}{
		{"no authorizer", nil, opBits(read, describe, del, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs)},
		{"read (implies describe)", allowAnonymous(read, resGroup, "g"), opBits(read, describe)},
		{"describe and delete", allowAnonymous(describe, resGroup, "g", del, resGroup, "g"), opBits(describe, del)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newGroupHandlers(t, tc.authorizer)
			dg := kmsg.NewPtrDescribeGroupsRequest()
			dg.SetVersion(5)
			dg.Groups, dg.IncludeAuthorizedOperations = []string{"g"}, true
			if got := serve(t, h, dg).(*kmsg.DescribeGroupsResponse).Groups[0]; got.ErrorCode != 0 || got.AuthorizedOperations != tc.want {
				t.Errorf("DescribeGroups: %v, operations %b, want %b", kerr.ErrorForCode(got.ErrorCode), got.AuthorizedOperations, tc.want)
			}
			cg := kmsg.NewPtrConsumerGroupDescribeRequest()
			cg.Groups, cg.IncludeAuthorizedOperations = []string{"g"}, true
			if got := serve(t, h, cg).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]; got.ErrorCode != 0 || got.AuthorizedOperations != tc.want {
				t.Errorf("ConsumerGroupDescribe: %v, operations %b, want %b", kerr.ErrorForCode(got.ErrorCode), got.AuthorizedOperations, tc.want)
			}
		})
	}
}

// TestConsumerGroupDescribeAuthorization: ConsumerGroupDescribe needs
// DESCRIBE on each group, not on the cluster (a principal with DESCRIBE on a
// group was refused CLUSTER_AUTHORIZATION_FAILED); a denied group never
// reaches the coordinator; a group assigning a topic the principal may not
// DESCRIBE is TOPIC_AUTHORIZATION_FAILED without its members (KAFKA-18813),
// with Kafka 4.4's message (Strata had its own words).
func TestConsumerGroupDescribeAuthorization(t *testing.T) {
	describe := kmsg.ACLOperationDescribe
	h, groups := newGroupHandlers(t, allowAnonymous(describe, resGroup, "g", describe, resTopic, "t"))
	member := kmsg.NewConsumerGroupDescribeResponseGroupMember()
	member.MemberID = "m"
	member.Assignment.TopicPartitions = []kmsg.AssignmentTopicPartition{{Topic: "t", Partitions: []int32{0}}}
	groups.members = []kmsg.ConsumerGroupDescribeResponseGroupMember{member}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"g", "nope"}
	got := map[string]kmsg.ConsumerGroupDescribeResponseGroup{}
	for _, g := range serve(t, h, req).(*kmsg.ConsumerGroupDescribeResponse).Groups {
		got[g.Group] = g
	}
	if g := got["g"]; g.ErrorCode != 0 || len(g.Members) != 1 {
		t.Errorf("group g: %v with %d members, want no error and 1 member", kerr.ErrorForCode(g.ErrorCode), len(g.Members))
	}
	if g := got["nope"]; g.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("group nope: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(g.ErrorCode))
	}
	if !slices.Equal(groups.got, []string{"g"}) {
		t.Errorf("the coordinator described %v, want only g", groups.got)
	}

	member.TargetAssignment.TopicPartitions = []kmsg.AssignmentTopicPartition{{Topic: "hidden", Partitions: []int32{0}}}
	groups.members = []kmsg.ConsumerGroupDescribeResponseGroupMember{member}
	req.Groups = []string{"g"}
	g := serve(t, h, req).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	const wantMsg = "The group has described topic(s) that the client is not authorized to describe." // Kafka 4.4's
	if g.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(g.Members) != 0 || g.ErrorMessage == nil || *g.ErrorMessage != wantMsg {
		t.Errorf("a group assigning a hidden topic: %v with %d members (message %q), want TOPIC_AUTHORIZATION_FAILED, none and %q",
			kerr.ErrorForCode(g.ErrorCode), len(g.Members), nullable(g.ErrorMessage), wantMsg)
	}
}

// TestConsumerGroupHeartbeatTopicAuthorization: a KIP-848 heartbeat
// subscribing to a topic the principal may not DESCRIBE is answered
// TOPIC_AUTHORIZATION_FAILED without reaching the coordinator (KAFKA-18813);
// it used to join the group.
func TestConsumerGroupHeartbeatTopicAuthorization(t *testing.T) {
	read, describe := kmsg.ACLOperationRead, kmsg.ACLOperationDescribe
	h, groups := newGroupHandlers(t, allowAnonymous(read, resGroup, "g", describe, resTopic, "t"))
	for _, tc := range []struct {
		topics []string
		want   *kerr.Error
	}{
		{[]string{"t"}, nil},
		{[]string{"t", "hidden"}, kerr.TopicAuthorizationFailed},
		{nil, nil}, // a heartbeat that does not change its subscription
	} {
		groups.got = nil
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.SetVersion(1)
		req.Group, req.MemberID, req.RebalanceTimeoutMillis, req.SubscribedTopicNames = "g", "m", 5000, tc.topics
		resp := serve(t, h, req).(*kmsg.ConsumerGroupHeartbeatResponse)
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if resp.ErrorCode != want {
			t.Errorf("subscribed to %v: %v, want %v", tc.topics, kerr.ErrorForCode(resp.ErrorCode), tc.want)
		}
		if reached := len(groups.got) > 0; reached != (tc.want == nil) {
			t.Errorf("subscribed to %v: reached the coordinator %v", tc.topics, reached)
		}
	}
}

// TestOffsetCommitNothingLeft: an OffsetCommit with nothing left to commit
// once denied and unknown topics are answered (or none to begin with) does
// not reach the coordinator, as in Kafka; it used to be passed on empty.
func TestOffsetCommitNothingLeft(t *testing.T) {
	read := kmsg.ACLOperationRead
	for _, tc := range []struct {
		name       string
		authorizer func() *acl.Authorizer
		topics     []string
		want       []string
	}{
		{"group not readable", allowAnonymous(read, resTopic, "t"), []string{"t"}, []string{"t/0=" + kerr.GroupAuthorizationFailed.Error()}},
		{"topics not readable", allowAnonymous(read, resGroup, "g"), []string{"t"}, []string{"t/0=" + kerr.TopicAuthorizationFailed.Error()}},
		{"unknown and unreadable", allowAnonymous(read, resGroup, "g", read, resTopic, "nope"), []string{"t", "nope"},
			[]string{"nope/0=" + kerr.UnknownTopicOrPartition.Error(), "t/0=" + kerr.TopicAuthorizationFailed.Error()}},
		{"no topics", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, groups := newGroupHandlers(t, tc.authorizer)
			req := kmsg.NewPtrOffsetCommitRequest()
			req.SetVersion(8)
			req.Group, req.Generation = "g", -1
			for _, topic := range tc.topics {
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Offset = 1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
			}
			resp := serve(t, h, req).(*kmsg.OffsetCommitResponse)
			got := partitionCodes(resp.Topics, func(rt kmsg.OffsetCommitResponseTopic, add func(string, int32, int16)) {
				for _, p := range rt.Partitions {
					add(rt.Topic, p.Partition, p.ErrorCode)
				}
			})
			if !slices.Equal(got, tc.want) {
				t.Errorf("answers %q, want %q", got, tc.want)
			}
			if len(groups.got) != 0 {
				t.Errorf("the coordinator was asked: %v", groups.got)
			}
		})
	}
}

// opBits is the authorized-operations bit field of ops.
func opBits(ops ...kmsg.ACLOperation) int32 {
	var b int32
	for _, op := range ops {
		b |= 1 << op
	}
	return b
}

// TestSyncGroupMandatoryFields: a SyncGroup v5+ without its protocol type or
// name is INCONSISTENT_GROUP_PROTOCOL before authorization, as Kafka 4.4
// answered the same requests side by side in session 9 (a client without READ
// on the group, a group that does not exist); with both fields the READ check
// comes first. Before v5 the fields do not exist and the coordinator decides.
func TestSyncGroupMandatoryFields(t *testing.T) {
	consumer, rangeName := "consumer", "range"
	denied, deniedGroups := newGroupHandlers(t, allowAnonymous())
	readable, readableGroups := newGroupHandlers(t, allowAnonymous(kmsg.ACLOperationRead, resGroup, "g"))
	for _, tt := range []struct {
		name       string
		version    int16
		typ, proto *string
		readable   bool
		want       *kerr.Error
		reached    bool
	}{
		{"no type", 5, nil, &rangeName, true, kerr.InconsistentGroupProtocol, false},
		{"no name", 5, &consumer, nil, true, kerr.InconsistentGroupProtocol, false},
		{"neither", 5, nil, nil, true, kerr.InconsistentGroupProtocol, false},
		{"no type, not READ-able", 5, nil, &rangeName, false, kerr.InconsistentGroupProtocol, false},
		{"neither, not READ-able", 5, nil, nil, false, kerr.InconsistentGroupProtocol, false},
		{"both, not READ-able", 5, &consumer, &rangeName, false, kerr.GroupAuthorizationFailed, false},
		{"both", 5, &consumer, &rangeName, true, nil, true},
		{"v4", 4, nil, nil, true, nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, groups := denied, deniedGroups
			if tt.readable {
				h, groups = readable, readableGroups
			}
			groups.got = nil
			req := kmsg.NewPtrSyncGroupRequest()
			req.Version, req.Group, req.MemberID, req.Generation = tt.version, "g", "m", 1
			req.ProtocolType, req.Protocol = tt.typ, tt.proto
			resp := serve(t, h, req).(*kmsg.SyncGroupResponse)
			if err := kerr.ErrorForCode(resp.ErrorCode); err != tt.want && !(tt.want == nil && err == nil) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			if reached := len(groups.got) > 0; reached != tt.reached {
				t.Errorf("reached the coordinator: %v, want %v", reached, tt.reached)
			}
		})
	}
}
