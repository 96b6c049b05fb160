package handlers

// Authorization: with an Authorizer configured (--authorizer acl), every request
// is checked the way Kafka's KafkaApis checks it, per resource where the response
// has per-resource errors:
//
//	Produce                 WRITE topic (TOPIC_AUTHORIZATION_FAILED per partition)
//	Fetch                   READ topic; a replica's fetch CLUSTER_ACTION on the cluster
//	ListOffsets             DESCRIBE topic
//	OffsetForLeaderEpoch    DESCRIBE topic, or CLUSTER_ACTION on the cluster
//	Metadata                DESCRIBE topic: the listing shows only those; auto-creation
//	                        needs CREATE on the cluster or the topic
//	DescribeTopicPartitions DESCRIBE topic: the listing shows only those, a named
//	                        topic is TOPIC_AUTHORIZATION_FAILED
//	CreateTopics            CREATE on the cluster or the topic; the created topic's
//	                        settings need DESCRIBE_CONFIGS on it
//	DeleteTopics            DELETE on the cluster or the topic
//	DeleteRecords           DELETE topic
//	CreatePartitions        ALTER topic
//	InitProducerId          IDEMPOTENT_WRITE on the cluster, or WRITE on any topic
//	                        (existing or not: acl.AuthorizeByResourceType)
//	DescribeConfigs         DESCRIBE_CONFIGS on the topic, or the cluster for brokers
//	AlterConfigs, IncrementalAlterConfigs   ALTER_CONFIGS likewise
//	FindCoordinator         DESCRIBE group, or transactional id
//	JoinGroup, SyncGroup, Heartbeat, LeaveGroup   READ group
//	OffsetCommit            READ group, READ topic; OffsetDelete DELETE group, READ topic
//	OffsetFetch             DESCRIBE group; only DESCRIBE-able topics are listed
//	DescribeGroups          DESCRIBE group; DeleteGroups DELETE group
//	ListGroups              DESCRIBE on the cluster, else only DESCRIBE-able groups
//	DescribeAcls, DescribeUserScramCredentials   DESCRIBE cluster
//	DescribeCluster         anyone; its cluster authorized operations need DESCRIBE
//	DescribeClientQuotas / AlterClientQuotas   DESCRIBE_CONFIGS / ALTER_CONFIGS cluster
//	ListConfigResources     DESCRIBE_CONFIGS cluster
//	GetTelemetrySubscriptions, PushTelemetry   anyone (as Kafka)
//	ElectLeaders, CreateAcls, DeleteAcls, AlterUserScramCredentials   ALTER cluster
//	InitProducerId with a transactional id, AddPartitionsToTxn (v0-v3),
//	AddOffsetsToTxn, EndTxn, TxnOffsetCommit   WRITE transactional id
//	AddPartitionsToTxn v4+ (brokers verifying)   CLUSTER_ACTION cluster
//	WriteTxnMarkers         CLUSTER_ACTION or ALTER on the cluster
//	DescribeLogDirs, ListPartitionReassignments, DescribeQuorum   DESCRIBE cluster
//	AlterPartitionReassignments, UnregisterBroker, UnregisterController,
//	AddRaftVoter, RemoveRaftVoter, AlterReplicaLogDirs   ALTER cluster
//	ConsumerGroupHeartbeat  READ group, DESCRIBE on every subscribed topic (KIP-848:
//	                        TOPIC_AUTHORIZATION_FAILED for the whole heartbeat)
//	ConsumerGroupDescribe   DESCRIBE group; a group assigning a topic the principal
//	                        may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED
//	DescribeProducers       READ topic (TOPIC_AUTHORIZATION_FAILED per partition)
//	ShareFetch, ShareAcknowledge   READ group, READ topic
//	ShareGroupHeartbeat     READ group, DESCRIBE on every subscribed topic
//	ShareGroupDescribe      DESCRIBE group (per group)
//	DescribeShareGroupOffsets   DESCRIBE group (per group), DESCRIBE topic
//	AlterShareGroupOffsets  READ group, READ topic; DeleteShareGroupOffsets DELETE
//	                        group, READ topic (share groups: as a Kafka 4.4 broker
//	                        answered side by side, interop/cmd/sharecompare)
//	CreateDelegationToken   for another owner CREATE_TOKENS on its User resource;
//	                        DescribeDelegationToken lists per token (tokens.go)
//	DescribeTransactions    DESCRIBE transactional id (per id); lists only the
//	                        DESCRIBE-able topics. ListTransactions: only the
//	                        DESCRIBE-able transactional ids
//
// Requests forwarded over the controller link were authorized by the broker that
// forwarded them and are not checked again.

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/protocol"
)

const (
	resTopic   = kmsg.ACLResourceTypeTopic
	resGroup   = kmsg.ACLResourceTypeGroup
	resCluster = kmsg.ACLResourceTypeCluster
	resTxnID   = kmsg.ACLResourceTypeTransactionalId
)

// authorize reports whether c's principal may perform op on the resource. It is
// true without an authorizer, and for requests forwarded over the controller link.
func (h *Handlers) authorize(ctx context.Context, c *protocol.ConnInfo, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if h.cfg.Authorizer == nil || ctx.Value(onLinkKey{}) != nil || c == nil {
		return true
	}
	a := h.cfg.Authorizer()
	return a == nil || a.Authorize(c.Principal(), remoteHost(c.RemoteAddr), op, rt, name)
}

// authorizeCluster is authorize on the cluster resource.
func (h *Handlers) authorizeCluster(ctx context.Context, c *protocol.ConnInfo, op kmsg.ACLOperation) bool {
	return h.authorize(ctx, c, op, resCluster, acl.ClusterName)
}

// remoteHost is the client's IP as ACL hosts name it (acl.ClientHost).
func remoteHost(a net.Addr) string {
	if a == nil {
		return ""
	}
	return acl.ClientHost(a.String())
}

// requestCheck is a whole-request authorization: the operation (or, when set,
// orOp instead) on the resource, and the error code a denied request gets.
type requestCheck struct {
	op   kmsg.ACLOperation
	orOp kmsg.ACLOperation
	rt   kmsg.ACLResourceType
	name func(kmsg.Request) string
	code int16
}

func clusterCheck(op kmsg.ACLOperation) requestCheck {
	return requestCheck{op: op, rt: resCluster, name: func(kmsg.Request) string { return acl.ClusterName }, code: kerr.ClusterAuthorizationFailed.Code}
}

func groupCheck(op kmsg.ACLOperation, name func(kmsg.Request) string) requestCheck {
	return requestCheck{op: op, rt: resGroup, name: name, code: kerr.GroupAuthorizationFailed.Code}
}

func txnIDCheck(op kmsg.ACLOperation, name func(kmsg.Request) string) requestCheck {
	return requestCheck{op: op, rt: resTxnID, name: name, code: kerr.TransactionalIDAuthorizationFailed.Code}
}

// requestChecks are the APIs authorized as a whole before they are served.
var requestChecks = map[int16]requestCheck{
	11: groupCheck(kmsg.ACLOperationRead, func(r kmsg.Request) string { return r.(*kmsg.JoinGroupRequest).Group }),
	12: groupCheck(kmsg.ACLOperationRead, func(r kmsg.Request) string { return r.(*kmsg.HeartbeatRequest).Group }),
	13: groupCheck(kmsg.ACLOperationRead, func(r kmsg.Request) string { return r.(*kmsg.LeaveGroupRequest).Group }),
	14: groupCheck(kmsg.ACLOperationRead, func(r kmsg.Request) string { return r.(*kmsg.SyncGroupRequest).Group }),
	29: clusterCheck(kmsg.ACLOperationDescribe),
	30: clusterCheck(kmsg.ACLOperationAlter),
	31: clusterCheck(kmsg.ACLOperationAlter),
	43: clusterCheck(kmsg.ACLOperationAlter),
	48: clusterCheck(kmsg.ACLOperationDescribeConfigs),
	49: clusterCheck(kmsg.ACLOperationAlterConfigs),
	50: clusterCheck(kmsg.ACLOperationDescribe),
	51: clusterCheck(kmsg.ACLOperationAlter),
	57: clusterCheck(kmsg.ACLOperationAlter),

	25: txnIDCheck(kmsg.ACLOperationWrite, func(r kmsg.Request) string { return r.(*kmsg.AddOffsetsToTxnRequest).TransactionalID }),
	26: txnIDCheck(kmsg.ACLOperationWrite, func(r kmsg.Request) string { return r.(*kmsg.EndTxnRequest).TransactionalID }),
	// ALTER too, as Kafka: kafka-transactions.sh abort sends WriteTxnMarkers.
	27: {op: kmsg.ACLOperationClusterAction, orOp: kmsg.ACLOperationAlter, rt: resCluster,
		name: func(kmsg.Request) string { return acl.ClusterName }, code: kerr.ClusterAuthorizationFailed.Code},
	28: txnIDCheck(kmsg.ACLOperationWrite, func(r kmsg.Request) string { return r.(*kmsg.TxnOffsetCommitRequest).TransactionalID }),
	34: clusterCheck(kmsg.ACLOperationAlter),
	35: clusterCheck(kmsg.ACLOperationDescribe),
	45: clusterCheck(kmsg.ACLOperationAlter),
	46: clusterCheck(kmsg.ACLOperationDescribe),
	55: clusterCheck(kmsg.ACLOperationDescribe),
	64: clusterCheck(kmsg.ACLOperationAlter),
	74: clusterCheck(kmsg.ACLOperationDescribeConfigs),
	68: groupCheck(kmsg.ACLOperationRead, func(r kmsg.Request) string { return r.(*kmsg.ConsumerGroupHeartbeatRequest).Group }),
	76: groupCheck(kmsg.ACLOperationRead, func(r kmsg.Request) string { return r.(*kmsg.ShareGroupHeartbeatRequest).GroupID }),
	88: groupCheck(kmsg.ACLOperationRead, func(r kmsg.Request) string { return r.(*kmsg.StreamsGroupHeartbeatRequest).Group }),
	93: groupCheck(kmsg.ACLOperationRead, func(r kmsg.Request) string { return r.(*kmsg.StreamsGroupTopologyDescriptionUpdateRequest).Group }),
	91: groupCheck(kmsg.ACLOperationRead, func(r kmsg.Request) string { return r.(*kmsg.AlterShareGroupOffsetsRequest).GroupID }),
	92: groupCheck(kmsg.ACLOperationDelete, func(r kmsg.Request) string { return r.(*kmsg.DeleteShareGroupOffsetsRequest).GroupID }),
	78: groupCheck(kmsg.ACLOperationRead, func(r kmsg.Request) string { return nullable(r.(*kmsg.ShareFetchRequest).GroupID) }),
	79: groupCheck(kmsg.ACLOperationRead, func(r kmsg.Request) string { return nullable(r.(*kmsg.ShareAcknowledgeRequest).GroupID) }),
	80: clusterCheck(kmsg.ACLOperationAlter),
	81: clusterCheck(kmsg.ACLOperationAlter),
	94: clusterCheck(kmsg.ACLOperationAlter),
	// A voter's request (Kafka's ControllerApis.handleUpdateRaftVoter); on
	// the controller link, which authenticates nodes, no ACL is checked.
	82: clusterCheck(kmsg.ACLOperationClusterAction),
}

// nullable is a nullable string's value, "" for null.
func nullable(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// versionedChecks are whole-request checks that depend on the request's version.
var versionedChecks = map[int16]func(kmsg.Request) requestCheck{
	// v4+ is a partition leader verifying a transaction with its coordinator.
	24: func(r kmsg.Request) requestCheck {
		if r.GetVersion() >= 4 {
			return clusterCheck(kmsg.ACLOperationClusterAction)
		}
		return txnIDCheck(kmsg.ACLOperationWrite, func(r kmsg.Request) string { return r.(*kmsg.AddPartitionsToTxnRequest).TransactionalID })
	},
}

// checkRequest applies requestChecks: ok is false when the request is denied
// and resp is the answer.
func (h *Handlers) checkRequest(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) (protocol.Response, bool) {
	chk, ok := requestChecks[r.Key]
	if versioned, has := versionedChecks[r.Key]; has {
		chk, ok = versioned(r.Msg), true
	}
	if !ok || h.authorize(ctx, c, chk.op, chk.rt, chk.name(r.Msg)) ||
		chk.orOp != kmsg.ACLOperationUnknown && h.authorize(ctx, c, chk.orOp, chk.rt, chk.name(r.Msg)) {
		return protocol.Response{}, true
	}
	return protocol.Response{Msg: deniedResponse(r.Msg, chk.code)}, false
}

// deniedResponse answers a request denied as a whole with code in every place
// the response carries an error.
func deniedResponse(req kmsg.Request, code int16) kmsg.Response {
	resp := errorResponse(req)
	switch resp := resp.(type) {
	case *kmsg.JoinGroupResponse:
		resp.ErrorCode = code
		resp.Generation = -1
	case *kmsg.HeartbeatResponse:
		resp.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		resp.ErrorCode = code
	case *kmsg.SyncGroupResponse:
		resp.ErrorCode = code
	case *kmsg.DescribeACLsResponse:
		resp.ErrorCode = code
	case *kmsg.CreateACLsResponse:
		for range req.(*kmsg.CreateACLsRequest).Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode = code
			resp.Results = append(resp.Results, res)
		}
	case *kmsg.DeleteACLsResponse:
		for range req.(*kmsg.DeleteACLsRequest).Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode = code
			resp.Results = append(resp.Results, res)
		}
	case *kmsg.ElectLeadersResponse:
		resp.ErrorCode = code
	case *kmsg.DescribeUserSCRAMCredentialsResponse:
		resp.ErrorCode = code
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		for _, user := range scramUsersOf(req.(*kmsg.AlterUserSCRAMCredentialsRequest)) {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = user, code
			resp.Results = append(resp.Results, res)
		}
	case *kmsg.AddPartitionsToTxnResponse:
		resp.ErrorCode = code // v4+; older versions answer per partition below
		if req := req.(*kmsg.AddPartitionsToTxnRequest); req.Version < 4 {
			for _, t := range req.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
	case *kmsg.AddOffsetsToTxnResponse:
		resp.ErrorCode = code
	case *kmsg.EndTxnResponse:
		resp.ErrorCode = code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
	case *kmsg.WriteTxnMarkersResponse:
		for _, m := range req.(*kmsg.WriteTxnMarkersRequest).Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
	case *kmsg.TxnOffsetCommitResponse:
		for _, t := range req.(*kmsg.TxnOffsetCommitRequest).Topics { // v6+: the id, checked before it is resolved
			resp.Topics = append(resp.Topics, txnOffsetCommitTopicError(&t, code))
		}
	case *kmsg.AlterReplicaLogDirsResponse:
		for _, d := range req.(*kmsg.AlterReplicaLogDirsRequest).Dirs {
			for _, t := range d.Topics {
				rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
	case *kmsg.DescribeLogDirsResponse:
		resp.ErrorCode = code
	case *kmsg.AlterPartitionAssignmentsResponse:
		failReassignments(req.(*kmsg.AlterPartitionAssignmentsRequest), resp, code, nil)
	case *kmsg.ListPartitionReassignmentsResponse:
		resp.ErrorCode = code
	case *kmsg.UnregisterBrokerResponse:
		resp.ErrorCode = code
	case *kmsg.UnregisterControllerResponse:
		resp.ErrorCode = code
	case *kmsg.UpdateFeaturesResponse:
		resp.ErrorCode = code
	case *kmsg.DescribeQuorumResponse:
		resp.ErrorCode = code
	case *kmsg.AddRaftVoterResponse:
		resp.ErrorCode = code
	case *kmsg.RemoveRaftVoterResponse:
		resp.ErrorCode = code
	case *kmsg.UpdateRaftVoterResponse:
		resp.ErrorCode = code
		resp.CurrentLeader.LeaderID, resp.CurrentLeader.LeaderEpoch = -1, -1
	case *kmsg.ConsumerGroupHeartbeatResponse:
		resp.ErrorCode = code
	case *kmsg.ShareGroupHeartbeatResponse:
		resp.ErrorCode = code
	case *kmsg.StreamsGroupHeartbeatResponse:
		resp.ErrorCode = code
	case *kmsg.StreamsGroupTopologyDescriptionUpdateResponse:
		resp.ErrorCode = code
	case *kmsg.AlterShareGroupOffsetsResponse:
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr("Group authorization failed.") // Kafka 4.4's
	case *kmsg.DeleteShareGroupOffsetsResponse:
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr("Group authorization failed.")
	case *kmsg.ShareFetchResponse:
		resp.ErrorCode = code
	case *kmsg.ShareAcknowledgeResponse:
		resp.ErrorCode = code
	case *kmsg.DescribeClientQuotasResponse:
		resp.ErrorCode = code
	case *kmsg.ListConfigResourcesResponse:
		resp.ErrorCode = code
	case *kmsg.AlterClientQuotasResponse:
		for _, e := range req.(*kmsg.AlterClientQuotasRequest).Entries {
			re := kmsg.NewAlterClientQuotasResponseEntry()
			for _, part := range e.Entity {
				re.Entity = append(re.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: part.Type, Name: part.Name})
			}
			re.ErrorCode = code
			resp.Entries = append(resp.Entries, re)
		}
	}
	return resp
}

// topicCheck returns a check of op on topics for c's principal, remembering each
// answer for the request. Use it on one goroutine.
func (h *Handlers) topicCheck(ctx context.Context, c *protocol.ConnInfo, op kmsg.ACLOperation) func(topic string) bool {
	if h.cfg.Authorizer == nil || ctx.Value(onLinkKey{}) != nil || c == nil {
		return func(string) bool { return true }
	}
	a := h.cfg.Authorizer()
	if a == nil {
		return func(string) bool { return true }
	}
	principal, host := c.Principal(), remoteHost(c.RemoteAddr)
	memo := map[string]bool{}
	return func(topic string) bool {
		ok, seen := memo[topic]
		if !seen {
			ok = a.Authorize(principal, host, op, resTopic, topic)
			memo[topic] = ok
		}
		return ok
	}
}

// mayWriteIdempotently is InitProducerId's check without a transactional id:
// IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679), existing
// or not, as Kafka's authorizeByResourceType decides it.
func (h *Handlers) mayWriteIdempotently(ctx context.Context, c *protocol.ConnInfo) bool {
	if h.authorizeCluster(ctx, c, kmsg.ACLOperationIdempotentWrite) {
		return true
	}
	a := h.cfg.Authorizer() // denied: there is one
	return a == nil || a.AuthorizeByResourceType(c.Principal(), remoteHost(c.RemoteAddr), kmsg.ACLOperationWrite, resTopic)
}

// supportedOperations are the ACL operations each resource type takes, as Kafka
// lists them for the authorized-operations fields of its describe APIs.
var supportedOperations = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	resTopic: {kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe,
		kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs},
	resGroup: {kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs},
	resCluster: {kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe},
}

// authorizedOperations is the bit field (bit n: operation n) of the operations
// c's principal may perform on the resource, out of those its type takes: all
// of them without an authorizer, as Kafka answers.
func (h *Handlers) authorizedOperations(ctx context.Context, c *protocol.ConnInfo, rt kmsg.ACLResourceType, name string) int32 {
	var ops int32
	for _, op := range supportedOperations[rt] {
		if h.authorize(ctx, c, op, rt, name) {
			ops |= 1 << op
		}
	}
	return ops
}
