package handlers

// Request quotas (request_percentage, KIP-124): with a request_percentage quota
// configured for the client, every request it sends is charged the time it kept
// this connection's request handler busy, and a client over its share of one
// handler thread is throttled like a byte-rate client: throttle_time_ms in the
// answer, and the connection muted for that long.
//
// Strata's handlers wait inside the call where Kafka parks a request in a
// purgatory and frees its thread: a Fetch long-polls for MaxWait, admin requests
// wait for the controller to commit and for this node to apply the change,
// transactional requests for their coordinator's writes. Those waits are not
// work, so they are not charged. The time charged is the handler's wall time
// minus the waits, which all go through one helper (startWait) that adds them
// to the request's meter:
//
//   - the Fetch long-poll (01_fetch.go) and the CONCURRENT_TRANSACTIONS retry
//     backoff (00_produce.go);
//   - every call to the controller (waitingCluster), over the controller link
//     (waitingLink) and to the transaction coordinator (waitingTransactions);
//   - waiting for the local apply of a metadata change (awaitLocalApply,
//     awaitTopics) and the voter-change retry (80_add_raft_voter.go).
//
// What a handler hands off as Response.Wait (acks=all, joins, syncs, offset
// commits, share fetches) runs off the handler goroutine and is not charged.
// Inter-node requests (the controller link) and follower fetches are exempt, as
// Kafka exempts cluster actions and replication, and so are acks=0 produces,
// which Kafka does not charge (only a byte-rate throttle mutes them). The charge is taken when the
// answer is made: a Fetch, whose answer is encoded in the handler, charges itself
// (chargeRequest) before encoding; every other request is charged when its
// handler returns. ApiVersions, which the protocol package answers, is charged
// there (protocol.Server.RequestThrottle).

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/quota"
	"github.com/strata-stream/strata/internal/txn"
)

// requestMeter measures one request's time on the handler goroutine.
type requestMeter struct {
	start   time.Time
	waited  atomic.Int64 // nanoseconds spent in startWait sections
	charged atomic.Bool
	user    string
	client  string
}

type meterKey struct{}

// startWait marks the start of a wait (not work) of the request ctx belongs
// to; calling the returned function marks its end. Waits must not nest.
func startWait(ctx context.Context) (end func()) {
	m, _ := ctx.Value(meterKey{}).(*requestMeter)
	if m == nil {
		return func() {}
	}
	start := time.Now()
	return func() { m.waited.Add(int64(time.Since(start))) }
}

// meterRequest returns ctx with a meter for r when a request_percentage quota
// applies to the client, or nil when r is not charged.
func (h *Handlers) meterRequest(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) (context.Context, *requestMeter) {
	if h.cfg.Quotas == nil || c == nil || ctx.Value(onLinkKey{}) != nil {
		return ctx, nil
	}
	switch m := r.Msg.(type) {
	case *kmsg.FetchRequest:
		if fetchReplicaID(m) >= 0 {
			return ctx, nil
		}
	case *kmsg.ProduceRequest:
		if m.Acks == 0 { // Kafka does not enforce the request quota on acks=0
			return ctx, nil
		}
	}
	user, clientID := quota.UserOf(c.Principal()), c.ClientID()
	if _, _, ok := quota.Resolve(h.cluster.Image(), user, clientID, metadata.QuotaRequestPercentage); !ok {
		return ctx, nil
	}
	m := &requestMeter{start: time.Now(), user: user, client: clientID}
	return context.WithValue(ctx, meterKey{}, m), m
}

// chargeRequest charges the request ctx belongs to for its handler time so far,
// less its waits, once, and returns how long to throttle the client (0 without a
// meter, when already charged, or within the quota).
func (h *Handlers) chargeRequest(ctx context.Context) time.Duration {
	m, _ := ctx.Value(meterKey{}).(*requestMeter)
	if m == nil || m.charged.Swap(true) {
		return 0
	}
	busy := max(time.Since(m.start)-time.Duration(m.waited.Load()), 0)
	return h.cfg.Quotas.RecordRequestTime(h.cluster.Image(), m.user, m.client, busy)
}

// throttleResponse adds a request-quota throttle to resp: the connection is
// muted for the longer of it and resp's own throttle, and the answer's
// throttle_time_ms says the longer one.
func throttleResponse(resp protocol.Response, throttle time.Duration) protocol.Response {
	if throttle <= 0 {
		return resp
	}
	resp.Throttle = max(resp.Throttle, throttle)
	ms := int32(min(resp.Throttle.Milliseconds(), int64(^uint32(0)>>1)))
	switch {
	case resp.Msg != nil:
		if t, ok := resp.Msg.(kmsg.ThrottleResponse); ok {
			if cur, _ := t.Throttle(); cur < ms {
				resp.Msg.(kmsg.SetThrottleResponse).SetThrottle(ms)
			}
		}
	case resp.Wait != nil:
		wait := resp.Wait
		resp.Wait = func(ctx context.Context) protocol.Response {
			out := wait(ctx)
			out.Throttle = 0 // the connection was muted when the handler returned
			return throttleResponse(out, throttle)
		}
	}
	return resp
}

// waitingCluster is the Cluster with every call to the controller accounted as
// a wait (startWait).
type waitingCluster struct{ Cluster }

func (w waitingCluster) CreateTopics(ctx context.Context, reqs []controller.CreateTopic, validateOnly bool) ([]controller.CreateTopicResult, error) {
	defer startWait(ctx)()
	return w.Cluster.CreateTopics(ctx, reqs, validateOnly)
}

func (w waitingCluster) DeleteTopics(ctx context.Context, refs []controller.TopicRef) ([]controller.DeleteTopicResult, error) {
	defer startWait(ctx)()
	return w.Cluster.DeleteTopics(ctx, refs)
}

func (w waitingCluster) CreatePartitions(ctx context.Context, reqs []controller.CreatePartitions, validateOnly bool) ([]controller.CreatePartitionsResult, error) {
	defer startWait(ctx)()
	return w.Cluster.CreatePartitions(ctx, reqs, validateOnly)
}

func (w waitingCluster) AlterConfigs(ctx context.Context, reqs []controller.AlterConfigsResource, validateOnly bool) ([]controller.ConfigResult, error) {
	defer startWait(ctx)()
	return w.Cluster.AlterConfigs(ctx, reqs, validateOnly)
}

func (w waitingCluster) IncrementalAlterConfigs(ctx context.Context, reqs []controller.IncrementalAlterConfigsResource, validateOnly bool) ([]controller.ConfigResult, error) {
	defer startWait(ctx)()
	return w.Cluster.IncrementalAlterConfigs(ctx, reqs, validateOnly)
}

func (w waitingCluster) AllocateProducerIDs(ctx context.Context, brokerID int32, brokerEpoch int64) (controller.ProducerIDBlock, error) {
	defer startWait(ctx)()
	return w.Cluster.AllocateProducerIDs(ctx, brokerID, brokerEpoch)
}

func (w waitingCluster) RegisterBroker(ctx context.Context, req controller.RegisterBroker) (int64, error) {
	defer startWait(ctx)()
	return w.Cluster.RegisterBroker(ctx, req)
}

func (w waitingCluster) BrokerHeartbeat(ctx context.Context, req controller.HeartbeatRequest) (controller.HeartbeatResult, error) {
	defer startWait(ctx)()
	return w.Cluster.BrokerHeartbeat(ctx, req)
}

func (w waitingCluster) AlterPartitions(ctx context.Context, reqs []controller.AlterPartitionRequest) ([]controller.AlterPartitionResult, error) {
	defer startWait(ctx)()
	return w.Cluster.AlterPartitions(ctx, reqs)
}

func (w waitingCluster) ElectLeaders(ctx context.Context, parts []controller.TopicPartitionRef, typ controller.ElectionType) ([]controller.ElectResult, error) {
	defer startWait(ctx)()
	return w.Cluster.ElectLeaders(ctx, parts, typ)
}

func (w waitingCluster) AlterPartitionReassignments(ctx context.Context, reqs []controller.Reassignment) ([]error, error) {
	defer startWait(ctx)()
	return w.Cluster.AlterPartitionReassignments(ctx, reqs)
}

func (w waitingCluster) UnregisterBroker(ctx context.Context, id int32) error {
	defer startWait(ctx)()
	return w.Cluster.UnregisterBroker(ctx, id)
}

func (w waitingCluster) UnregisterController(ctx context.Context, id int32) error {
	defer startWait(ctx)()
	return w.Cluster.UnregisterController(ctx, id)
}

func (w waitingCluster) Quorum(ctx context.Context) (controller.QuorumState, error) {
	defer startWait(ctx)()
	return w.Cluster.Quorum(ctx)
}

func (w waitingCluster) AddVoter(ctx context.Context, id int32, dir metadata.UUID, addr string) error {
	defer startWait(ctx)()
	return w.Cluster.AddVoter(ctx, id, dir, addr)
}

func (w waitingCluster) RemoveVoter(ctx context.Context, id int32, dir metadata.UUID) error {
	defer startWait(ctx)()
	return w.Cluster.RemoveVoter(ctx, id, dir)
}

func (w waitingCluster) UpdateVoter(ctx context.Context, id int32, dir metadata.UUID, addr string, kraftVersionOK bool) error {
	defer startWait(ctx)()
	return w.Cluster.UpdateVoter(ctx, id, dir, addr, kraftVersionOK)
}

func (w waitingCluster) RegisterController(ctx context.Context, id int32, dir metadata.UUID, features map[string]int32) error {
	defer startWait(ctx)()
	return w.Cluster.RegisterController(ctx, id, dir, features)
}

func (w waitingCluster) AlterScramCredentials(ctx context.Context, dels []controller.ScramDeletion, ups []controller.ScramUpsertion) ([]controller.ScramResult, error) {
	defer startWait(ctx)()
	return w.Cluster.AlterScramCredentials(ctx, dels, ups)
}

func (w waitingCluster) CreateDelegationToken(ctx context.Context, req controller.CreateToken) (metadata.DelegationToken, []byte, error) {
	defer startWait(ctx)()
	return w.Cluster.CreateDelegationToken(ctx, req)
}

func (w waitingCluster) RenewDelegationToken(ctx context.Context, principal string, hmac []byte, periodMs int64) (int64, error) {
	defer startWait(ctx)()
	return w.Cluster.RenewDelegationToken(ctx, principal, hmac, periodMs)
}

func (w waitingCluster) ExpireDelegationToken(ctx context.Context, principal string, hmac []byte, periodMs int64) (int64, error) {
	defer startWait(ctx)()
	return w.Cluster.ExpireDelegationToken(ctx, principal, hmac, periodMs)
}

func (w waitingCluster) CreateAcls(ctx context.Context, bindings []acl.Binding) ([]error, error) {
	defer startWait(ctx)()
	return w.Cluster.CreateAcls(ctx, bindings)
}

func (w waitingCluster) DeleteAcls(ctx context.Context, filters []acl.Filter) ([]controller.AclDeletion, error) {
	defer startWait(ctx)()
	return w.Cluster.DeleteAcls(ctx, filters)
}

func (w waitingCluster) AlterClientQuotas(ctx context.Context, entries []controller.QuotaAlteration, validateOnly bool) ([]error, error) {
	defer startWait(ctx)()
	return w.Cluster.AlterClientQuotas(ctx, entries, validateOnly)
}

// waitingLink is the controller link with every request accounted as a wait.
type waitingLink struct{ controllerlink.Transport }

func (w waitingLink) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	defer startWait(ctx)()
	return w.Transport.Request(ctx, req)
}

// waitingTransactions is the transaction coordinator with the calls that write
// its log (and wait for the write) accounted as waits.
type waitingTransactions struct{ Transactions }

func (w waitingTransactions) InitProducerID(ctx context.Context, id string, timeoutMs int32, pid int64, epoch int16) (int64, int16, int16) {
	defer startWait(ctx)()
	return w.Transactions.InitProducerID(ctx, id, timeoutMs, pid, epoch)
}

func (w waitingTransactions) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, add []txn.TopicPartition) int16 {
	defer startWait(ctx)()
	return w.Transactions.AddPartitions(ctx, id, pid, epoch, add)
}

func (w waitingTransactions) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit, tv2 bool) (int64, int16, int16) {
	defer startWait(ctx)()
	return w.Transactions.EndTxn(ctx, id, pid, epoch, commit, tv2)
}
