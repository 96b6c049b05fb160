package handlers

import (
	"context"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
)

// Cluster is the metadata side of the broker as the handlers use it: the latest
// applied image and the controller operations that change it.
type Cluster interface {
	Image() *metadata.Image
	LeaderID() int32
	IsLeader() bool
	CreateTopics(ctx context.Context, reqs []controller.CreateTopic, validateOnly bool) ([]controller.CreateTopicResult, error)
	DeleteTopics(ctx context.Context, refs []controller.TopicRef) ([]controller.DeleteTopicResult, error)
	CreatePartitions(ctx context.Context, reqs []controller.CreatePartitions, validateOnly bool) ([]controller.CreatePartitionsResult, error)
	AlterConfigs(ctx context.Context, reqs []controller.AlterConfigsResource, validateOnly bool) ([]controller.ConfigResult, error)
	IncrementalAlterConfigs(ctx context.Context, reqs []controller.IncrementalAlterConfigsResource, validateOnly bool) ([]controller.ConfigResult, error)
	AllocateProducerIDs(ctx context.Context, brokerID int32, brokerEpoch int64) (controller.ProducerIDBlock, error)
	RegisterBroker(ctx context.Context, req controller.RegisterBroker) (int64, error)
	BrokerHeartbeat(ctx context.Context, req controller.HeartbeatRequest) (controller.HeartbeatResult, error)
	AlterPartitions(ctx context.Context, reqs []controller.AlterPartitionRequest) ([]controller.AlterPartitionResult, error)
	ElectLeaders(ctx context.Context, parts []controller.TopicPartitionRef, typ controller.ElectionType) ([]controller.ElectResult, error)
	AlterPartitionReassignments(ctx context.Context, reqs []controller.Reassignment) ([]error, error)
	UnregisterBroker(ctx context.Context, id int32) error
	UnregisterController(ctx context.Context, id int32) error
	Quorum(ctx context.Context) (controller.QuorumState, error)
	VoterAddrs(ctx context.Context) ([]controller.QuorumMember, error)
	AddVoter(ctx context.Context, id int32, dir metadata.UUID, addr string) error
	RemoveVoter(ctx context.Context, id int32, dir metadata.UUID) error
	UpdateVoter(ctx context.Context, id int32, dir metadata.UUID, addr string, kraftVersionOK bool) error
	RaftLeader() controller.RaftLeader
	RegisterController(ctx context.Context, id int32, dir metadata.UUID, features map[string]int32) error
	AlterScramCredentials(ctx context.Context, dels []controller.ScramDeletion, ups []controller.ScramUpsertion) ([]controller.ScramResult, error)
	CreateAcls(ctx context.Context, bindings []acl.Binding) ([]error, error)
	DeleteAcls(ctx context.Context, filters []acl.Filter) ([]controller.AclDeletion, error)
	AlterClientQuotas(ctx context.Context, entries []controller.QuotaAlteration, validateOnly bool) ([]error, error)
	CreateDelegationToken(ctx context.Context, req controller.CreateToken) (tok metadata.DelegationToken, hmac []byte, err error)
	RenewDelegationToken(ctx context.Context, principal string, hmac []byte, periodMs int64) (int64, error)
	ExpireDelegationToken(ctx context.Context, principal string, hmac []byte, periodMs int64) (int64, error)
}

// controllerID is the controller id told to clients (Metadata, DescribeCluster).
// Clients send admin requests to it and every broker forwards them, so like
// Kafka it must be a live broker: the active controller when it is one (a
// combined node), else this node, else the first live broker, else -1.
func (h *Handlers) controllerID(img *metadata.Image) int32 {
	live := func(id int32) bool {
		b := img.Broker(id)
		return b != nil && !b.Fenced
	}
	if id := h.cluster.LeaderID(); live(id) {
		return id
	}
	if live(h.cfg.NodeID) {
		return h.cfg.NodeID
	}
	for _, b := range img.Brokers() {
		if !b.Fenced {
			return b.ID
		}
	}
	return -1
}
