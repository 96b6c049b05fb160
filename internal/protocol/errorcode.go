package protocol

import "github.com/twmb/franz-go/pkg/kmsg"

// setErrorCode sets the top-level error code of resp, for every response kind
// of kmsg that has one (TestSetErrorCodeCoversKmsg keeps the list whole); it
// leaves the others as they are.
func setErrorCode(resp kmsg.Response, code int16) {
	switch r := resp.(type) {
	case *kmsg.FetchResponse:
		r.ErrorCode = code
	case *kmsg.MetadataResponse:
		r.ErrorCode = code
	case *kmsg.LeaderAndISRResponse:
		r.ErrorCode = code
	case *kmsg.StopReplicaResponse:
		r.ErrorCode = code
	case *kmsg.UpdateMetadataResponse:
		r.ErrorCode = code
	case *kmsg.ControlledShutdownResponse:
		r.ErrorCode = code
	case *kmsg.OffsetFetchResponse:
		r.ErrorCode = code
	case *kmsg.FindCoordinatorResponse:
		r.ErrorCode = code
	case *kmsg.JoinGroupResponse:
		r.ErrorCode = code
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.ListGroupsResponse:
		r.ErrorCode = code
	case *kmsg.SASLHandshakeResponse:
		r.ErrorCode = code
	case *kmsg.ApiVersionsResponse:
		r.ErrorCode = code
	case *kmsg.InitProducerIDResponse:
		r.ErrorCode = code
	case *kmsg.AddPartitionsToTxnResponse:
		r.ErrorCode = code
	case *kmsg.AddOffsetsToTxnResponse:
		r.ErrorCode = code
	case *kmsg.EndTxnResponse:
		r.ErrorCode = code
	case *kmsg.DescribeACLsResponse:
		r.ErrorCode = code
	case *kmsg.DescribeLogDirsResponse:
		r.ErrorCode = code
	case *kmsg.SASLAuthenticateResponse:
		r.ErrorCode = code
	case *kmsg.CreateDelegationTokenResponse:
		r.ErrorCode = code
	case *kmsg.RenewDelegationTokenResponse:
		r.ErrorCode = code
	case *kmsg.ExpireDelegationTokenResponse:
		r.ErrorCode = code
	case *kmsg.DescribeDelegationTokenResponse:
		r.ErrorCode = code
	case *kmsg.ElectLeadersResponse:
		r.ErrorCode = code
	case *kmsg.AlterPartitionAssignmentsResponse:
		r.ErrorCode = code
	case *kmsg.ListPartitionReassignmentsResponse:
		r.ErrorCode = code
	case *kmsg.OffsetDeleteResponse:
		r.ErrorCode = code
	case *kmsg.DescribeClientQuotasResponse:
		r.ErrorCode = code
	case *kmsg.DescribeUserSCRAMCredentialsResponse:
		r.ErrorCode = code
	case *kmsg.VoteResponse:
		r.ErrorCode = code
	case *kmsg.BeginQuorumEpochResponse:
		r.ErrorCode = code
	case *kmsg.EndQuorumEpochResponse:
		r.ErrorCode = code
	case *kmsg.DescribeQuorumResponse:
		r.ErrorCode = code
	case *kmsg.AlterPartitionResponse:
		r.ErrorCode = code
	case *kmsg.UpdateFeaturesResponse:
		r.ErrorCode = code
	case *kmsg.EnvelopeResponse:
		r.ErrorCode = code
	case *kmsg.FetchSnapshotResponse:
		r.ErrorCode = code
	case *kmsg.DescribeClusterResponse:
		r.ErrorCode = code
	case *kmsg.BrokerRegistrationResponse:
		r.ErrorCode = code
	case *kmsg.BrokerHeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.UnregisterBrokerResponse:
		r.ErrorCode = code
	case *kmsg.ListTransactionsResponse:
		r.ErrorCode = code
	case *kmsg.AllocateProducerIDsResponse:
		r.ErrorCode = code
	case *kmsg.ConsumerGroupHeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.ControllerRegistrationResponse:
		r.ErrorCode = code
	case *kmsg.GetTelemetrySubscriptionsResponse:
		r.ErrorCode = code
	case *kmsg.PushTelemetryResponse:
		r.ErrorCode = code
	case *kmsg.AssignReplicasToDirsResponse:
		r.ErrorCode = code
	case *kmsg.ListConfigResourcesResponse:
		r.ErrorCode = code
	case *kmsg.ShareGroupHeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.ShareFetchResponse:
		r.ErrorCode = code
	case *kmsg.ShareAcknowledgeResponse:
		r.ErrorCode = code
	case *kmsg.AddRaftVoterResponse:
		r.ErrorCode = code
	case *kmsg.RemoveRaftVoterResponse:
		r.ErrorCode = code
	case *kmsg.UpdateRaftVoterResponse:
		r.ErrorCode = code
	case *kmsg.StreamsGroupHeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.AlterShareGroupOffsetsResponse:
		r.ErrorCode = code
	case *kmsg.DeleteShareGroupOffsetsResponse:
		r.ErrorCode = code
	case *kmsg.StreamsGroupTopologyDescriptionUpdateResponse:
		r.ErrorCode = code
	case *kmsg.UnregisterControllerResponse:
		r.ErrorCode = code
	}
}
