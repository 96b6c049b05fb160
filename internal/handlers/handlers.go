// Package handlers serves the Kafka API: one file per API key (named after it), each
// opening with the versions it supports and what differs between them. A handler is
// thin: it validates the request, calls the domain packages (replica for partition
// data, controller for metadata) and maps their errors to Kafka error codes.
//
// The version table below is the single registry: the protocol package derives
// ApiVersions from it and rejects anything outside it.
package handlers

import (
	"context"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/loglevels"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/quota"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/telemetry"
)

// api is one supported API key, listed in ApiVersions from min to max; versions
// below refuseBelow (0: none) are listed but refused (protocol.VersionRange).
type api struct {
	key, min, max int16
	refuseBelow   int16
	serve         func(h *Handlers, ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response
}

// apis is the registry of every supported API, in key order.
var apis = []api{
	{key: 0, min: 0, max: 13, refuseBelow: 3, serve: (*Handlers).produce}, // listed from v0 as Kafka 4.4
	{key: 1, min: 4, max: 18, serve: (*Handlers).fetch},
	{key: 2, min: 1, max: 11, serve: (*Handlers).listOffsets},
	{key: 3, min: 0, max: 13, serve: (*Handlers).metadata},
	{key: 10, min: 0, max: 6, serve: (*Handlers).findCoordinator},
	{key: 19, min: 2, max: 7, serve: (*Handlers).createTopics},
	{key: 20, min: 1, max: 6, serve: (*Handlers).deleteTopics},
	{key: 21, min: 0, max: 2, serve: (*Handlers).deleteRecords},
	{key: 22, min: 0, max: 5, serve: (*Handlers).initProducerID},
	{key: 23, min: 2, max: 4, serve: (*Handlers).offsetForLeaderEpoch},
	{key: 24, min: 0, max: 5, serve: (*Handlers).addPartitionsToTxn},
	{key: 25, min: 0, max: 4, serve: (*Handlers).addOffsetsToTxn},
	{key: 26, min: 0, max: 5, serve: (*Handlers).endTxn},
	{key: 27, min: 1, max: 2, serve: (*Handlers).writeTxnMarkers},
	{key: 28, min: 0, max: 6, serve: (*Handlers).txnOffsetCommit},
	{key: 29, min: 1, max: 3, serve: (*Handlers).describeAcls},
	{key: 30, min: 1, max: 3, serve: (*Handlers).createAcls},
	{key: 31, min: 1, max: 3, serve: (*Handlers).deleteAcls},
	{key: 32, min: 1, max: 4, serve: (*Handlers).describeConfigs},
	{key: 33, min: 0, max: 2, serve: (*Handlers).alterConfigs},
	{key: 34, min: 1, max: 2, serve: (*Handlers).alterReplicaLogDirs},
	{key: 35, min: 1, max: 5, serve: (*Handlers).describeLogDirs},
	{key: 37, min: 0, max: 3, serve: (*Handlers).createPartitions},
	{key: 38, min: 1, max: 3, serve: (*Handlers).createDelegationToken},
	{key: 39, min: 1, max: 2, serve: (*Handlers).renewDelegationToken},
	{key: 40, min: 1, max: 2, serve: (*Handlers).expireDelegationToken},
	{key: 41, min: 1, max: 3, serve: (*Handlers).describeDelegationToken},
	{key: 43, min: 0, max: 2, serve: (*Handlers).electLeaders},
	{key: 44, min: 0, max: 1, serve: (*Handlers).incrementalAlterConfigs},
	{key: 45, min: 0, max: 1, serve: (*Handlers).alterPartitionReassignments},
	{key: 46, min: 0, max: 0, serve: (*Handlers).listPartitionReassignments},
	{key: 48, min: 0, max: 1, serve: (*Handlers).describeClientQuotas},
	{key: 49, min: 0, max: 1, serve: (*Handlers).alterClientQuotas},
	{key: 50, min: 0, max: 0, serve: (*Handlers).describeUserScramCredentials},
	{key: 51, min: 0, max: 0, serve: (*Handlers).alterUserScramCredentials},
	{key: 55, min: 0, max: 2, serve: (*Handlers).describeQuorum},
	{key: 57, min: 0, max: 2, serve: (*Handlers).updateFeatures},
	{key: 60, min: 0, max: 2, serve: (*Handlers).describeCluster},
	{key: 61, min: 0, max: 0, serve: (*Handlers).describeProducers},
	{key: 64, min: 0, max: 0, serve: (*Handlers).unregisterBroker},
	{key: 65, min: 0, max: 0, serve: (*Handlers).describeTransactions},
	{key: 66, min: 0, max: 2, serve: (*Handlers).listTransactions},
	{key: 71, min: 0, max: 0, serve: (*Handlers).getTelemetrySubscriptions},
	{key: 72, min: 0, max: 0, serve: (*Handlers).pushTelemetry},
	{key: 74, min: 0, max: 1, serve: (*Handlers).listConfigResources},
	{key: 75, min: 0, max: 0, serve: (*Handlers).describeTopicPartitions},
	{key: 78, min: 1, max: 2, serve: (*Handlers).shareFetch},
	{key: 79, min: 1, max: 2, serve: (*Handlers).shareAcknowledge},
	{key: 80, min: 0, max: 1, serve: (*Handlers).addRaftVoter},
	{key: 81, min: 0, max: 0, serve: (*Handlers).removeRaftVoter},
	{key: 83, min: 0, max: 0, serve: (*Handlers).initializeShareGroupState},
	{key: 84, min: 0, max: 0, serve: (*Handlers).readShareGroupState},
	{key: 85, min: 0, max: 1, serve: (*Handlers).writeShareGroupState},
	{key: 86, min: 0, max: 0, serve: (*Handlers).deleteShareGroupState},
	{key: 87, min: 0, max: 1, serve: (*Handlers).readShareGroupStateSummary},
	{key: 94, min: 0, max: 0, serve: (*Handlers).unregisterController},
}

// Versions is the registry of the Kafka listener, for its protocol.Server.
func Versions() []protocol.VersionRange { return versionsOf(allApis()) }

// ReuseFrameKeys lists the keys whose handlers keep no slice of their request
// once its response is written, for protocol.Server.ReuseFrameKeys: Produce,
// whose record batches reach the log by copy (see 00_produce.go).
func ReuseFrameKeys() []int16 { return []int16{int16(kmsg.Produce)} }

// allApis is the Kafka listener's registry: the table above and the group APIs.
func allApis() []api { return append(slices.Clone(apis), groupApis()...) }

func versionsOf(table []api) []protocol.VersionRange {
	vs := make([]protocol.VersionRange, len(table))
	for i, a := range table {
		vs[i] = protocol.VersionRange{Key: a.key, Min: a.min, Max: a.max, RefuseBelow: a.refuseBelow}
	}
	return vs
}

// Config is what the handlers need to know about this node.
type Config struct {
	NodeID int32
	// Loggers are the node's log levels, which BROKER_LOGGER config resources
	// describe and change; nil refuses those resources.
	Loggers           *loglevels.Levels
	ClusterID         string
	AutoCreateTopics  bool
	DefaultPartitions int32
	// OffsetsTopicPartitions is the partition count __consumer_offsets is created with.
	OffsetsTopicPartitions int32
	// BrokerEpoch is this broker's registration epoch (for producer-id allocation).
	BrokerEpoch func() int64
	// Observer sees produced and fetched data and delayed operations; nil: none.
	Observer Observer
	// Transactions is the transaction coordinator; nil refuses transactional ids.
	Transactions Transactions
	// TransactionStatePartitions is the partition count __transaction_state is
	// created with.
	TransactionStatePartitions int32
	// ShareStatePartitions is the partition count __share_group_state is
	// created with (share.coordinator.state.topic.num.partitions).
	ShareStatePartitions int32
	// AddToRemoteTxn sends AddPartitionsToTxn (the v4+ broker form) to the
	// broker coordinating a transaction (KIP-890's implicit adds); nil: only
	// transactions coordinated here can be joined.
	AddToRemoteTxn func(ctx context.Context, broker int32, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error)
	// Shares serves ShareFetch and ShareAcknowledge (package share).
	Shares Shares
	// ShareCoordinator serves the share-group state APIs (83-87) for the
	// partitions of __share_group_state this node leads; nil: they answer
	// COORDINATOR_NOT_AVAILABLE.
	ShareCoordinator ShareCoordinator
	// Telemetry serves GetTelemetrySubscriptions and PushTelemetry (KIP-714
	// client metrics); nil: they answer UNSUPPORTED_VERSION.
	Telemetry *telemetry.Manager
	// Authorizer, when set, returns the authorizer for the latest ACLs and turns
	// authorization on (authorize.go); nil: every request is allowed and the ACL
	// APIs answer SECURITY_DISABLED.
	Authorizer func() *acl.Authorizer
	// Quotas, when set, measures produce and fetch bytes (quotas.go), request
	// time (request_quota.go) and controller mutations (mutation_quota.go)
	// against the client quotas of the metadata image and throttles clients
	// over them.
	Quotas *quota.Manager
	// RackAwareReplicaSelector turns on KIP-392's preferred read replica: a
	// consumer fetching from a leader with a client.rack is pointed at an
	// in-sync replica in its rack (replica.selector.class).
	RackAwareReplicaSelector bool
	// FetchSessionCacheSlots is how many incremental fetch sessions (KIP-227,
	// fetch_sessions.go) are cached (max.incremental.fetch.session.cache.slots);
	// 0: none.
	FetchSessionCacheSlots int32
	// TokenSecretKey keys delegation tokens' HMACs (delegation.token.secret.key,
	// the controller's too); empty: tokens are off (tokens.go).
	TokenSecretKey string
}

// Handlers serves the Kafka API for one node.
type Handlers struct {
	cfg      Config
	cluster  Cluster
	replicas *replica.Manager
	log      *slog.Logger
	byKey    map[int16]api
	pids     producerIDs
	ctrl     *controllerlink.Local // the one path to the active controller
	groups   Groups
	sessions *fetchSessions
}

// New returns the handlers of one node. link reaches the active controller when it
// is another node; nil means this node's controller is the only one. A
// controller-only node passes nil replicas and groups and serves only the
// controller link (LinkHandler). Controller returns the path to the active
// controller these handlers use.
func New(cfg Config, cluster Cluster, replicas *replica.Manager, groups Groups, link controllerlink.Transport, logger *slog.Logger) *Handlers {
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Shares == nil {
		cfg.Shares = noShares{}
	}
	// Calls that wait on the controller or the transaction coordinator are not
	// charged to request quotas (request_quota.go).
	cluster = waitingCluster{cluster}
	if cfg.Transactions != nil {
		cfg.Transactions = waitingTransactions{cfg.Transactions}
	}
	if link != nil {
		link = waitingLink{link}
	}
	h := &Handlers{cfg: cfg, cluster: cluster, replicas: replicas, groups: groups, log: logger, byKey: map[int16]api{},
		sessions: newFetchSessions(int(cfg.FetchSessionCacheSlots))}
	h.ctrl = &controllerlink.Local{Handler: h.LinkHandler()}
	if link != nil {
		h.ctrl.Leads, h.ctrl.Forward = cluster.IsLeader, link
	}
	for _, a := range allApis() {
		h.byKey[a.key] = a
	}
	return h
}

// Controller is this node's one path to the active controller: the requests
// these handlers forward, served here while this node's controller is the
// active one. The node's lifecycle and console use it too.
func (h *Handlers) Controller() controllerlink.Transport { return h.ctrl }

// Handle implements protocol.Handler.
func (h *Handlers) Handle(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	return h.handle(h.byKey, ctx, c, r)
}

// handle serves r with the handler byKey lists for its key, authorized,
// metered and filtered as every client request is.
func (h *Handlers) handle(byKey map[int16]api, ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	a, ok := byKey[r.Key]
	if !ok {
		// Unreachable: protocol.Server rejects keys outside Versions().
		h.log.Error("request for an unregistered API key", "key", r.Key)
		return protocol.Response{Msg: errorResponse(r.Msg)}
	}
	if resp, ok := refusedBeforeAuthorization(r); ok {
		return resp
	}
	if resp, ok := h.checkRequest(ctx, c, r); !ok {
		return resp
	}
	ctx, metered := h.meterRequest(ctx, c, r) // request_quota.go
	ids := h.resolveTopicIDs(ctx, c, r)       // topic_ids.go
	merge := h.filterRequest(ctx, c, r)
	limited := h.limitMutations(ctx, c, r) // mutation_quota.go
	resp := a.serve(h, ctx, c, r)
	if limited != nil {
		resp = limited(resp)
	}
	if merge != nil {
		resp = mergeInto(resp, merge)
	}
	if ids != nil { // after merge: the topics it puts back get their ids too
		resp = mergeInto(resp, ids)
	}
	if metered != nil {
		resp = throttleResponse(resp, h.chargeRequest(ctx))
	}
	return resp
}

// mergeInto applies merge to a response when it is ready: at once for Msg, after
// the wait for a deferred one.
func mergeInto(resp protocol.Response, merge func(kmsg.Response)) protocol.Response {
	switch {
	case resp.Msg != nil:
		merge(resp.Msg)
	case resp.Wait != nil:
		wait := resp.Wait
		resp.Wait = func(ctx context.Context) protocol.Response { return mergeInto(wait(ctx), merge) }
	}
	return resp
}

// errorResponse is an empty response of the request's kind.
func errorResponse(req kmsg.Request) kmsg.Response {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	return resp
}

func reply(resp kmsg.Response) protocol.Response { return protocol.Response{Msg: resp} }
