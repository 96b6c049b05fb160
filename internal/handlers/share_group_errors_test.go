package handlers

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

// shareGroups is a group coordinator answering the share-group APIs as one with
// no errors would, remembering what reached it; a group in assigned has a
// member assigned partition 0 of its topics.
type shareGroups struct {
	Groups
	got      []string
	assigned map[string][]string
}

func (g *shareGroups) ShareGroupHeartbeat(_ context.Context, req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	g.got = append(g.got, "heartbeat "+req.GroupID)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.MemberEpoch = 1
	return resp
}

func (g *shareGroups) ShareGroupDescribe(_ context.Context, req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range req.GroupIDs {
		g.got = append(g.got, "describe "+id)
		dg := kmsg.NewShareGroupDescribeResponseGroup()
		dg.GroupID, dg.GroupState = id, "Empty"
		if topics, ok := g.assigned[id]; ok {
			m := kmsg.NewShareGroupDescribeResponseGroupMember()
			m.MemberID = "m"
			for _, t := range topics {
				m.Assignment.TopicPartitions = append(m.Assignment.TopicPartitions, kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{Topic: t, Partitions: []int32{0}})
			}
			dg.GroupState, dg.Members = "Stable", []kmsg.ShareGroupDescribeResponseGroupMember{m}
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (g *shareGroups) DescribeShareGroupOffsets(_ context.Context, req *kmsg.DescribeShareGroupOffsetsRequest) *kmsg.DescribeShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, rg := range req.Groups {
		g.got = append(g.got, "offsets "+rg.GroupID)
		sg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		sg.GroupID = rg.GroupID
		topics := rg.Topics
		if topics == nil { // every topic with state: t and hidden
			topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}, {Topic: "hidden", Partitions: []int32{0}}}
		}
		for _, t := range topics {
			st := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				sp.Partition, sp.StartOffset = p, 5
				st.Partitions = append(st.Partitions, sp)
			}
			sg.Topics = append(sg.Topics, st)
		}
		resp.Groups = append(resp.Groups, sg)
	}
	return resp
}

func (g *shareGroups) AlterShareGroupOffsets(_ context.Context, req *kmsg.AlterShareGroupOffsetsRequest) *kmsg.AlterShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	for _, t := range req.Topics {
		g.got = append(g.got, "alter "+t.Topic)
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (g *shareGroups) DeleteShareGroupOffsets(_ context.Context, req *kmsg.DeleteShareGroupOffsetsRequest) *kmsg.DeleteShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	for _, t := range req.Topics {
		g.got = append(g.got, "delete "+t.Topic)
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// TestShareGroupAuthorization: the share-group membership and offset APIs
// (76, 77, 90-92) check what a Kafka 4.4 broker checked when the same requests
// were sent to it side by side (interop/cmd/sharecompare), with its codes and
// messages: the principal may READ and DESCRIBE group "g" (not "other") and READ
// and DESCRIBE topic "t" (not "hidden"). Each case lists the codes (and
// messages) answered and what reached the coordinator.
func TestShareGroupAuthorization(t *testing.T) {
	read, describe := kmsg.ACLOperationRead, kmsg.ACLOperationDescribe
	base := newErrorsHandlersWith(t, Config{Authorizer: allowAnonymous(
		read, resGroup, "g", describe, resGroup, "g", read, resTopic, "t", describe, resTopic, "t",
		describe, resGroup, "h", describe, resGroup, "k")})
	groups := &shareGroups{assigned: map[string][]string{"h": {"t", "hidden"}, "k": {"t"}}}
	h := New(base.cfg, base.cluster, base.replicas, groups, nil, base.log)
	conn := &protocol.ConnInfo{}
	msg := func(m *string) string {
		if m == nil {
			return ""
		}
		return fmt.Sprintf(" %q", *m)
	}
	code := func(c int16) string {
		if c == 0 {
			return "ok"
		}
		return kerr.ErrorForCode(c).(*kerr.Error).Message
	}
	heartbeat := func(group string, topics ...string) kmsg.Request {
		r := kmsg.NewPtrShareGroupHeartbeatRequest()
		r.GroupID, r.MemberID, r.SubscribedTopicNames = group, "m", topics
		return r
	}
	describeReq := func(ids ...string) kmsg.Request {
		r := kmsg.NewPtrShareGroupDescribeRequest()
		r.GroupIDs, r.IncludeAuthorizedOperations = ids, true
		return r
	}
	offsets := func(group string, topics ...string) kmsg.Request {
		r := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		g.GroupID = group
		for _, t := range topics {
			g.Topics = append(g.Topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: t, Partitions: []int32{0}})
		}
		r.Groups = append(r.Groups, g)
		return r
	}
	alter := func(group string, topics ...string) kmsg.Request {
		r := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		r.GroupID = group
		for _, t := range topics {
			rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
			rt.Topic = t
			rt.Partitions = append(rt.Partitions, kmsg.NewAlterShareGroupOffsetsRequestTopicPartition())
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	deleteReq := func(group string, topics ...string) kmsg.Request {
		r := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		r.GroupID = group
		for _, t := range topics {
			r.Topics = append(r.Topics, kmsg.DeleteShareGroupOffsetsRequestTopic{Topic: t})
		}
		return r
	}
	// show renders a response: its codes, messages and start offsets in order.
	show := func(resp kmsg.Response) []string {
		var out []string
		switch r := resp.(type) {
		case *kmsg.ShareGroupHeartbeatResponse:
			out = append(out, code(r.ErrorCode)+msg(r.ErrorMessage))
		case *kmsg.ShareGroupDescribeResponse:
			for _, g := range r.Groups {
				out = append(out, fmt.Sprintf("%s %s%s ops=%d", g.GroupID, code(g.ErrorCode), msg(g.ErrorMessage), g.AuthorizedOperations))
			}
		case *kmsg.DescribeShareGroupOffsetsResponse:
			for _, g := range r.Groups {
				out = append(out, fmt.Sprintf("%s %s%s", g.GroupID, code(g.ErrorCode), msg(g.ErrorMessage)))
				for _, t := range g.Topics {
					for _, p := range t.Partitions {
						out = append(out, fmt.Sprintf("%s/%d %s%s start=%d", t.Topic, p.Partition, code(p.ErrorCode), msg(p.ErrorMessage), p.StartOffset))
					}
				}
			}
		case *kmsg.AlterShareGroupOffsetsResponse:
			out = append(out, code(r.ErrorCode)+msg(r.ErrorMessage))
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					out = append(out, fmt.Sprintf("%s/%d %s%s", t.Topic, p.Partition, code(p.ErrorCode), msg(p.ErrorMessage)))
				}
			}
		case *kmsg.DeleteShareGroupOffsetsResponse:
			out = append(out, code(r.ErrorCode)+msg(r.ErrorMessage))
			for _, t := range r.Topics {
				out = append(out, fmt.Sprintf("%s %s%s", t.Topic, code(t.ErrorCode), msg(t.ErrorMessage)))
			}
		}
		return out
	}
	// The principal's operations on "g": READ (bit 3) and DESCRIBE (bit 8).
	ops := int32(1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationDescribe)
	for _, tc := range []struct {
		name    string
		req     kmsg.Request
		want    []string
		reached []string
	}{
		{"heartbeat, group not readable", heartbeat("other", "t"), []string{"GROUP_AUTHORIZATION_FAILED"}, nil},
		{"heartbeat, topic not describable", heartbeat("g", "t", "hidden"), []string{"TOPIC_AUTHORIZATION_FAILED"}, nil},
		{"heartbeat", heartbeat("g", "t"), []string{"ok"}, []string{"heartbeat g"}},
		{"describe, one group denied", describeReq("other", "g"),
			[]string{fmt.Sprintf("other GROUP_AUTHORIZATION_FAILED ops=%d", kmsg.NewShareGroupDescribeResponseGroup().AuthorizedOperations), fmt.Sprintf("g ok ops=%d", ops)},
			[]string{"describe g"}},
		// A member assigned a topic the principal may not DESCRIBE hides the
		// whole group (Kafka 4.4's KafkaApis.handleShareGroupDescribe).
		{"describe, a member assigned a hidden topic", describeReq("h", "k"),
			[]string{fmt.Sprintf(`h TOPIC_AUTHORIZATION_FAILED "The group has described topic(s) that the client is not authorized to describe." ops=%d`,
				kmsg.NewShareGroupDescribeResponseGroup().AuthorizedOperations), fmt.Sprintf("k ok ops=%d", 1<<kmsg.ACLOperationDescribe)},
			[]string{"describe h", "describe k"}},
		{"offsets, group denied", offsets("other", "t"), []string{"other GROUP_AUTHORIZATION_FAILED"}, nil},
		{"offsets, topic denied", offsets("g", "t", "hidden"),
			[]string{"g ok", "t/0 ok start=5", `hidden/0 TOPIC_AUTHORIZATION_FAILED "Topic authorization failed." start=-1`},
			[]string{"offsets g"}},
		{"offsets of every topic: only those it may see", offsets("g"), []string{"g ok", "t/0 ok start=5"}, []string{"offsets g"}},
		{"alter, group denied", alter("other", "t"), []string{`GROUP_AUTHORIZATION_FAILED "Group authorization failed."`}, nil},
		{"alter, topic denied", alter("g", "t", "hidden"),
			[]string{"ok", "t/0 ok", `hidden/0 TOPIC_AUTHORIZATION_FAILED "Topic authorization failed."`}, []string{"alter t"}},
		{"delete, group denied (no DELETE)", deleteReq("g", "t"), []string{`GROUP_AUTHORIZATION_FAILED "Group authorization failed."`}, nil},
	} {
		groups.got = nil
		resp := serveRequest(t, h, conn, &protocol.Request{Key: tc.req.Key(), Version: tc.req.GetVersion(), Msg: tc.req})
		if got := show(resp); !slices.Equal(got, tc.want) {
			t.Errorf("%s: answered %q, want %q", tc.name, got, tc.want)
		}
		if !slices.Equal(groups.got, tc.reached) {
			t.Errorf("%s: the coordinator saw %q, want %q", tc.name, groups.got, tc.reached)
		}
	}

	// DeleteShareGroupOffsets with DELETE on the group: a topic it may not READ.
	base = newErrorsHandlersWith(t, Config{Authorizer: allowAnonymous(
		kmsg.ACLOperationDelete, resGroup, "g", read, resTopic, "t")})
	h = New(base.cfg, base.cluster, base.replicas, groups, nil, base.log)
	groups.got = nil
	req := deleteReq("g", "t", "hidden")
	resp := serveRequest(t, h, conn, &protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req})
	want := []string{"ok", "t ok", `hidden TOPIC_AUTHORIZATION_FAILED "Topic authorization failed."`}
	if got := show(resp); !slices.Equal(got, want) || !slices.Equal(groups.got, []string{"delete t"}) {
		t.Errorf("delete, topic denied: answered %q (coordinator saw %q), want %q", got, groups.got, want)
	}
}
