package handlers

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/txn"
)

// TestGroupConfigsAuthorizedOnTheGroup: Kafka authorizes a GROUP config
// resource (type 32, KIP-848) on the group itself: DESCRIBE_CONFIGS /
// ALTER_CONFIGS on GROUP <name>, refused with GROUP_AUTHORIZATION_FAILED
// (KafkaApis / ControllerApis, ConfigResource.Type.GROUP). Cluster-level
// config rights do not reach a group's configs, and a group ACL suffices.
func TestGroupConfigsAuthorizedOnTheGroup(t *testing.T) {
	set := kmsg.IncrementalAlterConfigOpSet
	groupRes := kmsg.ConfigResourceTypeGroupConfig
	alter := func() *kmsg.IncrementalAlterConfigsRequest {
		return incrementalAlter(groupRes, "g", set, "consumer.session.timeout.ms", kmsg.StringPtr("50000"))
	}
	describe := func() *kmsg.DescribeConfigsRequest {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = groupRes, "g"
		req.Resources = append(req.Resources, rr)
		return req
	}

	// ALTER_CONFIGS and DESCRIBE_CONFIGS on the cluster only: no right on the group.
	clusterOnly := newAdminHandlersWith(t, Config{Authorizer: allowAnonymous(
		kmsg.ACLOperationAlterConfigs, resCluster, acl.ClusterName,
		kmsg.ACLOperationDescribeConfigs, resCluster, acl.ClusterName)})
	if code := serve(t, clusterOnly, alter()).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("IncrementalAlterConfigs of group g with ALTER_CONFIGS on the cluster only: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if code := serve(t, clusterOnly, describe()).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("DescribeConfigs of group g with DESCRIBE_CONFIGS on the cluster only: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}

	// ALTER_CONFIGS on the group (which implies DESCRIBE_CONFIGS): allowed.
	groupOnly := newAdminHandlersWith(t, Config{Authorizer: allowAnonymous(kmsg.ACLOperationAlterConfigs, resGroup, "g")})
	if code := serve(t, groupOnly, alter()).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; code != 0 {
		t.Errorf("IncrementalAlterConfigs of group g with ALTER_CONFIGS on the group: %v, want no error", kerr.ErrorForCode(code))
	}
	if code := serve(t, groupOnly, describe()).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode; code != 0 {
		t.Errorf("DescribeConfigs of group g with ALTER_CONFIGS on the group: %v, want no error", kerr.ErrorForCode(code))
	}
}

// TestDeleteTopicsByIDDoesNotLeakTheName: DeleteTopics by topic id of a
// topic the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED without
// the topic's name, as Kafka answers it, so ids cannot be mapped to names.
// The answer used to carry the name.
func TestDeleteTopicsByIDDoesNotLeakTheName(t *testing.T) {
	h := newAdminHandlersWith(t, Config{Authorizer: allowAnonymous(kmsg.ACLOperationRead, resTopic, "other")})
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(6)
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.TopicID = errTopicID
	req.Topics = append(req.Topics, rt)
	resp := serve(t, h, req).(*kmsg.DeleteTopicsResponse)
	if len(resp.Topics) != 1 {
		t.Fatalf("%d topics answered, want 1", len(resp.Topics))
	}
	got := resp.Topics[0]
	if got.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("code %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(got.ErrorCode))
	}
	if got.Topic != nil {
		t.Errorf("the answer names the topic %q the principal may not DESCRIBE; want a null name", *got.Topic)
	}
}

// TestMetadataAutoCreateWithoutCreateIsAuthorizationFailed: with
// auto.create.topics.enable and AllowAutoTopicCreation, a missing topic the
// principal may DESCRIBE but not CREATE (neither on the cluster nor on the
// topic) is answered TOPIC_AUTHORIZATION_FAILED by Kafka's
// handleTopicMetadataRequest (unauthorizedForCreateTopics), so a client fails
// at once instead of retrying an unknown topic until it times out.
func TestMetadataAutoCreateWithoutCreateIsAuthorizationFailed(t *testing.T) {
	h := newErrorsHandlersWith(t, Config{AutoCreateTopics: true,
		Authorizer: allowAnonymous(kmsg.ACLOperationDescribe, resTopic, "missing")})
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("missing")
	req.Topics = append(req.Topics, rt)
	resp := serve(t, h, req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 {
		t.Fatalf("%d topics answered, want 1", len(resp.Topics))
	}
	if code := resp.Topics[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("missing topic, DESCRIBE but no CREATE, auto-creation on: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
}

// TestWriteTxnMarkersAuthorizedByClusterAlter: Kafka's handleWriteTxnMarkersRequest
// allows ALTER on the cluster as well as CLUSTER_ACTION, so an operator's
// kafka-transactions.sh abort (which sends WriteTxnMarkers to the partition
// leader) needs only ALTER. Without either, every partition is
// CLUSTER_AUTHORIZATION_FAILED.
func TestWriteTxnMarkersAuthorizedByClusterAlter(t *testing.T) {
	marker := func() *kmsg.WriteTxnMarkersRequest {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		rm := kmsg.NewWriteTxnMarkersRequestMarker()
		rm.ProducerID, rm.ProducerEpoch = 7, 0
		rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		rt.Topic, rt.Partitions = "missing", []int32{0}
		rm.Topics = append(rm.Topics, rt)
		req.Markers = append(req.Markers, rm)
		return req
	}
	for _, tc := range []struct {
		name string
		op   kmsg.ACLOperation
		want *kerr.Error
	}{
		{"CLUSTER_ACTION", kmsg.ACLOperationClusterAction, kerr.UnknownTopicOrPartition},
		{"ALTER", kmsg.ACLOperationAlter, kerr.UnknownTopicOrPartition},
		{"DESCRIBE only", kmsg.ACLOperationDescribe, kerr.ClusterAuthorizationFailed},
	} {
		h := newErrorsHandlersWith(t, Config{Authorizer: allowAnonymous(tc.op, resCluster, acl.ClusterName)})
		resp := serve(t, h, marker()).(*kmsg.WriteTxnMarkersResponse)
		if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != tc.want.Code {
			t.Errorf("%s on the cluster: %v, want %v", tc.name, kerr.ErrorForCode(code), tc.want)
		}
	}
}

// describedTxns is a transaction coordinator that knows two ongoing
// transactions, tx-ok and tx-no, each with partitions of topics t and secret.
type describedTxns struct{ Transactions }

func (describedTxns) Describe(id string) (txn.Described, int16) {
	return txn.Described{TransactionalID: id, Meta: txn.Meta{ProducerID: 3, State: txn.Ongoing, StartMs: 1,
		Partitions: []txn.TopicPartition{{Topic: "secret", Partition: 0}, {Topic: "t", Partition: 0}}}}, 0
}

func (d describedTxns) List(txn.ListFilter) ([]txn.Described, int16) {
	ok, _ := d.Describe("tx-ok")
	no, _ := d.Describe("tx-no")
	return []txn.Described{ok, no}, 0
}

// TestTransactionsAdminAuthorizedPerTransactionalID: as Kafka's
// handleDescribeTransactionsRequest and handleListTransactionsRequest,
// DescribeTransactions needs DESCRIBE on each transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for that id) and lists only the
// topics the principal may DESCRIBE; ListTransactions lists only the ids the
// principal may DESCRIBE. Neither needs anything on the cluster.
func TestTransactionsAdminAuthorizedPerTransactionalID(t *testing.T) {
	describe := kmsg.ACLOperationDescribe
	h := newAdminHandlersWith(t, Config{Transactions: describedTxns{},
		Authorizer: allowAnonymous(describe, resTxnID, "tx-ok", describe, resTopic, "t")})

	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{"tx-ok", "tx-no"}
	resp := serve(t, h, req).(*kmsg.DescribeTransactionsResponse)
	var got []string
	for _, st := range resp.TransactionStates {
		s := fmt.Sprintf("%s %v", st.TransactionalID, kerr.ErrorForCode(st.ErrorCode))
		for _, tp := range st.Topics {
			s += " " + tp.Topic
		}
		got = append(got, s)
	}
	if want := []string{"tx-ok <nil> t", "tx-no " + kerr.TransactionalIDAuthorizationFailed.Error()}; !slices.Equal(got, want) {
		t.Errorf("DescribeTransactions: %q, want %q", got, want)
	}

	list := serve(t, h, kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse)
	var ids []string
	for _, st := range list.TransactionStates {
		ids = append(ids, st.TransactionalID)
	}
	if list.ErrorCode != 0 || !slices.Equal(ids, []string{"tx-ok"}) {
		t.Errorf("ListTransactions: %v %q, want no error and [tx-ok]", kerr.ErrorForCode(list.ErrorCode), ids)
	}
}

// TestDeleteTopicsAsKafkaController: Kafka's controller (ControllerApis
// deleteTopics) lets DELETE on the cluster delete every topic, and answers a
// missing topic the principal may DESCRIBE (but not DELETE)
// UNKNOWN_TOPIC_OR_PARTITION; one it may not DESCRIBE stays
// TOPIC_AUTHORIZATION_FAILED, existing or not.
func TestDeleteTopicsAsKafkaController(t *testing.T) {
	describe, del := kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete
	for _, tc := range []struct {
		name  string
		rules []any
		want  []any
	}{
		{"DELETE on the cluster", []any{del, resCluster, acl.ClusterName},
			[]any{"t", nil, "gone", kerr.UnknownTopicOrPartition}},
		{"DESCRIBE on the topics", []any{describe, resTopic, "t", describe, resTopic, "gone"},
			[]any{"t", kerr.TopicAuthorizationFailed, "gone", kerr.UnknownTopicOrPartition}},
		{"nothing", nil,
			[]any{"t", kerr.TopicAuthorizationFailed, "gone", kerr.TopicAuthorizationFailed}},
	} {
		h := newAdminHandlersWith(t, Config{Authorizer: allowAnonymous(tc.rules...)})
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.SetVersion(5)
		req.TopicNames = []string{"t", "gone"}
		var got []nameCode
		for _, rt := range serve(t, h, req).(*kmsg.DeleteTopicsResponse).Topics {
			got = append(got, nameCode{*rt.Topic, rt.ErrorCode})
		}
		slices.SortFunc(got, func(a, b nameCode) int { return -strings.Compare(a.name, b.name) })
		wantCodes(t, tc.name, got, tc.want...)
	}
}

// TestCreateTopicsConfigsNeedDescribeConfigs: Kafka's controller returns a
// created topic's partitions, replication factor and configs only to a
// principal that may DESCRIBE_CONFIGS it; to another it answers them unset
// with TopicConfigErrorCode TOPIC_AUTHORIZATION_FAILED
// (ReplicationControlManager createTopic). A topic it may not create is
// TOPIC_AUTHORIZATION_FAILED with the message "Authorization failed.".
func TestCreateTopicsConfigsNeedDescribeConfigs(t *testing.T) {
	create, describeConfigs := kmsg.ACLOperationCreate, kmsg.ACLOperationDescribeConfigs
	h := newAdminHandlersWith(t, Config{Authorizer: allowAnonymous(
		create, resTopic, "hidden", create, resTopic, "shown", describeConfigs, resTopic, "shown")})
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	for _, name := range []string{"hidden", "shown", "denied"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		req.Topics = append(req.Topics, rt)
	}
	var got []string
	for _, rt := range serve(t, h, req).(*kmsg.CreateTopicsResponse).Topics {
		got = append(got, fmt.Sprintf("%s %v %q partitions=%d rf=%d configs=%t configErr=%v", rt.Topic, kerr.ErrorForCode(rt.ErrorCode),
			nullable(rt.ErrorMessage), rt.NumPartitions, rt.ReplicationFactor, len(rt.Configs) > 0, kerr.ErrorForCode(rt.ConfigErrorCode)))
	}
	want := []string{
		`hidden <nil> "" partitions=-1 rf=-1 configs=false configErr=` + kerr.TopicAuthorizationFailed.Error(),
		`shown <nil> "" partitions=1 rf=1 configs=true configErr=<nil>`,
		`denied ` + kerr.TopicAuthorizationFailed.Error() + ` "Authorization failed." partitions=-1 rf=-1 configs=false configErr=<nil>`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("CreateTopics:\n got %q\nwant %q", got, want)
	}
}

// TestInitProducerIDWithWriteOnTopicsNotYetCreated: an idempotent producer's
// InitProducerId needs IDEMPOTENT_WRITE on the cluster or WRITE on at least
// one topic, which Kafka decides from the ACLs alone
// (authorizeByResourceType), so a WRITE on a prefix or a name of topics not
// created yet is enough.
func TestInitProducerIDWithWriteOnTopicsNotYetCreated(t *testing.T) {
	write := kmsg.ACLOperationWrite
	for _, tc := range []struct {
		name    string
		pattern kmsg.ACLResourcePatternType
		op      kmsg.ACLOperation
		want    *kerr.Error
	}{
		{"WRITE on a prefix", kmsg.ACLResourcePatternTypePrefixed, write, kerr.CoordinatorLoadInProgress},
		{"WRITE on a name", kmsg.ACLResourcePatternTypeLiteral, write, kerr.CoordinatorLoadInProgress},
		{"READ on a name", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationRead, kerr.ClusterAuthorizationFailed},
	} {
		a := acl.New(acl.Config{}, []acl.Binding{{ResourceType: resTopic, ResourceName: "orders-", PatternType: tc.pattern,
			Principal: "User:ANONYMOUS", Host: acl.WildcardHost, Operation: tc.op, Permission: kmsg.ACLPermissionTypeAllow}})
		h := newErrorsHandlersWith(t, Config{Authorizer: func() *acl.Authorizer { return a }})
		h.cluster = noProducerIDs{h.cluster}
		req := kmsg.NewPtrInitProducerIDRequest()
		req.SetVersion(4)
		req.ProducerID, req.ProducerEpoch = -1, -1
		if code := serve(t, h, req).(*kmsg.InitProducerIDResponse).ErrorCode; code != tc.want.Code {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(code), tc.want)
		}
	}
}

// TestACLHostsAsJavaWritesThem: Kafka compares an ACL's host with the
// client's address as Java's InetAddress.getHostAddress writes it: IPv6 as
// eight groups without zero compression ("0:0:0:0:0:0:0:1"), an IPv4-mapped
// address as IPv4. An ACL written for Kafka must match the same clients here.
func TestACLHostsAsJavaWritesThem(t *testing.T) {
	for _, tc := range []struct {
		aclHost string
		client  net.IP
		want    *kerr.Error
	}{
		{"0:0:0:0:0:0:0:1", net.IPv6loopback, nil},
		{"::1", net.IPv6loopback, kerr.ClusterAuthorizationFailed},
		{"2001:db8:0:0:0:0:0:a", net.ParseIP("2001:db8::a"), nil},
		{"10.0.0.1", net.ParseIP("::ffff:10.0.0.1"), nil},
	} {
		a := acl.New(acl.Config{}, []acl.Binding{{ResourceType: resCluster, ResourceName: acl.ClusterName, PatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:ANONYMOUS", Host: tc.aclHost, Operation: kmsg.ACLOperationDescribe, Permission: kmsg.ACLPermissionTypeAllow}})
		h := newAdminHandlersWith(t, Config{Authorizer: func() *acl.Authorizer { return a }})
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		c := &protocol.ConnInfo{RemoteAddr: &net.TCPAddr{IP: tc.client, Port: 5000}}
		resp := serveRequest(t, h, c, &protocol.Request{Key: req.Key(), Version: req.GetVersion(), Msg: req}).(*kmsg.DescribeACLsResponse)
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if resp.ErrorCode != want {
			t.Errorf("ACL host %s, client %s: %v, want %v", tc.aclHost, tc.client, kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(want))
		}
	}
}

// TestAddPartitionsToTxnRefusesInternalTopics: Kafka's
// handleAddPartitionsToTxnRequest (v0-v3, clients) never counts an internal
// topic as authorized, so its partitions are TOPIC_AUTHORIZATION_FAILED (the
// others OPERATION_NOT_ATTEMPTED) even with WRITE on every topic, or with no
// authorizer at all.
func TestAddPartitionsToTxnRefusesInternalTopics(t *testing.T) {
	write := kmsg.ACLOperationWrite
	for name, authz := range map[string]func() *acl.Authorizer{
		"WRITE on every topic": allowAnonymous(write, resTxnID, "tx", write, resTopic, acl.WildcardResource),
		"no authorizer":        nil,
	} {
		txns := &recordingTxns{}
		h := newErrorsHandlersWith(t, Config{Transactions: txns, Authorizer: authz})
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.SetVersion(3)
		req.TransactionalID, req.ProducerID = "tx", 5
		for _, topic := range []string{"t", OffsetsTopic} {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = topic, []int32{0}
			req.Topics = append(req.Topics, rt)
		}
		var got []nameCode
		for _, rt := range serve(t, h, req).(*kmsg.AddPartitionsToTxnResponse).Topics {
			got = append(got, nameCode{rt.Topic, rt.Partitions[0].ErrorCode})
		}
		wantCodes(t, name, got, "t", kerr.OperationNotAttempted, OffsetsTopic, kerr.TopicAuthorizationFailed)
		if txns.calls != 0 {
			t.Errorf("%s: the coordinator was called", name)
		}
	}
}
