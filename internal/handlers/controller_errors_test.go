package handlers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

// TestAlterClientQuotasErrors: each AlterClientQuotas entry gets the code
// Kafka's controller gives it, the valid ones beside them applied: a key
// twice in one entry, an entity given again, and a fractional or too large
// byte rate (a LONG in Kafka) are INVALID_REQUEST; they used to be applied.
func TestAlterClientQuotasErrors(t *testing.T) {
	h := newAdminHandlers(t)
	type part struct{ typ, name string } // name "<default>": null
	type op struct {
		key    string
		value  float64
		remove bool
	}
	entry := func(parts []part, ops ...op) kmsg.AlterClientQuotasRequestEntry {
		e := kmsg.NewAlterClientQuotasRequestEntry()
		for _, p := range parts {
			ep := kmsg.NewAlterClientQuotasRequestEntryEntity()
			ep.Type = p.typ
			if p.name != "<default>" {
				ep.Name = kmsg.StringPtr(p.name)
			}
			e.Entity = append(e.Entity, ep)
		}
		for _, o := range ops {
			eo := kmsg.NewAlterClientQuotasRequestEntryOp()
			eo.Key, eo.Value, eo.Remove = o.key, o.value, o.remove
			e.Ops = append(e.Ops, eo)
		}
		return e
	}
	user := func(name string) []part { return []part{{"user", name}} }
	produce, consume := "producer_byte_rate", "consumer_byte_rate"
	invalid := kerr.InvalidRequest
	cases := []struct {
		name  string
		entry kmsg.AlterClientQuotasRequestEntry
		want  *kerr.Error
	}{
		{"valid", entry(user("a"), op{produce, 1024, false}, op{"request_percentage", 12.5, false}), nil},
		{"fractional byte rate", entry(user("b"), op{produce, 1024.5, false}), invalid},
		{"byte rate too large", entry(user("c"), op{consume, 1e19, false}), invalid},
		{"key twice", entry(user("d"), op{produce, 1024, false}, op{produce, 2048, false}), invalid},
		{"set and remove one key", entry(user("e"), op{produce, 1024, false}, op{produce, 0, true}), invalid},
		{"entity again", entry(user("a"), op{consume, 4096, false}), invalid},
		{"default user and client id", entry([]part{{"user", "<default>"}, {"client-id", "c"}}, op{consume, 4096, false}), nil},
		{"unknown entity type", entry([]part{{"group", "g"}}, op{produce, 1, false}), invalid},
		{"no entity", entry(nil, op{produce, 1, false}), invalid},
		{"empty name", entry(user(""), op{produce, 1, false}), invalid},
		{"entity type twice", entry([]part{{"user", "x"}, {"user", "y"}}, op{produce, 1, false}), invalid},
		{"ip beside a user", entry([]part{{"user", "f"}, {"ip", "10.0.0.1"}}, op{"connection_creation_rate", 5, false}), invalid},
		{"not an ip", entry([]part{{"ip", "nope"}}, op{"connection_creation_rate", 5, false}), invalid},
		{"fractional connection rate", entry([]part{{"ip", "10.0.0.1"}}, op{"connection_creation_rate", 5.5, false}), invalid},
		{"unknown key", entry(user("g"), op{"fetch_byte_rate", 1, false}), invalid},
		{"zero value", entry(user("h"), op{produce, 0, false}), invalid},
		{"negative value", entry(user("i"), op{produce, -5, false}), invalid},
		// Kafka's controller checks the key of a value set, not of one removed:
		// removing what is not set is a no-op whatever the key.
		{"remove an unknown key", entry(user("j"), op{"fetch_byte_rate", 0, true}), nil},
		{"remove an ip key from a user", entry(user("k"), op{"connection_creation_rate", 0, true}), nil},
		{"remove an unknown key from an ip", entry([]part{{"ip", "10.0.0.2"}}, op{produce, 0, true}), nil},
	}
	req := kmsg.NewPtrAlterClientQuotasRequest()
	var want []any
	for _, c := range cases {
		req.Entries = append(req.Entries, c.entry)
		want = append(want, c.name, c.want)
	}
	resp := serve(t, h, req).(*kmsg.AlterClientQuotasResponse)
	var got []nameCode
	for i, e := range resp.Entries {
		name := fmt.Sprint(i)
		if i < len(cases) {
			name = cases[i].name
		}
		got = append(got, nameCode{name, e.ErrorCode})
		if e.ErrorCode != 0 && (e.ErrorMessage == nil || *e.ErrorMessage == "") {
			t.Errorf("%s: %v without a message", name, kerr.ErrorForCode(e.ErrorCode))
		}
	}
	wantCodes(t, "AlterClientQuotas", got, want...)

	// What was applied: user a's two quotas (not the second entry's), the
	// default user with client id c.
	d := kmsg.NewPtrDescribeClientQuotasRequest()
	var entities []string
	for _, e := range serve(t, h, d).(*kmsg.DescribeClientQuotasResponse).Entries {
		s := ""
		for _, p := range e.Entity {
			s += p.Type + "=" + nullable(p.Name) + " "
		}
		for _, v := range e.Values {
			s += fmt.Sprintf("%s:%v ", v.Key, v.Value)
		}
		entities = append(entities, s)
	}
	if len(entities) != 2 {
		t.Errorf("quotas after the request: %q, want user a's and the default user's with client id c", entities)
	}
}

// TestReassignmentErrors: each partition of an AlterPartitionReassignments
// gets the code Kafka's controller gives it, beside a valid move.
func TestReassignmentErrors(t *testing.T) {
	h := newAdminHandlers(t)
	type move struct {
		topic     string
		partition int32
		replicas  []int32 // nil: cancel
	}
	cases := []struct {
		name    string
		version int16
		m       move
		want    *kerr.Error
	}{
		{"unknown topic", 0, move{"nope", 0, []int32{1}}, kerr.UnknownTopicOrPartition},
		{"unknown partition", 0, move{"t", 5, []int32{1, 2}}, kerr.UnknownTopicOrPartition},
		{"no replicas", 0, move{"t", 0, []int32{}}, kerr.InvalidReplicaAssignment},
		{"a replica twice", 0, move{"t", 0, []int32{1, 1}}, kerr.InvalidReplicaAssignment},
		{"an unregistered broker", 0, move{"t", 0, []int32{1, 3}}, kerr.InvalidReplicaAssignment},
		{"a negative broker id", 0, move{"t", 0, []int32{-1, 1}}, kerr.InvalidReplicaAssignment},
		{"cancel of none", 0, move{"t", 1, nil}, kerr.NoReassignmentInProgress},
		{"another size, v1 not allowing it", 1, move{"t", 0, []int32{1}}, kerr.InvalidReplicationFactor},
		{"another size, v0", 0, move{"t_x", 0, []int32{1, 2}}, nil},
		{"a new order", 0, move{"t", 0, []int32{2, 1}}, nil},
	}
	for _, tc := range cases {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.SetVersion(tc.version)
		req.TimeoutMillis = 5000
		req.AllowReplicationFactorChange = tc.version == 0 // v1 cases refuse another size
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = tc.m.topic
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = tc.m.partition, tc.m.replicas
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := serve(t, h, req).(*kmsg.AlterPartitionAssignmentsResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Errorf("%s: top-level %v, %d topics", tc.name, kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics))
			continue
		}
		p := resp.Topics[0].Partitions[0]
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if p.ErrorCode != want || (want != 0 && p.ErrorMessage == nil) {
			t.Errorf("%s: %v (message %v), want %v", tc.name, kerr.ErrorForCode(p.ErrorCode), p.ErrorMessage, tc.want)
		}
	}
}

// TestAclErrors: CreateAcls refuses what Kafka refuses (INVALID_REQUEST for
// a binding that is not concrete, or a cluster resource by another name) and
// takes the valid bindings beside them, an existing one too; DeleteAcls and
// DescribeAcls refuse unknown filter values; without an authorizer all three
// answer SECURITY_DISABLED.
func TestAclErrors(t *testing.T) {
	h := newAdminHandlersWith(t, Config{Authorizer: allowAnonymous(kmsg.ACLOperationAll, resCluster, acl.ClusterName)})
	creation := func(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, pt
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", op, perm
		return c
	}
	lit, allow, read := kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLPermissionTypeAllow, kmsg.ACLOperationRead
	invalid := kerr.InvalidRequest
	cases := []struct {
		name string
		c    kmsg.CreateACLsRequestCreation
		want *kerr.Error
	}{
		{"valid", creation(resTopic, "orders", lit, read, allow), nil},
		{"the same again", creation(resTopic, "orders", lit, read, allow), nil},
		{"prefixed", creation(resGroup, "app-", kmsg.ACLResourcePatternTypePrefixed, read, allow), nil},
		{"cluster by another name", creation(resCluster, "other", lit, kmsg.ACLOperationAlter, allow), invalid},
		{"empty resource name", creation(resTopic, "", lit, read, allow), invalid},
		{"resource type ANY", creation(kmsg.ACLResourceTypeAny, "x", lit, read, allow), invalid},
		{"resource type UNKNOWN", creation(kmsg.ACLResourceTypeUnknown, "x", lit, read, allow), invalid},
		{"pattern MATCH", creation(resTopic, "x", kmsg.ACLResourcePatternTypeMatch, read, allow), invalid},
		{"pattern ANY", creation(resTopic, "x", kmsg.ACLResourcePatternTypeAny, read, allow), invalid},
		{"operation ANY", creation(resTopic, "x", lit, kmsg.ACLOperationAny, allow), invalid},
		{"permission ANY", creation(resTopic, "x", lit, read, kmsg.ACLPermissionTypeAny), invalid},
	}
	req := kmsg.NewPtrCreateACLsRequest()
	var want []any
	for _, c := range cases {
		req.Creations = append(req.Creations, c.c)
		want = append(want, c.name, c.want)
	}
	var got []nameCode
	for i, r := range serve(t, h, req).(*kmsg.CreateACLsResponse).Results {
		got = append(got, nameCode{cases[min(i, len(cases)-1)].name, r.ErrorCode})
	}
	wantCodes(t, "CreateAcls", got, want...)

	filter := func(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, op kmsg.ACLOperation) kmsg.DeleteACLsRequestFilter {
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = rt, pt, op, kmsg.ACLPermissionTypeAny
		return f
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	del.Filters = []kmsg.DeleteACLsRequestFilter{
		filter(kmsg.ACLResourceTypeUnknown, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny),
		filter(resTopic, kmsg.ACLResourcePatternTypeUnknown, kmsg.ACLOperationAny),
		filter(resTopic, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationUnknown),
		filter(resTopic, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny),
	}
	dresp := serve(t, h, del).(*kmsg.DeleteACLsResponse)
	got = nil
	for i, r := range dresp.Results {
		got = append(got, nameCode{fmt.Sprint(i), r.ErrorCode})
	}
	wantCodes(t, "DeleteAcls", got, "0", invalid, "1", invalid, "2", invalid, "3", nil)
	if n := len(dresp.Results); n == 4 && len(dresp.Results[3].MatchingACLs) != 1 {
		t.Errorf("DeleteAcls of every topic binding matched %d, want the one created", len(dresp.Results[3].MatchingACLs))
	}

	desc := kmsg.NewPtrDescribeACLsRequest()
	desc.ResourceType, desc.ResourcePatternType, desc.Operation, desc.PermissionType = resTopic, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationUnknown, kmsg.ACLPermissionTypeAny
	if r := serve(t, h, desc).(*kmsg.DescribeACLsResponse); r.ErrorCode != invalid.Code || r.ErrorMessage == nil {
		t.Errorf("DescribeAcls with operation UNKNOWN: %v (message %v), want INVALID_REQUEST", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}

	// Without an authorizer each answer is SECURITY_DISABLED with Kafka 4.4's
	// message, which kafka-acls prints.
	off := newAdminHandlers(t)
	const changeMsg, describeMsg = "No Authorizer is configured.", "No Authorizer is configured on the broker"
	cr := serve(t, off, req).(*kmsg.CreateACLsResponse)
	if len(cr.Results) != len(cases) {
		t.Errorf("CreateAcls without an authorizer: %d results, want %d", len(cr.Results), len(cases))
	}
	for i, r := range cr.Results {
		if r.ErrorCode != kerr.SecurityDisabled.Code || messages(r.ErrorMessage) != changeMsg {
			t.Errorf("CreateAcls without an authorizer, creation %d: %v %q, want SECURITY_DISABLED %q", i, kerr.ErrorForCode(r.ErrorCode), messages(r.ErrorMessage), changeMsg)
		}
	}
	dr := serve(t, off, del).(*kmsg.DeleteACLsResponse)
	if len(dr.Results) != len(del.Filters) {
		t.Errorf("DeleteAcls without an authorizer: %d results, want %d", len(dr.Results), len(del.Filters))
	}
	for i, r := range dr.Results {
		if r.ErrorCode != kerr.SecurityDisabled.Code || messages(r.ErrorMessage) != changeMsg {
			t.Errorf("DeleteAcls without an authorizer, filter %d: %v %q, want SECURITY_DISABLED %q", i, kerr.ErrorForCode(r.ErrorCode), messages(r.ErrorMessage), changeMsg)
		}
	}
	desc.Operation = kmsg.ACLOperationAny
	if r := serve(t, off, desc).(*kmsg.DescribeACLsResponse); r.ErrorCode != kerr.SecurityDisabled.Code || messages(r.ErrorMessage) != describeMsg {
		t.Errorf("DescribeAcls without an authorizer: %v %q, want SECURITY_DISABLED %q", kerr.ErrorForCode(r.ErrorCode), messages(r.ErrorMessage), describeMsg)
	}
}

// TestCreateAclsAsKafka: bindings whose principal, host or pattern Kafka
// judges differently from a first guess. The codes are Kafka 4.4's answers
// (KRaft, StandardAuthorizer), from the same requests sent to both side by side
// in session 9; a binding Kafka stores is then found by DescribeAcls.
func TestCreateAclsAsKafka(t *testing.T) {
	h := newAdminHandlersWith(t, Config{Authorizer: allowAnonymous(kmsg.ACLOperationAll, resCluster, acl.ClusterName)})
	lit, pre := kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	invalid := kerr.InvalidRequest
	cases := []struct {
		name            string
		rt              kmsg.ACLResourceType
		resource        string
		pt              kmsg.ACLResourcePatternType
		principal, host string
		want            *kerr.Error
	}{
		{"prefixed * topic", resTopic, "*", pre, "User:alice", "*", nil},
		{"prefixed * group", resGroup, "*", pre, "User:alice", "*", nil},
		{"prefixed * transactional id", kmsg.ACLResourceTypeTransactionalId, "*", pre, "User:alice", "*", nil},
		{"prefixed cluster", resCluster, acl.ClusterName, pre, "User:alice", "*", nil},
		{"prefixed empty name", resTopic, "", pre, "User:alice", "*", invalid},
		{"empty host", resTopic, "x", lit, "User:alice", "", invalid},
		{"empty host, wildcard topic", resTopic, "*", lit, "User:alice", "", invalid},
		{"empty host, cluster", resCluster, acl.ClusterName, lit, "User:alice", "", invalid},
		{"host a name", resTopic, "x", lit, "User:alice", "not an ip", nil},
		{"host a space", resTopic, "x", lit, "User:alice", " ", nil},
		{"principal without type", resTopic, "x", lit, "alice", "*", invalid},
		{"principal empty", resTopic, "x", lit, "", "*", invalid},
		{"principal *", resTopic, "x", lit, "*", "*", invalid},
		{"principal empty name", resTopic, "x", lit, "User:", "*", nil},
		{"principal empty type", resTopic, "x", lit, ":alice", "*", nil},
		{"principal a colon", resTopic, "x", lit, ":", "*", nil},
		{"principal two colons", resTopic, "x", lit, "User:a:b", "*", nil},
		{"principal of another type", resTopic, "x", lit, "Group:ops", "*", nil},
	}
	req := kmsg.NewPtrCreateACLsRequest()
	var want []any
	for _, c := range cases {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = c.rt, c.resource, c.pt
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = c.principal, c.host, kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, cr)
		want = append(want, c.name, c.want)
	}
	var got []nameCode
	for i, r := range serve(t, h, req).(*kmsg.CreateACLsResponse).Results {
		got = append(got, nameCode{cases[min(i, len(cases)-1)].name, r.ErrorCode})
	}
	wantCodes(t, "CreateAcls", got, want...)

	desc := kmsg.NewPtrDescribeACLsRequest()
	desc.ResourceType, desc.ResourcePatternType, desc.Operation, desc.PermissionType = kmsg.ACLResourceTypeAny, pre, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	star := "*"
	desc.ResourceName = &star
	r := serve(t, h, desc).(*kmsg.DescribeACLsResponse)
	if r.ErrorCode != 0 || len(r.Resources) != 3 {
		t.Errorf("DescribeAcls of PREFIXED *: %v, %d resources, want the 3 created", kerr.ErrorForCode(r.ErrorCode), len(r.Resources))
	}
}

// TestUnregisterBrokerErrors: an id no broker holds is
// BROKER_ID_NOT_REGISTERED with a message; a registered broker goes.
func TestUnregisterBrokerErrors(t *testing.T) {
	h := newAdminHandlers(t)
	for _, tc := range []struct {
		id   int32
		want *kerr.Error
	}{{9, kerr.BrokerIDNotRegistered}, {-1, kerr.BrokerIDNotRegistered}, {2, nil}, {2, kerr.BrokerIDNotRegistered}} {
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = tc.id
		resp := serve(t, h, req).(*kmsg.UnregisterBrokerResponse)
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if resp.ErrorCode != want || (want != 0 && resp.ErrorMessage == nil) {
			t.Errorf("broker %d: %v (message %v), want %v", tc.id, kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage, tc.want)
		}
	}
}

// TestDescribeQuorumErrors: anything but __cluster_metadata-0 alone is
// answered UNKNOWN_TOPIC_OR_PARTITION for each partition asked for, as
// Kafka's quorum answers it, without reaching the controller.
func TestDescribeQuorumErrors(t *testing.T) {
	h := newErrorsHandlers(t) // not the controller: a forward would fail the test
	for _, tc := range []struct {
		name   string
		topics map[string][]int32
	}{
		{"another topic", map[string][]int32{"t": {0}}},
		{"partition 1", map[string][]int32{metadataTopic: {1}}},
		{"two partitions", map[string][]int32{metadataTopic: {0, 1}}},
		{"two topics", map[string][]int32{metadataTopic: {0}, "t": {0}}},
	} {
		req := kmsg.NewPtrDescribeQuorumRequest()
		req.SetVersion(2)
		asked := 0
		for topic, parts := range tc.topics {
			rt := kmsg.NewDescribeQuorumRequestTopic()
			rt.Topic = topic
			for _, p := range parts {
				rp := kmsg.NewDescribeQuorumRequestTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
				asked++
			}
			req.Topics = append(req.Topics, rt)
		}
		resp := serve(t, h, req).(*kmsg.DescribeQuorumResponse)
		answered := 0
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				answered++
				if p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
					t.Errorf("%s: %s/%d %v, want UNKNOWN_TOPIC_OR_PARTITION", tc.name, rt.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
			}
		}
		if resp.ErrorCode != 0 || answered != asked {
			t.Errorf("%s: top-level %v, %d of %d partitions answered", tc.name, kerr.ErrorForCode(resp.ErrorCode), answered, asked)
		}
	}
}

// TestDescribeUserScramCredentialsErrors: a user named twice is
// DUPLICATE_RESOURCE (answered once), an unknown one RESOURCE_NOT_FOUND, each
// with a message; an empty list describes every user, as a null one does
// (it described none).
func TestDescribeUserScramCredentialsErrors(t *testing.T) {
	h := newAdminHandlers(t)
	c := h.cluster.(waitingCluster).Cluster.(*planCluster)
	img, err := metadata.ApplyAll(c.img, []metadata.Record{&metadata.ScramCredentialRecord{ScramCredential: metadata.ScramCredential{
		User: "alice", Mechanism: metadata.ScramSHA256, Iterations: 4096, Salt: []byte("s"), StoredKey: []byte("k"), ServerKey: []byte("k")}}})
	if err != nil {
		t.Fatal(err)
	}
	c.img = img
	describe := func(users ...string) []nameCode {
		req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		if users != nil {
			req.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{}
		}
		for _, u := range users {
			req.Users = append(req.Users, kmsg.DescribeUserSCRAMCredentialsRequestUser{Name: u})
		}
		resp := serve(t, h, req).(*kmsg.DescribeUserSCRAMCredentialsResponse)
		var got []nameCode
		for _, r := range resp.Results {
			got = append(got, nameCode{r.User, r.ErrorCode})
			if r.ErrorCode != 0 && r.ErrorMessage == nil {
				t.Errorf("%s: %v without a message", r.User, kerr.ErrorForCode(r.ErrorCode))
			}
		}
		return got
	}
	wantCodes(t, "named", describe("alice", "bob", "alice"), "alice", kerr.DuplicateResource, "bob", kerr.ResourceNotFound)
	wantCodes(t, "null", describe(), "alice", nil)
	wantCodes(t, "empty", describe([]string{}...), "alice", nil)
}

// TestDescribeClientQuotasErrors: a filter Kafka refuses gets its code and a
// message: an unknown entity type UNSUPPORTED_VERSION; an empty type, a type
// twice, an exact match without a string, a default or any match with one,
// an unknown match type and an ip beside a user INVALID_REQUEST.
func TestDescribeClientQuotasErrors(t *testing.T) {
	h := newAdminHandlers(t)
	type comp struct {
		typ   string
		match int8
		name  *string
	}
	exact, def, anyMatch := int8(kmsg.QuotasMatchTypeExact), int8(kmsg.QuotasMatchTypeDefault), int8(kmsg.QuotasMatchTypeAny)
	u := kmsg.StringPtr("u")
	for _, tc := range []struct {
		name  string
		comps []comp
		want  *kerr.Error
	}{
		{"valid", []comp{{"user", exact, u}, {"client-id", anyMatch, nil}}, nil},
		{"unknown entity type", []comp{{"group", anyMatch, nil}}, kerr.UnsupportedVersion},
		{"empty entity type", []comp{{"", anyMatch, nil}}, kerr.InvalidRequest},
		{"a type twice", []comp{{"user", anyMatch, nil}, {"user", def, nil}}, kerr.InvalidRequest},
		{"exact without a name", []comp{{"user", exact, nil}}, kerr.InvalidRequest},
		{"default with a name", []comp{{"user", def, u}}, kerr.InvalidRequest},
		{"any with a name", []comp{{"user", anyMatch, u}}, kerr.InvalidRequest},
		{"unknown match type", []comp{{"user", 7, nil}}, kerr.InvalidRequest},
		{"ip beside a user", []comp{{"ip", anyMatch, nil}, {"user", anyMatch, nil}}, kerr.InvalidRequest},
	} {
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		for _, c := range tc.comps {
			rc := kmsg.NewDescribeClientQuotasRequestComponent()
			rc.EntityType, rc.MatchType, rc.Match = c.typ, kmsg.QuotasMatchType(c.match), c.name
			req.Components = append(req.Components, rc)
		}
		resp := serve(t, h, req).(*kmsg.DescribeClientQuotasResponse)
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if resp.ErrorCode != want || (want != 0) != (resp.ErrorMessage != nil) || (want == 0) != (resp.Entries != nil) {
			t.Errorf("%s: %v (message %v, entries %v), want %v", tc.name, kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage, resp.Entries, tc.want)
		}
	}
}

// voterCluster records the voter changes that reach the controller.
type voterCluster struct {
	*planCluster
	added, removed []string
}

func (c *voterCluster) AddVoter(_ context.Context, id int32, _ metadata.UUID, addr string) error {
	c.added = append(c.added, fmt.Sprintf("%d@%s", id, addr))
	return nil
}

// TestAddRaftVoterListeners: the new voter's endpoint is that of its
// controller listener, CONTROLLER, wherever it stands among the request's
// listeners, its name compared as Kafka 4.4 normalises it (upper case), the
// last of two with that name counting. A request without it, or without a
// voter key (a node id and a directory id), is INVALID_REQUEST, with Kafka
// 4.4's message, without reaching the controller, after the cluster id check.
func TestAddRaftVoterListeners(t *testing.T) {
	vc := &voterCluster{planCluster: &planCluster{img: metadata.NewImage()}}
	h := New(Config{ClusterID: "c", NodeID: 1, BrokerEpoch: func() int64 { return 1 }}, vc, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	other := "nope"
	dir7 := metadata.UUID{7}
	listener := func(name string, port uint16) kmsg.AddRaftVoterRequestListener {
		return kmsg.AddRaftVoterRequestListener{Name: name, Host: "127.0.0.1", Port: port}
	}
	controller := []kmsg.AddRaftVoterRequestListener{listener("CONTROLLER", 29999)}
	for _, tt := range []struct {
		name      string
		clusterID *string
		voter     int32
		dir       metadata.UUID
		listeners []kmsg.AddRaftVoterRequestListener
		want      *kerr.Error
		wantMsg   string
		added     string
	}{
		{"no listeners", nil, 7, dir7, nil, kerr.InvalidRequest,
			"Add voter request didn't include the endpoint () for the default listener CONTROLLER", ""},
		{"no listeners, another cluster", &other, 7, dir7, nil, kerr.InconsistentClusterID, "", ""},
		{"no directory id", nil, 7, metadata.UUID{}, controller, kerr.InvalidRequest, "Add voter request didn't include a valid voter", ""},
		{"a negative node id", nil, -1, dir7, controller, kerr.InvalidRequest, "Add voter request didn't include a valid voter", ""},
		{"the controller listener", nil, 7, dir7, controller, nil, "", "7@127.0.0.1:29999"},
		{"the controller listener second", nil, 7, dir7, []kmsg.AddRaftVoterRequestListener{listener("BROKER", 29998), listener("CONTROLLER", 29999)},
			nil, "", "7@127.0.0.1:29999"},
		{"the controller listener in lower case", nil, 7, dir7, []kmsg.AddRaftVoterRequestListener{listener("other", 29998), listener("controller", 29999)},
			nil, "", "7@127.0.0.1:29999"},
		{"the controller listener twice", nil, 7, dir7, []kmsg.AddRaftVoterRequestListener{listener("CONTROLLER", 29998), listener("Controller", 29999)},
			nil, "", "7@127.0.0.1:29999"},
		{"no controller listener", nil, 7, dir7, []kmsg.AddRaftVoterRequestListener{listener("BROKER", 29998), listener("CONTROLLER2", 29999)}, kerr.InvalidRequest,
			"Add voter request didn't include the endpoint (BROKER://127.0.0.1:29998,CONTROLLER2://127.0.0.1:29999) for the default listener CONTROLLER", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vc.added = nil
			req := kmsg.NewPtrAddRaftVoterRequest()
			req.ClusterID, req.VoterID, req.VoterDirectoryID, req.Listeners = tt.clusterID, tt.voter, tt.dir, tt.listeners
			resp := serve(t, h, req).(*kmsg.AddRaftVoterResponse)
			if err := kerr.ErrorForCode(resp.ErrorCode); err != tt.want && !(err == nil && tt.want == nil) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			if tt.want != nil && resp.ErrorMessage == nil {
				t.Error("no error message")
			}
			if got := messages(resp.ErrorMessage); tt.wantMsg != "" && got != tt.wantMsg {
				t.Errorf("error message %q, want %q", got, tt.wantMsg)
			}
			if got := strings.Join(vc.added, ","); got != tt.added {
				t.Errorf("controller asked to add %q, want %q", got, tt.added)
			}
		})
	}
}

func (c *voterCluster) RemoveVoter(_ context.Context, id int32, dir metadata.UUID) error {
	c.removed = append(c.removed, fmt.Sprintf("%d/%v", id, dir))
	return nil
}

// TestRemoveRaftVoterKey: a RemoveRaftVoter must name the voter by its key,
// a node id and a directory id, as Kafka 4.4 checks it: a negative id or a
// zero directory id is INVALID_REQUEST with Kafka's message, after the
// cluster id check and without reaching the controller.
func TestRemoveRaftVoterKey(t *testing.T) {
	vc := &voterCluster{planCluster: &planCluster{img: metadata.NewImage()}}
	h := New(Config{ClusterID: "c", NodeID: 1, BrokerEpoch: func() int64 { return 1 }}, vc, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	other := "nope"
	dir7 := metadata.UUID{7}
	for _, tt := range []struct {
		name      string
		clusterID *string
		voter     int32
		dir       metadata.UUID
		want      *kerr.Error
		wantMsg   string
		removed   string
	}{
		{"no directory id", nil, 7, metadata.UUID{}, kerr.InvalidRequest, "Remove voter request didn't include a valid voter", ""},
		{"a negative node id", nil, -1, dir7, kerr.InvalidRequest, "Remove voter request didn't include a valid voter", ""},
		{"no directory id, another cluster", &other, 7, metadata.UUID{}, kerr.InconsistentClusterID, "", ""},
		{"a voter key", nil, 7, dir7, nil, "", fmt.Sprintf("7/%v", dir7)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vc.removed = nil
			req := kmsg.NewPtrRemoveRaftVoterRequest()
			req.ClusterID, req.VoterID, req.VoterDirectoryID = tt.clusterID, tt.voter, tt.dir
			resp := serve(t, h, req).(*kmsg.RemoveRaftVoterResponse)
			if err := kerr.ErrorForCode(resp.ErrorCode); err != tt.want && !(err == nil && tt.want == nil) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			if got := messages(resp.ErrorMessage); tt.wantMsg != "" && got != tt.wantMsg {
				t.Errorf("error message %q, want %q", got, tt.wantMsg)
			}
			if got := strings.Join(vc.removed, ","); got != tt.removed {
				t.Errorf("controller asked to remove %q, want %q", got, tt.removed)
			}
		})
	}
}

// TestAlterPartitionErrors: every partition of an AlterPartition request (on
// the controller link) goes to the controller in one call, one proposal, and
// gets its own code.
func TestAlterPartitionErrors(t *testing.T) {
	h := newAdminHandlers(t)
	req := kmsg.NewPtrAlterPartitionRequest()
	req.SetVersion(3)
	req.BrokerID, req.BrokerEpoch = 1, 1
	part := func(index, partitionEpoch int32, isr ...int32) kmsg.AlterPartitionRequestTopicPartition {
		p := kmsg.NewAlterPartitionRequestTopicPartition()
		p.Partition, p.PartitionEpoch = index, partitionEpoch
		for _, id := range isr {
			m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
			m.BrokerID, m.BrokerEpoch = id, -1
			p.NewEpochISR = append(p.NewEpochISR, m)
		}
		return p
	}
	known := kmsg.NewAlterPartitionRequestTopic()
	known.TopicID = errTopicID
	known.Partitions = append(known.Partitions,
		part(0, 0, 1),    // broker 1 leads t-0: the ISR shrinks to [1]
		part(1, 0, 2),    // t-1 is led by broker 2
		part(0, 0, 1, 2), // t-0 again
		part(5, 0, 1))    // no such partition
	unknown := kmsg.NewAlterPartitionRequestTopic()
	unknown.TopicID = metadata.UUID{0xee}
	unknown.Partitions = append(unknown.Partitions, part(0, 0, 1))
	req.Topics = append(req.Topics, known, unknown)

	resp := h.LinkHandler().Handle(context.Background(), &protocol.ConnInfo{},
		&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req}).Msg.(*kmsg.AlterPartitionResponse)
	var got []nameCode
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			got = append(got, nameCode{fmt.Sprintf("%x-%d", rt.TopidID[:1], rp.Partition), rp.ErrorCode})
		}
	}
	wantCodes(t, "AlterPartition", got,
		"09-0", nil, "09-1", kerr.InvalidRequest, "09-0", kerr.InvalidRequest, "09-5", kerr.UnknownTopicOrPartition,
		"ee-0", kerr.UnknownTopicID)
	if p := resp.Topics[0].Partitions[0]; !slices.Equal(p.ISR, []int32{1}) || p.PartitionEpoch != 1 || p.LeaderID != 1 {
		t.Errorf("t-0 answered ISR %v at partition epoch %d, leader %d; want [1] at 1, leader 1", p.ISR, p.PartitionEpoch, p.LeaderID)
	}
	pc := h.cluster.(waitingCluster).Cluster.(*planCluster)
	if pc.alterPartitions != 1 {
		t.Errorf("%d controller calls for one request, want 1", pc.alterPartitions)
	}
	if isr := pc.Image().Partition("t", 0).ISR; !slices.Equal(isr, []int32{1}) {
		t.Errorf("t-0's ISR in the image is %v, want [1]", isr)
	}

	// A broker not registered at the epoch it names is refused whole, at the
	// top of the response with no topics, as Kafka's controller answers it
	// (an unknown broker too).
	for _, b := range []struct {
		id    int32
		epoch int64
	}{{1, 9}, {7, 1}} {
		req.BrokerID, req.BrokerEpoch = b.id, b.epoch
		resp := h.LinkHandler().Handle(context.Background(), &protocol.ConnInfo{},
			&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req}).Msg.(*kmsg.AlterPartitionResponse)
		if resp.ErrorCode != kerr.StaleBrokerEpoch.Code || len(resp.Topics) != 0 {
			t.Errorf("broker %d at epoch %d: error %d with %d topics, want STALE_BROKER_EPOCH (%d) and none",
				b.id, b.epoch, resp.ErrorCode, len(resp.Topics), kerr.StaleBrokerEpoch.Code)
		}
	}
	if isr := pc.Image().Partition("t", 0).ISR; !slices.Equal(isr, []int32{1}) {
		t.Errorf("t-0's ISR in the image is %v after refused requests, want [1]", isr)
	}
}

// TestAlterPartitionNewLeaderElected: an AlterPartition whose ISR completes a
// reassignment that removes its sender, the leader, is applied and answered
// NEW_LEADER_ELECTED, FENCED_LEADER_EPOCH before v2, as Kafka's controller
// answers it.
func TestAlterPartitionNewLeaderElected(t *testing.T) {
	for _, tt := range []struct {
		version int16
		want    *kerr.Error
	}{{3, kerr.NewLeaderElected}, {2, kerr.NewLeaderElected}, {1, kerr.FencedLeaderEpoch}, {0, kerr.FencedLeaderEpoch}} {
		t.Run(fmt.Sprintf("v%d", tt.version), func(t *testing.T) {
			h := newAdminHandlers(t)
			pc := h.cluster.(waitingCluster).Cluster.(*planCluster)
			// t-0 moves from [1 2] to [2] while 2 is out of the ISR.
			if err := pc.apply([]metadata.Record{&metadata.PartitionChangeRecord{TopicID: errTopicID, Partition: 0,
				Leader: 1, ISR: []int32{1}}}, false); err != nil {
				t.Fatal(err)
			}
			recs, errs := controller.PlanAlterReassignments(pc.img, []controller.Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{2}}}, nil)
			if errs[0] != nil {
				t.Fatal(errs[0])
			}
			if err := pc.apply(recs, false); err != nil {
				t.Fatal(err)
			}
			p := pc.Image().Partition("t", 0)
			req := kmsg.NewPtrAlterPartitionRequest()
			req.SetVersion(tt.version)
			req.BrokerID, req.BrokerEpoch = 1, 1
			rt := kmsg.NewAlterPartitionRequestTopic()
			rt.Topic, rt.TopicID = "t", errTopicID
			rp := kmsg.NewAlterPartitionRequestTopicPartition()
			rp.LeaderEpoch, rp.PartitionEpoch = p.LeaderEpoch, p.PartitionEpoch
			rp.NewISR = []int32{1, 2}
			for _, id := range rp.NewISR {
				m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
				m.BrokerID, m.BrokerEpoch = id, -1
				rp.NewEpochISR = append(rp.NewEpochISR, m)
			}
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)

			resp := h.LinkHandler().Handle(context.Background(), &protocol.ConnInfo{},
				&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req}).Msg.(*kmsg.AlterPartitionResponse)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("answered %+v", resp)
			}
			if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != tt.want {
				t.Errorf("answered %v, want %v", err, tt.want)
			}
			if p := pc.Image().Partition("t", 0); p.Reassigning() || p.Leader != 2 {
				t.Errorf("t-0 is %+v, want the reassignment completed and led by 2", p)
			}
		})
	}
}

// TestAlterClientQuotasRemoveUnsetKey: Kafka's controller validates the keys it
// sets, not the ones it removes (ClientQuotaControlManager: a removal of a key
// the entity has not set writes nothing and succeeds), so removing an unknown
// key, or one the entity does not take, is not an error, and the entry's other
// changes apply. Strata refused such an entry with INVALID_REQUEST.
func TestAlterClientQuotasRemoveUnsetKey(t *testing.T) {
	h := newAdminHandlers(t)
	entry := func(typ, name string, ops ...kmsg.AlterClientQuotasRequestEntryOp) kmsg.AlterClientQuotasRequestEntry {
		e := kmsg.NewAlterClientQuotasRequestEntry()
		e.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: typ, Name: kmsg.StringPtr(name)}}
		e.Ops = ops
		return e
	}
	remove := func(key string) kmsg.AlterClientQuotasRequestEntryOp {
		return kmsg.AlterClientQuotasRequestEntryOp{Key: key, Remove: true}
	}
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{
		entry("user", "a", remove("fetch_byte_rate")),
		entry("ip", "10.0.0.1", remove("producer_byte_rate")),
		entry("user", "b", kmsg.AlterClientQuotasRequestEntryOp{Key: "producer_byte_rate", Value: 1024}, remove("no_such_key")),
	}
	var got []nameCode
	for _, e := range serve(t, h, req).(*kmsg.AlterClientQuotasResponse).Entries {
		got = append(got, nameCode{nullable(e.Entity[0].Name), e.ErrorCode})
	}
	wantCodes(t, "AlterClientQuotas", got, "a", nil, "10.0.0.1", nil, "b", nil)
	if v, ok := h.cluster.Image().Quota(metadata.QuotaEntity{User: metadata.QuotaName{Set: true, Name: "b"}}, metadata.QuotaProducerByteRate); !ok || v != 1024 {
		t.Errorf("user b's producer_byte_rate: %v %v, want 1024", v, ok)
	}
}
