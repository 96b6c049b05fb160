package server

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/handlers"
)

// matrixCase is one Kafka API in the authorization matrix: a request naming
// topic "m" and group "mg", the code a user without ACLs must get, and where the
// response carries it.
type matrixCase struct {
	req    func(topicID [16]byte) kmsg.Request
	denied *kerr.Error
	code   func(kmsg.Response) int16
}

var (
	topicDenied   = kerr.TopicAuthorizationFailed
	groupDenied   = kerr.GroupAuthorizationFailed
	clusterDenied = kerr.ClusterAuthorizationFailed
)

func str(s string) *string { return &s }

// authzMatrix has an entry for every API the Kafka listener serves. Where kgo
// routes a request by partition leader or group coordinator, the denial a client
// sees is the one of that lookup (the topic or group is hidden from the user).
var authzMatrix = map[int16]matrixCase{
	0: {func(id [16]byte) kmsg.Request {
		r := kmsg.NewPtrProduceRequest()
		r.Acks, r.TimeoutMillis = 1, 5000
		t := kmsg.NewProduceRequestTopic()
		t.Topic, t.TopicID = "m", id
		t.Partitions = append(t.Partitions, kmsg.NewProduceRequestTopicPartition())
		r.Topics = append(r.Topics, t)
		return r
	}, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode }},
	1: {func(id [16]byte) kmsg.Request {
		r := kmsg.NewPtrFetchRequest()
		r.ReplicaID, r.MaxBytes = -1, 1<<20
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = "m", id
		p := kmsg.NewFetchRequestTopicPartition()
		p.PartitionMaxBytes = 1 << 20
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	}, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode }},
	2: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrListOffsetsRequest()
		r.ReplicaID = -1
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = "m"
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Timestamp = -1
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	}, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode }},
	3: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrMetadataRequest()
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = str("m")
		r.Topics = append(r.Topics, t)
		return r
	}, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.MetadataResponse).Topics[0].ErrorCode }},
	8: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation = "mg", -1
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = "m"
		t.Partitions = append(t.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
		r.Topics = append(r.Topics, t)
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode }},
	9: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrOffsetFetchRequest()
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "mg"
		r.Group, r.Groups = "mg", append(r.Groups, g)
		return r
	}, groupDenied, func(r kmsg.Response) int16 {
		rs := r.(*kmsg.OffsetFetchResponse)
		if len(rs.Groups) > 0 {
			return rs.Groups[0].ErrorCode
		}
		return rs.ErrorCode
	}},
	10: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorKey, r.CoordinatorKeys = "mg", []string{"mg"}
		return r
	}, groupDenied, func(r kmsg.Response) int16 {
		rs := r.(*kmsg.FindCoordinatorResponse)
		if len(rs.Coordinators) > 0 {
			return rs.Coordinators[0].ErrorCode
		}
		return rs.ErrorCode
	}},
	11: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Group, r.ProtocolType, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = "mg", "consumer", 10000, 10000
		r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: "range"})
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }},
	12: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.MemberID = "mg", "x"
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode }},
	13: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrLeaveGroupRequest()
		r.Group, r.MemberID = "mg", "x"
		r.Members = append(r.Members, kmsg.LeaveGroupRequestMember{MemberID: "x"})
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).ErrorCode }},
	14: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrSyncGroupRequest()
		r.Group, r.MemberID, r.ProtocolType, r.Protocol = "mg", "x", str("consumer"), str("range")
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode }},
	15: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Groups = []string{"mg"}
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode }},
	16: {func([16]byte) kmsg.Request { return kmsg.NewPtrListGroupsRequest() },
		nil, func(r kmsg.Response) int16 { return r.(*kmsg.ListGroupsResponse).ErrorCode }}, // filtered, not refused
	19: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrCreateTopicsRequest()
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = "m-new", 1, 1
		r.Topics, r.TimeoutMillis = append(r.Topics, t), 5000
		return r
	}, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode }},
	20: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrDeleteTopicsRequest()
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = str("m-gone")
		r.Topics, r.TopicNames, r.TimeoutMillis = append(r.Topics, t), []string{"m-gone"}, 5000
		return r
	}, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode }},
	21: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrDeleteRecordsRequest()
		t := kmsg.NewDeleteRecordsRequestTopic()
		t.Topic = "m"
		t.Partitions = append(t.Partitions, kmsg.NewDeleteRecordsRequestTopicPartition())
		r.Topics, r.TimeoutMillis = append(r.Topics, t), 5000
		return r
	}, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode }},
	22: {func([16]byte) kmsg.Request { return kmsg.NewPtrInitProducerIDRequest() },
		clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }},
	23: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		r.ReplicaID = -1
		t := kmsg.NewOffsetForLeaderEpochRequestTopic()
		t.Topic = "m"
		p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		p.CurrentLeaderEpoch = -1
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	}, topicDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
	}},
	29: {func([16]byte) kmsg.Request { return describeAllACLs() },
		clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeACLsResponse).ErrorCode }},
	30: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrCreateACLsRequest()
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "m", kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:x", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		r.Creations = append(r.Creations, c)
		return r
	}, clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.CreateACLsResponse).Results[0].ErrorCode }},
	31: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrDeleteACLsRequest()
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeAny
		f.ResourceName, f.Principal = str("m"), str("User:nobody")
		f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		r.Filters = append(r.Filters, f)
		return r
	}, clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteACLsResponse).Results[0].ErrorCode }},
	32: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "m"
		r.Resources = append(r.Resources, rr)
		return r
	}, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode }},
	33: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrAlterConfigsRequest()
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "m"
		r.Resources = append(r.Resources, rr)
		return r
	}, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode }},
	37: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrCreatePartitionsRequest()
		t := kmsg.NewCreatePartitionsRequestTopic()
		t.Topic, t.Count = "m", 2
		r.Topics, r.TimeoutMillis = append(r.Topics, t), 5000
		return r
	}, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode }},
	42: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Groups = []string{"mg"}
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode }},
	43: {func([16]byte) kmsg.Request { return kmsg.NewPtrElectLeadersRequest() },
		clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ElectLeadersResponse).ErrorCode }},
	44: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "m"
		r.Resources = append(r.Resources, rr)
		return r
	}, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode }},
	47: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = "mg"
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetDeleteResponse).ErrorCode }},
	48: {func([16]byte) kmsg.Request { return kmsg.NewPtrDescribeClientQuotasRequest() },
		clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeClientQuotasResponse).ErrorCode }},
	49: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrAlterClientQuotasRequest()
		e := kmsg.NewAlterClientQuotasRequestEntry()
		e.Entity = append(e.Entity, kmsg.AlterClientQuotasRequestEntryEntity{Type: "user", Name: str("mq")})
		e.Ops = append(e.Ops, kmsg.AlterClientQuotasRequestEntryOp{Key: "producer_byte_rate", Value: 1e6})
		r.Entries = append(r.Entries, e)
		return r
	}, clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode }},
	38: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrCreateDelegationTokenRequest()
		r.OwnerPrincipalType, r.OwnerPrincipalName = str("User"), str("carol")
		return r
	}, kerr.DelegationTokenAuthorizationFailed, func(r kmsg.Response) int16 { return r.(*kmsg.CreateDelegationTokenResponse).ErrorCode }},
	// Renewals and expiries need no ACL (only the token's owner or renewers
	// may): an unknown token is not found for anyone.
	39: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrRenewDelegationTokenRequest()
		r.HMAC = []byte("unknown")
		return r
	}, nil, func(r kmsg.Response) int16 {
		return tokenNotFoundIsNone(r.(*kmsg.RenewDelegationTokenResponse).ErrorCode)
	}},
	40: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrExpireDelegationTokenRequest()
		r.HMAC = []byte("unknown")
		return r
	}, nil, func(r kmsg.Response) int16 {
		return tokenNotFoundIsNone(r.(*kmsg.ExpireDelegationTokenResponse).ErrorCode)
	}},
	41: {func([16]byte) kmsg.Request { return kmsg.NewPtrDescribeDelegationTokenRequest() },
		nil, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeDelegationTokenResponse).ErrorCode }},
	50: {func([16]byte) kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() },
		clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode }},
	51: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = "nobody", 1
		r.Deletions = append(r.Deletions, d)
		return r
	}, clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode }},
	24: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrAddPartitionsToTxnRequest()
		r.SetVersion(3)
		r.TransactionalID, r.ProducerID, r.ProducerEpoch = "mt", 1, 0
		t := kmsg.NewAddPartitionsToTxnRequestTopic()
		t.Topic, t.Partitions = "m", []int32{0}
		r.Topics = append(r.Topics, t)
		return r
	}, kerr.TransactionalIDAuthorizationFailed, func(r kmsg.Response) int16 {
		return r.(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode
	}},
	25: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrAddOffsetsToTxnRequest()
		r.TransactionalID, r.ProducerID, r.Group = "mt", 1, "mg"
		return r
	}, kerr.TransactionalIDAuthorizationFailed, func(r kmsg.Response) int16 { return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode }},
	26: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrEndTxnRequest()
		r.TransactionalID, r.ProducerID = "mt", 1
		return r
	}, kerr.TransactionalIDAuthorizationFailed, func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode }},
	27: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.CoordinatorEpoch = 1, 0
		t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		t.Topic, t.Partitions = "m", []int32{0}
		m.Topics = append(m.Topics, t)
		r.Markers = append(r.Markers, m)
		return r
	}, topicDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
	}},
	28: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrTxnOffsetCommitRequest()
		r.TransactionalID, r.Group, r.ProducerID, r.Generation = "mt", "mg", 1, -1
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic = "m"
		t.Partitions = append(t.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
		r.Topics = append(r.Topics, t)
		return r
	}, groupDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}},
	// Sent to the node itself (see send), not routed by kgo after a metadata
	// lookup that answers TOPIC_AUTHORIZATION_FAILED first; a super user gets
	// LOG_DIR_NOT_FOUND.
	34: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrAlterReplicaLogDirsRequest()
		d := kmsg.NewAlterReplicaLogDirsRequestDir()
		d.Dir = "/nowhere"
		d.Topics = append(d.Topics, kmsg.AlterReplicaLogDirsRequestDirTopic{Topic: "m", Partitions: []int32{0}})
		r.Dirs = append(r.Dirs, d)
		return r
	}, clusterDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.AlterReplicaLogDirsResponse).Topics[0].Partitions[0].ErrorCode
	}},
	35: {func([16]byte) kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() },
		clusterDenied, func(r kmsg.Response) int16 {
			// kgo asks every broker and merges their dirs, not the top-level code: a
			// denied answer lists none, while a node always lists its data dir.
			if len(r.(*kmsg.DescribeLogDirsResponse).Dirs) == 0 {
				return clusterDenied.Code
			}
			return r.(*kmsg.DescribeLogDirsResponse).ErrorCode
		}},
	45: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		r.TimeoutMillis = 5000
		t := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		t.Topic = "m"
		p := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		p.Replicas = []int32{1}
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	}, clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode }},
	46: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrListPartitionReassignmentsRequest()
		r.TimeoutMillis = 5000
		return r
	},
		clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode }},
	55: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrDescribeQuorumRequest()
		t := kmsg.NewDescribeQuorumRequestTopic()
		t.Topic = "__cluster_metadata"
		t.Partitions = append(t.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
		r.Topics = append(r.Topics, t)
		return r
	}, clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeQuorumResponse).ErrorCode }},
	61: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrDescribeProducersRequest()
		t := kmsg.NewDescribeProducersRequestTopic()
		t.Topic, t.Partitions = "m", []int32{0}
		r.Topics = append(r.Topics, t)
		return r
	}, topicDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
	}},
	75: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrDescribeTopicPartitionsRequest()
		r.ResponsePartitionLimit = 10
		r.Topics = append(r.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: "m"})
		return r
	}, topicDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeTopicPartitionsResponse).Topics[0].ErrorCode }},
	57: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrUpdateFeaturesRequest()
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = "group.version", 1, 1 // its level: a no-op
		r.FeatureUpdates = append(r.FeatureUpdates, u)
		return r
	}, clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.UpdateFeaturesResponse).ErrorCode }},
	64: {func([16]byte) kmsg.Request { r := kmsg.NewPtrUnregisterBrokerRequest(); r.BrokerID = 99; return r },
		clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.UnregisterBrokerResponse).ErrorCode }},
	94: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrUnregisterControllerRequest()
		r.ControllerID = 99
		return r
	},
		clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.UnregisterControllerResponse).ErrorCode }},
	// The client finds the id's coordinator first: DESCRIBE on the
	// transactional id, refused as Kafka refuses it.
	65: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrDescribeTransactionsRequest()
		r.TransactionalIDs = []string{"mt"}
		return r
	}, kerr.TransactionalIDAuthorizationFailed, func(r kmsg.Response) int16 {
		return r.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
	}},
	// Lists only the ids the user may DESCRIBE, as Kafka: none, no error.
	66: {func([16]byte) kmsg.Request { return kmsg.NewPtrListTransactionsRequest() },
		nil, func(r kmsg.Response) int16 { return r.(*kmsg.ListTransactionsResponse).ErrorCode }},
	// Anyone may get a telemetry subscription and push (as Kafka); a push of a
	// fresh instance id with no subscription id passes authorization and stops
	// at UNKNOWN_SUBSCRIPTION_ID.
	71: {func([16]byte) kmsg.Request { return kmsg.NewPtrGetTelemetrySubscriptionsRequest() },
		nil, func(r kmsg.Response) int16 { return r.(*kmsg.GetTelemetrySubscriptionsResponse).ErrorCode }},
	72: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrPushTelemetryRequest()
		rand.Read(r.ClientInstanceID[:])
		return r
	}, nil, func(r kmsg.Response) int16 {
		if code := r.(*kmsg.PushTelemetryResponse).ErrorCode; code != kerr.UnknownSubscriptionID.Code {
			return code
		}
		return 0
	}},
	74: {func([16]byte) kmsg.Request { return kmsg.NewPtrListConfigResourcesRequest() },
		clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ListConfigResourcesResponse).ErrorCode }},
	68: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "mg", "m-member", 0, 5000
		r.SubscribedTopicNames = []string{"m"}
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode }},
	69: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrConsumerGroupDescribeRequest()
		r.Groups = []string{"mg"}
		return r
	},
		groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode }},
	76: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrShareGroupHeartbeatRequest()
		r.GroupID, r.MemberID, r.MemberEpoch = "msg", "m-member", 0
		r.SubscribedTopicNames = []string{"m"}
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode }},
	77: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrShareGroupDescribeRequest()
		r.GroupIDs = []string{"msg"}
		return r
	},
		groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ShareGroupDescribeResponse).Groups[0].ErrorCode }},
	88: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		r.Group, r.MemberID, r.RebalanceTimeoutMillis = "mstg", "m-member", 5000
		top := kmsg.NewStreamsGroupHeartbeatRequestTopology()
		sub := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
		sub.SubtopologyID, sub.SourceTopics = "0", []string{"m"}
		top.Subtopologies = append(top.Subtopologies, sub)
		r.Topology = &top
		r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.StreamsGroupHeartbeatResponse).ErrorCode }},
	89: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrStreamsGroupDescribeRequest()
		r.Groups = []string{"mstg"}
		return r
	},
		groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.StreamsGroupDescribeResponse).Groups[0].ErrorCode }},
	// Answered UNSUPPORTED_VERSION (no description plugin, as Kafka), after READ
	// on the group.
	93: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrStreamsGroupTopologyDescriptionUpdateRequest()
		r.Group = "mstg"
		return r
	}, groupDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.StreamsGroupTopologyDescriptionUpdateResponse).ErrorCode
	}},
	90: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		r.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "msg"}}
		return r
	},
		groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeShareGroupOffsetsResponse).Groups[0].ErrorCode }},
	91: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		r.GroupID = "msg-altered"
		r.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "m", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 0}}}}
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.AlterShareGroupOffsetsResponse).ErrorCode }},
	92: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		r.GroupID = "msg-altered"
		r.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "m"}}
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteShareGroupOffsetsResponse).ErrorCode }},
	78: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrShareFetchRequest()
		r.GroupID, r.MemberID, r.ShareSessionEpoch = str("msg"), str("m-member"), 0
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ShareFetchResponse).ErrorCode }},
	79: {func([16]byte) kmsg.Request {
		r := kmsg.NewPtrShareAcknowledgeRequest()
		r.GroupID, r.MemberID, r.ShareSessionEpoch = str("msg"), str("m-member"), 1
		return r
	}, groupDenied, func(r kmsg.Response) int16 { return r.(*kmsg.ShareAcknowledgeResponse).ErrorCode }},
	80: {func([16]byte) kmsg.Request { r := kmsg.NewPtrAddRaftVoterRequest(); r.VoterID = 99; return r },
		clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.AddRaftVoterResponse).ErrorCode }},
	81: {func([16]byte) kmsg.Request { r := kmsg.NewPtrRemoveRaftVoterRequest(); r.VoterID = 99; return r },
		clusterDenied, func(r kmsg.Response) int16 { return r.(*kmsg.RemoveRaftVoterResponse).ErrorCode }},
	// As in Kafka, anyone may describe the cluster (DESCRIBE on it only
	// decides the authorized operations the answer reports).
	60: {func([16]byte) kmsg.Request { return kmsg.NewPtrDescribeClusterRequest() },
		nil, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeClusterResponse).ErrorCode }},
	83: {func(id [16]byte) kmsg.Request {
		r := kmsg.NewPtrInitializeShareGroupStateRequest()
		r.GroupID = "g"
		t := kmsg.NewInitializeShareGroupStateRequestTopic()
		t.TopicID, t.Partitions = id, []kmsg.InitializeShareGroupStateRequestTopicPartition{kmsg.NewInitializeShareGroupStateRequestTopicPartition()}
		r.Topics = append(r.Topics, t)
		return r
	}, clusterDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.InitializeShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
	}},
	84: {func(id [16]byte) kmsg.Request {
		r := kmsg.NewPtrReadShareGroupStateRequest()
		r.GroupID = "g"
		t := kmsg.NewReadShareGroupStateRequestTopic()
		t.TopicID, t.Partitions = id, []kmsg.ReadShareGroupStateRequestTopicPartition{kmsg.NewReadShareGroupStateRequestTopicPartition()}
		r.Topics = append(r.Topics, t)
		return r
	}, clusterDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.ReadShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
	}},
	85: {func(id [16]byte) kmsg.Request {
		r := kmsg.NewPtrWriteShareGroupStateRequest()
		r.GroupID = "g"
		t := kmsg.NewWriteShareGroupStateRequestTopic()
		t.TopicID, t.Partitions = id, []kmsg.WriteShareGroupStateRequestTopicPartition{kmsg.NewWriteShareGroupStateRequestTopicPartition()}
		r.Topics = append(r.Topics, t)
		return r
	}, clusterDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.WriteShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
	}},
	86: {func(id [16]byte) kmsg.Request {
		r := kmsg.NewPtrDeleteShareGroupStateRequest()
		r.GroupID = "g"
		t := kmsg.NewDeleteShareGroupStateRequestTopic()
		t.TopicID, t.Partitions = id, []kmsg.DeleteShareGroupStateRequestTopicPartition{kmsg.NewDeleteShareGroupStateRequestTopicPartition()}
		r.Topics = append(r.Topics, t)
		return r
	}, clusterDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.DeleteShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
	}},
	87: {func(id [16]byte) kmsg.Request {
		r := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		r.GroupID = "g"
		t := kmsg.NewReadShareGroupStateSummaryRequestTopic()
		t.TopicID, t.Partitions = id, []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()}
		r.Topics = append(r.Topics, t)
		return r
	}, clusterDenied, func(r kmsg.Response) int16 {
		return r.(*kmsg.ReadShareGroupStateSummaryResponse).Topics[0].Partitions[0].ErrorCode
	}},
}

func tokenNotFoundIsNone(code int16) int16 {
	if code == kerr.DelegationTokenNotFound.Code {
		return 0
	}
	return code
}

// TestAuthorizationMatrix sends every API the Kafka listener serves as a super
// user (never an authorization error), as an authenticated user without ACLs
// (Kafka's authorization error, where Kafka puts it) and unauthenticated (the
// connection is closed before anything is served).
func TestAuthorizationMatrix(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.SASLMechanisms = "SCRAM-SHA-256"
	cfg.AddScram = []string{"SCRAM-SHA-256=[name=admin,password=a]", "SCRAM-SHA-256=[name=bob,password=b]"}
	cfg.Authorizer, cfg.SuperUsers = "acl", "User:admin"
	cfg.DelegationTokenSecretKey = "matrix"
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The client must send every key served: kgo's stable set lacks the
	// StreamsGroup ones.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(88, 1)
	versions.SetMaxKeyVersion(89, 1)
	versions.SetMaxKeyVersion(93, 0)
	login := func(user, password string) *kgo.Client {
		cl, _ := n.client(t, kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism()), kgo.RequestRetries(0), kgo.MaxVersions(versions))
		return cl
	}
	admin, bob := login("admin", "a"), login("bob", "b")
	anonymous, _ := n.client(t, kgo.RequestRetries(0), kgo.MaxVersions(versions))
	for _, name := range []string{"m", "m-gone"} {
		create := authzMatrix[19].req([16]byte{}).(*kmsg.CreateTopicsRequest)
		create.Topics[0].Topic = name
		if _, err := create.RequestWith(ctx, admin); err != nil {
			t.Fatal(err)
		}
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = append(md.Topics, kmsg.MetadataRequestTopic{Topic: str("m")})
	mdResp, err := md.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	topicID := mdResp.Topics[0].TopicID

	authErrors := []*kerr.Error{topicDenied, groupDenied, clusterDenied, kerr.TransactionalIDAuthorizationFailed, kerr.DelegationTokenAuthorizationFailed}
	// send routes req as kgo does; kgo cannot route the StreamsGroup keys, which
	// go to the one node directly, as does AlterReplicaLogDirs (see its case).
	send := func(cl *kgo.Client, req kmsg.Request) (kmsg.Response, error) {
		if k := req.Key(); k == 88 || k == 89 || k == 93 || k == 34 {
			return cl.Broker(int(n.cfg.NodeID)).Request(ctx, req)
		}
		return cl.Request(ctx, req)
	}
	codeOf := func(c matrixCase, cl *kgo.Client) (int16, error) {
		resp, err := send(cl, c.req(topicID))
		var ke *kerr.Error
		if errors.As(err, &ke) { // kgo reports some group errors as err
			return ke.Code, nil
		}
		if err != nil {
			return 0, err
		}
		return c.code(resp), nil
	}
	for _, v := range handlers.Versions() {
		c, ok := authzMatrix[v.Key]
		if !ok {
			t.Errorf("%s (%d) is served but has no entry in the authorization matrix", kmsg.NameForKey(v.Key), v.Key)
			continue
		}
		t.Run(kmsg.NameForKey(v.Key), func(t *testing.T) {
			want := int16(0)
			if c.denied != nil {
				want = c.denied.Code
			}
			if got, err := codeOf(c, bob); err != nil || got != want {
				t.Errorf("user without ACLs: code %d (%v), err %v; want %d", got, kerr.ErrorForCode(got), err, want)
			}
			got, err := codeOf(c, admin)
			if err != nil {
				t.Errorf("super user: %v", err)
			}
			for _, ae := range authErrors {
				if got == ae.Code {
					t.Errorf("super user got %v", ae)
				}
			}
			if _, err := send(anonymous, c.req(topicID)); err == nil {
				t.Errorf("served without authentication")
			}
		})
	}
}
