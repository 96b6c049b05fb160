package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/handlers"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
)

// startControllerListener listens on the controller address and splits it into
// the Raft transport and the controller link. It returns the voters with this
// node's address resolved: --advertised-controller-addr, else the listener's
// (an ephemeral port becomes the real one). A broker-only node listens too: the
// active controller sends it the metadata log there once it has joined as a
// non-voting member.
func (n *Node) startControllerListener() ([]controller.Peer, error) {
	ln, err := n.listen("controller", n.cfg.ControllerAddr)
	if err != nil {
		return nil, err
	}
	n.raftAddr = n.cfg.AdvertisedControllerAddr
	if n.raftAddr == "" {
		n.raftAddr = ln.Addr().String()
	}
	self := controllerlink.VoterKey{NodeID: n.cfg.NodeID, DirectoryID: n.directoryID}
	refusals := &voterRefusals{log: n.log.With("component", "controller"), self: self, raftAddr: n.raftAddr}
	n.mux = controllerlink.NewMux(ln, self, refusals.refused)
	n.lc.onStop("controller mux", func(stopping) error { n.mux.Close(); return nil })
	voters, _ := n.cfg.Voters()
	peers := make([]controller.Peer, len(voters))
	for i, v := range voters {
		addr := v.Addr
		if v.ID == n.cfg.NodeID {
			addr = n.raftAddr
		}
		peers[i] = controller.Peer{ID: v.ID, Addr: addr}
	}
	n.raftTransport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  n.mux.Raft(advertisedAddr(n.raftAddr), n.controllerSource(), n.dialTLS()),
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  nil,
	})
	n.lc.onStop("raft transport", func(stopping) error { return n.raftTransport.Close() })
	return peers, nil
}

// advertisedAddr is a TCP address as the other nodes dial it: kept as written
// (a host name is not resolved here, where it may not resolve at all).
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

// controllerSource is the local address this node's controller-quorum
// connections are made from (--controller-source-host), or nil.
func (n *Node) controllerSource() net.Addr {
	if n.cfg.ControllerSourceHost == "" {
		return nil
	}
	return &net.TCPAddr{IP: net.ParseIP(n.cfg.ControllerSourceHost)}
}

// newLink returns the client that reaches the active controller's link, at the
// Raft address the quorum knows it by (the link shares the listener). A
// broker-only node that has not joined yet knows no leader: it tries the
// configured voters in turn, and those that do not lead answer NOT_CONTROLLER.
// So does a controller-only voter removed from the quorum (kafka-metadata-quorum
// remove-controller --unregister sends its UnregisterController to the voter it
// removed when that one led).
func (n *Node) newLink(voters []controller.Peer) *controllerlink.Client {
	var next atomic.Uint32
	return &controllerlink.Client{
		Leader: func() (int32, string, bool) {
			if id, addr, ok := n.ctrl.LeaderAddr(); ok || len(voters) == 0 || n.cfg.IsController() && n.ctrl.InQuorum() {
				return id, addr, ok
			}
			v := voters[int(next.Add(1))%len(voters)]
			return v.ID, v.Addr, true
		},
		Versions:  handlers.LinkMaxVersions(),
		DialTLS:   n.dialTLS(),
		LocalAddr: n.controllerSource(),
	}
}

// Registration of a broker-only node, which knows no active controller until
// it has joined: each attempt asks every voter in --controllers at once and
// takes the active controller's answer, so that a voter that does not answer
// (paused, cut off) holds nothing up; an attempt whose voters have not all
// answered ends after registerTryTimeout (Kafka bounds a request to a voter
// by controller.quorum.request.timeout.ms, 2 s by default). While the quorum
// has no leader (a node started before its voters, or an election) attempts
// repeat at most registerBackoffMax apart, so the node registers, and starts
// serving, within about that much of the quorum electing a leader. While it
// waits it says so after a second, then every registerWaitNote.
const (
	registerTryTimeout = 2 * time.Second
	registerBackoffMax = 500 * time.Millisecond
	registerWaitNote   = 10 * time.Second
)

// voterLink sends a request to the controller link of the voter at addr,
// whether or not it leads (controllerlink.Client.RequestTo).
type voterLink interface {
	RequestTo(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error)
}

// advertisedKafka is the host and port this broker advertises: the
// configured address, with the port it listens on when that one is
// ephemeral (0).
func (n *Node) advertisedKafka() (host string, port int) {
	host, portStr, _ := net.SplitHostPort(n.cfg.AdvertisedKafkaAddr)
	port, _ = strconv.Atoi(portStr)
	if port == 0 {
		_, portStr, _ = net.SplitHostPort(n.kafkaLn.Addr().String())
		port, _ = strconv.Atoi(portStr)
	}
	return host, port
}

// register announces this broker and its advertised address to the active
// controller, retrying until it succeeds or ctx ends.
func (n *Node) register(ctx context.Context) error {
	host, port := n.advertisedKafka()
	incarnation, err := metadata.NewUUID(rand.Reader)
	if err != nil {
		return err
	}
	reg := controller.RegisterBroker{ID: n.cfg.NodeID, Incarnation: incarnation, DirectoryID: n.directoryID,
		Host: host, Port: int32(port), Rack: n.cfg.Rack, Features: metadata.SupportedFeatures}
	if !n.cfg.IsController() {
		reg.ObserverAddr = n.raftAddr
	}
	n.registration = reg
	var duplicateSince, waitingSince, noted time.Time
	n.setStep("registering broker %d with the active controller", reg.ID)
	return n.retryUpTo(ctx, "registering broker", registerBackoffMax, func() error {
		epoch, err := n.registerAnyVoter(ctx, reg)
		if err != nil {
			n.setStep("registering broker %d with the active controller (last attempt: %v)", reg.ID, err)
		}
		switch {
		case err == nil:
			attrs := []any{"broker_epoch", epoch, "advertised", net.JoinHostPort(host, strconv.Itoa(port))}
			if !waitingSince.IsZero() {
				attrs = append(attrs, "waited", time.Since(waitingSince).Round(time.Millisecond))
			}
			n.brokerEpoch.Store(epoch)
			n.log.Info("broker registered", attrs...)
		case errors.Is(err, kerr.InconsistentClusterID):
			return permanent(fmt.Errorf("the controllers belong to another cluster than --cluster-id %q (the data dir's cluster.id): %w", n.clusterID, err))
		case isDuplicateRegistration(err):
			// A predecessor that crashed holds the id until its session
			// expires; a live process holds it for good.
			if duplicateSince.IsZero() {
				duplicateSince = time.Now()
			} else if time.Since(duplicateSince) > 2*n.cfg.BrokerSessionTimeout {
				return permanent(fmt.Errorf("node id %d is held by another live broker or controller voter: %w", n.cfg.NodeID, err))
			}
		case noActiveControllerHere(err) && ctx.Err() == nil:
			if waitingSince.IsZero() {
				waitingSince = time.Now()
			}
			// Said after the first second (a cluster starting up elects
			// within that), then every registerWaitNote.
			if waited := time.Since(waitingSince); waited >= time.Second && (noted.IsZero() || time.Since(noted) >= registerWaitNote) {
				noted = time.Now()
				n.log.Info("waiting for the controller quorum to have an active controller before registering: retrying",
					"controllers", n.cfg.Controllers, "waited", waited.Round(time.Millisecond),
					"retry_every", registerBackoffMax, "last_error", err)
			}
		}
		return err
	})
}

// registerAnyVoter sends one registration. A combined node sends it through
// its path to the active controller. A broker-only node sends it to every
// voter at once (see registerTryTimeout) and returns the first answer that
// is not a voter saying it does not lead; when there is none, every voter's
// error.
func (n *Node) registerAnyVoter(ctx context.Context, reg controller.RegisterBroker) (int64, error) {
	if n.cfg.IsController() {
		return n.registerOnce(ctx, n.toController.Request, reg)
	}
	voters, err := n.cfg.Voters()
	if err != nil {
		return 0, permanent(err)
	}
	// A node promoted to a voter since its --controllers were written knows
	// the active controller from its own Raft state, which may be none of
	// those voters (it may be itself).
	if n.ctrl != nil {
		if id, addr, ok := n.ctrl.LeaderAddr(); ok && !slices.ContainsFunc(voters, func(v config.Voter) bool { return v.Addr == addr }) {
			voters = append(voters, config.Voter{ID: id, Addr: addr})
		}
	}
	ctx, cancel := context.WithTimeout(ctx, registerTryTimeout)
	defer cancel() // ends the requests to the voters that have not answered
	type answer struct {
		epoch int64
		err   error
	}
	answers := make(chan answer, len(voters))
	for _, v := range voters {
		go func() {
			epoch, err := n.registerOnce(ctx, func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
				return n.voterLink.RequestTo(ctx, v.Addr, req)
			}, reg)
			if err != nil {
				err = fmt.Errorf("voter %d at %s: %w", v.ID, v.Addr, err)
			}
			answers <- answer{epoch, err}
		}()
	}
	var errs []error
	for range voters {
		a := <-answers
		if a.err == nil || !noActiveControllerHere(a.err) {
			return a.epoch, a.err
		}
		errs = append(errs, a.err)
	}
	return 0, errors.Join(errs...)
}

// noActiveControllerHere reports whether a registration failed because the
// node asked is not the active controller or did not answer.
func noActiveControllerHere(err error) bool {
	return errors.Is(err, kerr.NotController) || !errors.As(err, new(*kerr.Error))
}

func isDuplicateRegistration(err error) bool {
	return errors.Is(err, kerr.DuplicateBrokerRegistration) || errors.Is(err, metadata.ErrDuplicateBrokerRegistration)
}

// permanentError ends retry at once.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return permanentError{err} }

// registerOnce sends one registration through send.
func (n *Node) registerOnce(ctx context.Context, send func(context.Context, kmsg.Request) (kmsg.Response, error), reg controller.RegisterBroker) (int64, error) {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.Version = 4
	req.BrokerID, req.IncarnationID, req.ClusterID = reg.ID, reg.Incarnation, n.clusterID
	if !reg.DirectoryID.IsZero() {
		req.LogDirs = [][16]byte{reg.DirectoryID}
	}
	if reg.Rack != "" {
		req.Rack = &reg.Rack
	}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port, l.SecurityProtocol = "PLAINTEXT", reg.Host, uint16(reg.Port), 0
	req.Listeners = append(req.Listeners, l)
	for _, name := range slices.Sorted(maps.Keys(reg.Features)) {
		f := kmsg.NewBrokerRegistrationRequestFeature()
		f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = name, 0, int16(reg.Features[name])
		req.Features = append(req.Features, f)
	}
	if reg.ObserverAddr != "" {
		host, portStr, err := net.SplitHostPort(reg.ObserverAddr)
		if err != nil {
			return 0, err
		}
		port, _ := strconv.Atoi(portStr)
		ol := kmsg.NewBrokerRegistrationRequestListener()
		ol.Name, ol.Host, ol.Port = controllerlink.ObserverListener, host, uint16(port)
		req.Listeners = append(req.Listeners, ol)
	}
	resp, err := send(ctx, req)
	if err != nil {
		return 0, err
	}
	r := resp.(*kmsg.BrokerRegistrationResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return 0, err
	}
	return r.BrokerEpoch, nil
}

// featuresResendInterval spaces the registrations a broker sends again while
// its features or data directory id are not recorded (runHeartbeats).
const featuresResendInterval = 5 * time.Second

// runHeartbeats keeps this broker alive (unfenced) with the active controller and
// re-registers when the controller no longer knows this registration. While
// the registration's features or directory id are not in the metadata (a
// controller that predates them registered it), it sends the registration again, at most
// every featuresResendInterval, so that a controller that knows them records
// them; beside the heartbeats, never holding one up.
func (n *Node) runHeartbeats(ctx context.Context) {
	t := time.NewTicker(n.cfg.BrokerHeartbeatInterval)
	defer t.Stop()
	var (
		resent    time.Time
		resending atomic.Bool
		resends   sync.WaitGroup
		health    heartbeatHealth
	)
	defer resends.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := n.heartbeat(ctx, false)
		if ctx.Err() == nil {
			n.noteHeartbeat(&health, res, err, time.Now())
		}
		switch {
		case err == nil && !res.Fenced && !n.featuresRecorded() && time.Since(resent) >= featuresResendInterval && resending.CompareAndSwap(false, true):
			resent = time.Now()
			reg := n.registration
			resends.Go(func() {
				defer resending.Store(false)
				ctx, cancel := context.WithTimeout(ctx, featuresResendInterval)
				defer cancel()
				if _, err := n.registerAnyVoter(ctx, reg); err != nil && ctx.Err() == nil {
					n.log.Debug("sending the registration again to record its features and directory id", "err", err)
				}
			})
		case err == nil && !res.Fenced:
		case errors.Is(err, kerr.StaleBrokerEpoch) || errors.Is(err, metadata.ErrStaleBrokerEpoch) || errors.Is(err, metadata.ErrUnknownBroker) || errors.Is(err, kerr.BrokerNotAvailable):
			n.log.Warn("controller does not know this registration: registering again", "err", err)
			if err := n.register(ctx); err != nil && ctx.Err() == nil {
				n.log.Error("re-registering", "err", err)
			}
		case err != nil && ctx.Err() == nil:
			n.log.Debug("broker heartbeat", "err", err)
		}
	}
}

// heartbeatHealth is how long this broker's heartbeats have been failing or
// answered fenced (since), and when that was last logged (warned).
type heartbeatHealth struct {
	since, warned time.Time
}

// heartbeatWarnInterval spaces the warnings of a broker whose heartbeats keep
// failing or keep being answered fenced.
const heartbeatWarnInterval = 30 * time.Second

// noteHeartbeat logs a warning once this broker's heartbeats have failed, or
// been answered fenced, for longer than a session timeout, again every
// heartbeatWarnInterval while that lasts, and says when it ends: a broker the
// controller never unfences otherwise shows nothing at the default level
// (one heartbeat's error is only worth a debug line). A fenced broker is
// unfenced by a heartbeat that reports having applied the metadata of its
// fencing, so the warning carries the offset the broker has applied and when
// it last heard from the metadata log's leader (a broker-only node outside the
// quorum hears nothing and so is never unfenced).
func (n *Node) noteHeartbeat(h *heartbeatHealth, res controller.HeartbeatResult, err error, now time.Time) {
	if err == nil && !res.Fenced {
		if !h.warned.IsZero() {
			n.log.Info("broker heartbeats answered unfenced again", "after", now.Sub(h.since).Round(time.Millisecond))
		}
		*h = heartbeatHealth{}
		return
	}
	if h.since.IsZero() {
		h.since = now
	}
	if now.Sub(h.since) <= n.cfg.BrokerSessionTimeout || !h.warned.IsZero() && now.Sub(h.warned) < heartbeatWarnInterval {
		return
	}
	h.warned = now
	attrs := []any{"for", now.Sub(h.since).Round(time.Millisecond), "broker_epoch", n.brokerEpoch.Load(),
		"metadata_offset", n.ctrl.Image().Offset(), "metadata_last_heard", n.ctrl.MetadataLastHeard(now)}
	if err != nil {
		n.log.Warn("broker heartbeats failing", append(attrs, "err", err)...)
		return
	}
	n.log.Warn("broker still fenced: the controller has not unfenced it", attrs...)
}

// featuresRecorded tells whether the metadata holds this broker's current
// registration with its features and data directory id.
func (n *Node) featuresRecorded() bool {
	b := n.ctrl.Image().Broker(n.cfg.NodeID)
	return b != nil && b.Epoch == n.brokerEpoch.Load() && maps.Equal(b.Features, n.registration.Features) &&
		b.DirectoryID == n.registration.DirectoryID
}

// heartbeat sends one heartbeat to the active controller. It gives up after half
// the session timeout: a request stuck on a controller that has just lost its
// quorum (or its network) must not hold the next heartbeat, which goes to the
// new controller, past the session the new controller grants on taking over.
// Otherwise every broker is fenced at once after a controller failover.
func (n *Node) heartbeat(ctx context.Context, wantShutdown bool) (controller.HeartbeatResult, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.BrokerSessionTimeout/2)
	defer cancel()
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.Version = 2
	req.BrokerID, req.BrokerEpoch, req.WantShutdown = n.cfg.NodeID, n.brokerEpoch.Load(), wantShutdown
	applied, _ := n.ctrl.AppliedOffset() // on an error, where the log could be read to
	req.CurrentMetadataOffset = int64(applied)
	resp, err := n.toController.Request(ctx, req)
	if err != nil {
		return controller.HeartbeatResult{}, err
	}
	r := resp.(*kmsg.BrokerHeartbeatResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return controller.HeartbeatResult{}, err
	}
	return controller.HeartbeatResult{Fenced: r.IsFenced, ShouldShutdown: r.ShouldShutdown}, nil
}

// controlledShutdown asks the controller to move leadership off this broker before
// it stops, so clients fail over without waiting for a session timeout.
func (n *Node) controlledShutdown(ctx context.Context) {
	err := n.retry(ctx, "controlled shutdown", func() error {
		res, err := n.heartbeat(ctx, true)
		if err == nil && !res.ShouldShutdown {
			return errors.New("leadership still moving")
		}
		return err
	})
	if err != nil {
		n.log.Warn("controlled shutdown incomplete", "err", err)
	}
}

// retry runs f with backoff until it succeeds or ctx ends.
func (n *Node) retry(ctx context.Context, what string, f func() error) error {
	return n.retryUpTo(ctx, what, time.Second, f)
}

// retryUpTo is retry with pauses of at most maxBackoff.
func (n *Node) retryUpTo(ctx context.Context, what string, maxBackoff time.Duration, f func() error) error {
	backoff := 50 * time.Millisecond
	for {
		err := f()
		var perm permanentError
		if err == nil {
			return nil
		} else if errors.As(err, &perm) {
			return perm.err
		}
		n.log.Debug(what, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// replicaTransport sends followers' fetches to leader brokers with franz-go.
type replicaTransport struct{ cl *kgo.Client }

func (t replicaTransport) Fetch(ctx context.Context, leader int32, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	resp, err := t.cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		// Most likely a broker the client has not learned of yet (kgo keeps its
		// "unknown broker" error unexported): refresh, the fetcher retries.
		t.cl.ForceMetadataRefresh()
		return nil, err
	}
	return resp.(*kmsg.FetchResponse), nil
}

func (t replicaTransport) ListOffsets(ctx context.Context, leader int32, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error) {
	resp, err := t.cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		t.cl.ForceMetadataRefresh() // as Fetch
		return nil, err
	}
	return resp.(*kmsg.ListOffsetsResponse), nil
}

// txnBrokers is how the transaction coordinator reaches partition leaders (the
// metadata image for leaders, the replica client for WriteTxnMarkers to other
// brokers, the handlers in process for the partitions this broker leads) and
// partition leaders reach coordinators (AddPartitionsToTxn).
type txnBrokers struct{ n *Node }

func (b txnBrokers) Leader(topic string, partition int32) (int32, bool) {
	p := b.n.ctrl.Image().Partition(topic, partition)
	if p == nil {
		return -1, false
	}
	return p.Leader, true
}

func (b txnBrokers) WriteTxnMarkers(ctx context.Context, broker int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	if h := b.n.kafkaHandlers; broker == b.n.cfg.NodeID && h != nil {
		return h.WriteTxnMarkersHere(ctx, req), nil
	}
	resp, err := b.n.replicaClient.Broker(int(broker)).Request(ctx, req)
	if err != nil {
		b.n.replicaClient.ForceMetadataRefresh()
		return nil, err
	}
	return resp.(*kmsg.WriteTxnMarkersResponse), nil
}

// AddPartitionsToTxn sends a leader's implicit add (KIP-890) to the transaction's
// coordinator, broker.
func (b txnBrokers) AddPartitionsToTxn(ctx context.Context, broker int32, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	resp, err := b.n.replicaClient.Broker(int(broker)).Request(ctx, req)
	if err != nil {
		b.n.replicaClient.ForceMetadataRefresh()
		return nil, err
	}
	return resp.(*kmsg.AddPartitionsToTxnResponse), nil
}

// isrChanger sends a leader's ISR changes to the active controller.
type isrChanger struct{ n *Node }

// AlterPartitions sends changes in one AlterPartition request (v3), grouped
// by topic.
func (c isrChanger) AlterPartitions(ctx context.Context, changes []replica.ISRChange) ([]replica.ISRResult, error) {
	n := c.n
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 3
	req.BrokerID, req.BrokerEpoch = n.cfg.NodeID, n.brokerEpoch.Load()
	topics := map[metadata.UUID]int{}
	for _, ch := range changes {
		ti, ok := topics[ch.TopicID]
		if !ok {
			ti = len(req.Topics)
			topics[ch.TopicID] = ti
			t := kmsg.NewAlterPartitionRequestTopic()
			t.TopicID = ch.TopicID
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewAlterPartitionRequestTopicPartition()
		p.Partition, p.LeaderEpoch, p.PartitionEpoch = ch.Partition, ch.LeaderEpoch, ch.PartitionEpoch
		for i, id := range ch.ISR {
			m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
			m.BrokerID, m.BrokerEpoch = id, -1
			if i < len(ch.BrokerEpochs) {
				m.BrokerEpoch = ch.BrokerEpochs[i]
			}
			p.NewEpochISR = append(p.NewEpochISR, m)
		}
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, p)
	}
	resp, err := n.toController.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.AlterPartitionResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return nil, err
	}
	type key struct {
		topic     metadata.UUID
		partition int32
	}
	answers := map[key]*kmsg.AlterPartitionResponseTopicPartition{}
	for ti := range r.Topics {
		for pi := range r.Topics[ti].Partitions {
			rp := &r.Topics[ti].Partitions[pi]
			answers[key{r.Topics[ti].TopidID, rp.Partition}] = rp // kmsg spells it TopidID
		}
	}
	results := make([]replica.ISRResult, len(changes))
	for i, ch := range changes {
		rp := answers[key{ch.TopicID, ch.Partition}]
		switch {
		case rp == nil:
			results[i].Err = errors.New("malformed AlterPartition response: a partition is missing")
		case rp.ErrorCode != 0:
			results[i].Err = kerr.ErrorForCode(rp.ErrorCode)
		default:
			results[i].Partition = &metadata.Partition{TopicID: ch.TopicID, Index: ch.Partition, ISR: rp.ISR, Leader: rp.LeaderID, LeaderEpoch: rp.LeaderEpoch, PartitionEpoch: rp.PartitionEpoch}
		}
	}
	return results, nil
}
