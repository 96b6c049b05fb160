// Package server is the composition root of a Strata node: it builds every component
// from a config.Config, starts them in dependency order and stops them in reverse.
//
// Start-up, in order:
//  1. the controller (Raft metadata quorum; a single voter by default) and its
//     link, served from then on whatever the node's roles (any node may be elected
//     the active controller while it starts: see serveLink), and wait until it has
//     a leader and has applied its log. A broker-only node (--roles broker) runs it
//     as a non-voting member: it registers first, through the voters in
//     --controllers, and the active controller adds it to the quorum;
//  2. the replica manager, brought in line with the metadata image, then kept in line
//     by following every new image;
//  3. broker registration (this node's advertised Kafka address) through the controller;
//  4. the Kafka listener and the HTTP listener.
//
// A controller-only node (--roles controller) stops after step 1 and serves only the
// controller link and HTTP health and metrics.
//
// Shutdown (context cancelled, e.g. SIGTERM) runs the same steps backwards; partition
// logs are closed cleanly so the next start skips recovery. The order is kept by the
// node's lifecycle (lifecycle.go): each component registers its stop the moment it
// has started, and Close, or a start that fails part-way, runs the hand-offs (the HTTP
// API's consumers leave their groups, the controlled shutdown) and then the stops,
// each newest first.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/console"
	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/handlers"
	"github.com/strata-stream/strata/internal/httpapi"
	"github.com/strata-stream/strata/internal/httpauth"
	"github.com/strata-stream/strata/internal/loglevels"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/metrics"
	"github.com/strata-stream/strata/internal/offsets"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/quota"
	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/share"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/telemetry"
	"github.com/strata-stream/strata/internal/txn"
	"github.com/strata-stream/strata/internal/vfs"
)

// Node is a running Strata node.
type Node struct {
	cfg         config.Config
	log         *slog.Logger
	lc          lifecycle // how the node stops (lifecycle.go)
	ctrl        *controller.Controller
	replicas    *replica.Manager
	remoteCache *storage.BlockCache // nil without --remote-storage
	kafka       *protocol.Server
	kafkaLn     net.Listener
	http        *http.Server
	httpLn      net.Listener
	// routes is what the HTTP listener serves: health while the node starts
	// and stops, everything while it serves (observability.go).
	routes      switchedRoutes
	brokerEpoch atomic.Int64
	ready       atomic.Bool
	// step is what a start under way is doing, for /readyz; nil once done.
	step atomic.Pointer[string]

	// Observability (observability.go): /metrics, the console, the admin listener.
	metrics *metrics.Metrics
	console *console.Console
	admin   *http.Server
	adminLn net.Listener

	// telemetry keeps the metrics clients push (KIP-714) for the handlers and
	// /metrics.
	telemetry *telemetry.Manager

	// Cluster plumbing (cluster.go).
	mux           *controllerlink.Mux
	raftTransport *raft.NetworkTransport
	raftAddr      string // this node's Raft (and controller link) address
	clusterID     string
	directoryID   metadata.UUID // the data dir's (directory.id), sent when registering
	link          *controllerlink.Client
	voterLink     voterLink // each voter's link: a broker-only node's registration
	// toController is the one path to the active controller (registration,
	// heartbeats, ISR changes, --add-scram, the console): the link on a
	// broker-only node, the handlers' in-process path on a controller.
	toController controllerlink.Transport
	// linkSrv serves the controller link from the controller's start;
	// linkHandler is what it serves with (serveLink).
	linkSrv     *protocol.Server
	linkHandler atomic.Pointer[protocol.Handler]
	// controllerClients serves Kafka clients on the controller listener
	// (serveControllerClients).
	controllerClients *protocol.Server
	replicaClient     *kgo.Client
	certs             *certs.Reloader        // TLS material; nil when TLS is off (security.go)
	principals        *certs.PrincipalMapper // --ssl-principal-mapping-rules; nil: User:<CN>
	registration      controller.RegisterBroker

	// Consumer groups.
	offsetStore *offsets.Store
	groups      *group.Coordinator

	// Transactions: the coordinator on __transaction_state.
	txnStore *offsets.Store
	txns     *txn.Coordinator
	// kafkaHandlers serve the Kafka API; the transaction coordinator writes
	// the markers of partitions led here through them, in process.
	kafkaHandlers *handlers.Handlers
	// Share groups' record delivery (share.go).
	shares     *share.Manager
	shareStore *share.TopicStore
	// shareLog loads the partitions of __share_group_state this node leads
	// into shareCoord, the share coordinator (package share).
	shareLog   *offsets.Store
	shareCoord *share.Coordinator
	shareDLQ   *share.TopicDeadLetters

	// api is the HTTP/JSON API (internal/httpapi), mounted in httpRoutes.
	api *httpapi.API
	// guard authenticates and authorizes HTTP requests (security.go); nil
	// without SASL and authorizer. sasl authenticates the Kafka clients of
	// both listeners; nil without SASL.
	guard *httpauth.Guard
	sasl  *protocol.SASLConfig
}

// Run starts a node and blocks until ctx is cancelled, then shuts down cleanly.
func Run(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	n, err := Start(ctx, cfg, logger, vfs.Default)
	if err != nil {
		return err
	}
	<-ctx.Done()
	return n.Close()
}

// Start starts a node and returns once it serves clients. Each component
// registers its stop with the node's lifecycle as it starts (lifecycle.go): a
// failure stops what had started, newest first, and Close stops everything so.
func Start(ctx context.Context, cfg config.Config, logger *slog.Logger, fsys vfs.FS) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: logger, lc: lifecycle{log: logger.With("component", "lifecycle")}}
	defer func() {
		if err != nil {
			n.Close() // whatever started before the failure
		}
	}()
	if err := vfs.MkdirAllDurable(fsys, cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	clusterID, err := loadClusterID(fsys, cfg.DataDir, cfg.ClusterID)
	if err != nil {
		return nil, err
	}

	n.clusterID = clusterID
	if n.directoryID, err = loadDirectoryID(fsys, cfg.DataDir); err != nil {
		return nil, err
	}
	if err := ensureMetaProperties(fsys, cfg.DataDir, metaProperties{clusterID: clusterID, nodeID: cfg.NodeID, directoryID: n.directoryID}); err != nil {
		return nil, err
	}

	if err := n.loadTLS(); err != nil {
		return nil, err
	}
	if err := n.listenHTTP(); err != nil {
		return nil, err
	}
	n.setStep("the controller")
	if err := n.startController(ctx, fsys); err != nil {
		return nil, err
	}
	if !cfg.IsBroker() {
		if err := n.startControllerOnly(clusterID); err != nil {
			return nil, err
		}
		return n, nil
	}
	if err := n.startBroker(ctx, fsys); err != nil {
		return nil, err
	}
	n.started()
	host, port := n.advertisedKafka()
	logger.Info("strata node started",
		"node_id", cfg.NodeID, "roles", cfg.Roles, "cluster_id", clusterID, "data_dir", cfg.DataDir,
		"kafka_addr", n.kafkaLn.Addr().String(), "advertised_kafka_addr", net.JoinHostPort(host, strconv.Itoa(port)),
		"http_addr", n.httpLn.Addr().String())
	return n, nil
}

// startController is step 1 of the package doc: the controller listener (Raft
// and the controller link), the controller, the link's server and client; a
// broker-only node also listens for Kafka and registers, which makes it a
// member. It waits
// until the controller has a leader and has applied its log, then builds the
// metrics.
// snapshotInterval maps the broker's metadata-log-max-snapshot-interval (0:
// no time bound, as Kafka's 0) onto the controller's (0: its default; negative:
// no time bound).
func snapshotInterval(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func (n *Node) startController(ctx context.Context, fsys vfs.FS) error {
	cfg := n.cfg
	peers, err := n.startControllerListener()
	if err != nil {
		return err
	}
	ctrlCfg := controller.Config{
		NodeID:            cfg.NodeID,
		DataDir:           filepath.Join(cfg.DataDir, "metadata"),
		FS:                fsys,
		Transport:         n.raftTransport,
		NameVoter:         nameVoter,
		Voters:            peers,
		Observer:          !cfg.IsController(),
		DefaultPartitions: cfg.DefaultPartitions,
		RemoteStorage:     cfg.RemoteStorage != "",
		SessionTimeout:    cfg.BrokerSessionTimeout,

		LeaderImbalanceCheckInterval: cfg.LeaderImbalanceCheckInterval,
		SnapshotMaxBytes:             cfg.MetadataSnapshotMaxBytes,
		SnapshotMaxInterval:          snapshotInterval(cfg.MetadataSnapshotMaxInterval),
		Logger:                       n.log, // the controller and its Raft adapter name their own components
		Tokens: controller.TokenConfig{SecretKey: cfg.DelegationTokenSecretKey, MaxLifetime: cfg.DelegationTokenMaxLifetime,
			ExpiryTime: cfg.DelegationTokenExpiryTime, ExpiryCheckInterval: cfg.DelegationTokenExpiryCheckInterval},
	}
	if ctrlCfg.Observer {
		ctrlCfg.Voters = nil
	}
	n.ctrl, err = controller.Start(ctrlCfg)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	n.lc.onStop("controller", func(stopping) error { return n.ctrl.Close() })
	n.serveLink()
	n.link = n.newLink(peers)
	n.lc.onStop("controller link client", func(stopping) error { n.link.Close(); return nil })
	n.lc.goContext("voter address update", n.maybeUpdateVoterAddress)
	if !cfg.IsController() {
		n.toController, n.voterLink = n.link, n.link
		// A broker-only node receives the metadata log only once it is a member:
		// it registers (and so joins) first.
		if n.kafkaLn, err = n.listen("kafka", cfg.KafkaAddr); err != nil {
			return err
		}
		if err := n.register(ctx); err != nil {
			return err
		}
	}
	n.setStep("waiting for the controller quorum to have a leader and for this node to apply its log")
	if err := n.ctrl.WaitReady(ctx); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	n.telemetry = telemetry.New(telemetry.Config{MaxClients: int(cfg.TelemetryMaxClients), MaxSeries: int(cfg.TelemetryMaxSeries)})
	n.metrics = metrics.New(metrics.Config{
		NodeID: cfg.NodeID, Cluster: n.ctrl, Partitions: hostedPartitions{n}, Groups: nodeGroups{n},
		Logger: n.log.With("component", "metrics"), GoCollectors: true, Telemetry: n.telemetry,
	})
	return n.serveControllerClients()
}

// serveControllerClients serves Kafka clients that reach this node's
// controller listener (KIP-919's --bootstrap-controller; handlers'
// controller_listener.go), authenticated and authorized as on the Kafka
// listener, whose security settings it makes (n.sasl, n.guard).
func (n *Node) serveControllerClients() error {
	var err error
	if n.sasl, n.guard, err = n.security(); err != nil {
		return err
	}
	h := handlers.New(handlers.Config{
		NodeID: n.cfg.NodeID, ClusterID: n.clusterID, Observer: n.metrics, Authorizer: n.authorizerFunc(),
	}, n.ctrl, nil, nil, n.link, n.log.With("component", "controller-listener"))
	n.controllerClients = &protocol.Server{
		Handler:         n.metrics.InstrumentHandler(n.auditChanges(h.ControllerListenerHandler())),
		Hooks:           []protocol.Hook{n.metrics},
		Versions:        handlers.ControllerListenerVersions(),
		MaxRequestBytes: n.cfg.MaxRequestBytes,
		// Kafka's controller listener closes idle connections as its others do.
		BodyTimeout:        offWhenZero(n.cfg.RequestBodyTimeout),
		ConnectionsMaxIdle: offWhenZero(n.cfg.ConnectionsMaxIdle),
		SASL:               n.sasl,
		Principals:         n.principals,
		ClusterID:          n.clusterID,
		NodeID:             n.cfg.NodeID,
		Logger:             n.log.With("component", "controller-listener"),
	}
	n.lc.goroutine("controller listener's client server", func() {
		if err := n.controllerClients.Serve(n.mux.Clients()); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, protocol.ErrServerClosed) {
			n.log.Error("controller listener's client server stopped", "err", err)
		}
	}, func(s stopping) { n.drained("controller listener clients", n.controllerClients.Shutdown(s.drain)) })
	return nil
}

// startBroker is steps 2-4 of the package doc, on a node with the broker role.
func (n *Node) startBroker(ctx context.Context, fsys vfs.FS) error {
	cfg, logger := n.cfg, n.log
	n.setStep("opening partitions and coordinators")
	var err error
	if n.kafkaLn == nil {
		if n.kafkaLn, err = n.listen("kafka", cfg.KafkaAddr); err != nil {
			return err
		}
	}
	n.replicaClient, err = kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(n.kafkaLn.Addr().String()),
		kgo.ClientID(fmt.Sprintf("strata-replica-%d", cfg.NodeID)),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}, n.kafkaClientOpts()...)...)
	if err != nil {
		return err
	}
	n.lc.onStop("replica client", func(stopping) error { n.replicaClient.Close(); return nil })
	var remoteStore remote.Store
	if cfg.RemoteStorage != "" {
		if remoteStore, err = remote.Open(cfg.RemoteStorage, fsys); err != nil {
			return fmt.Errorf("remote storage: %w", err)
		}
		n.remoteCache = storage.NewBlockCache(cfg.RemoteCacheSize)
	}
	logsDir := filepath.Join(cfg.DataDir, "logs")
	// NewManager would create it; the mount table is looked up for it first.
	if err := vfs.MkdirAllDurable(fsys, logsDir, 0o755); err != nil {
		return fmt.Errorf("logs dir: %w", err)
	}
	logDirMode, reason, err := logDirSync(cfg.LogDirSync, fsys, cfg.DataDir, logsDir, vfs.OwnFilesystem)
	if err != nil {
		return err
	}
	logger.Info("log directory sync", "dir", logsDir, "mode", logDirMode, "reason", reason)
	onSync, onRoll := n.metrics.LogDirHooks(logsDir)
	n.replicas, err = replica.NewManager(fsys, logsDir, cfg.NodeID, logger.With("component", "replica"), replica.Options{
		OnSync:         onSync,
		OnRoll:         onRoll,
		CacheTail:      cfg.LogCacheTailBytes,
		SyncFilesystem: logDirMode == config.LogDirSyncFilesystem,
		Remote:         remoteStore,
		RemoteCache:    n.remoteCache,
		Transport:      n.metrics.ReplicaTransport(replicaTransport{n.replicaClient}),
		ISRChanger:     n.metrics.ISRChanger(isrChanger{n}),
		BrokerEpoch:    n.brokerEpoch.Load,
		ReplicaLagMax:  cfg.ReplicaLagTimeMax,
		// Checked by the cleaner, every log-cleanup-interval.
		ProducerIDExpiration: cfg.ProducerIDExpiration,
		OnLeadership: func(p *replica.Partition, leader bool) {
			n.offsetStore.LeadershipChanged(p, leader)
			n.txnStore.LeadershipChanged(p, leader)
			n.shareLog.LeadershipChanged(p, leader)
		},
	})
	if err != nil {
		return err
	}
	n.lc.onStop("replica manager", func(stopping) error { return n.replicas.Close() })
	n.offsetStore = offsets.New(n.replicas, logger.With("component", "offsets"))
	groupCfg := group.DefaultConfig()
	groupCfg.GroupInitialRebalanceDelay = cfg.GroupInitialDelay
	groupCfg.OffsetsTopicPartitions = cfg.OffsetsTopicPartition
	groupCfg.ConsumerMaxSize, groupCfg.ClassicMaxSize = int(cfg.GroupConsumerMaxSize), int(cfg.GroupClassicMaxSize)
	groupCfg.Topics = topicCatalog{image: n.ctrl.Image}
	groupCfg.ShareState = shareState{n}
	groupCfg.GroupConfig = n.consumerGroupConfig
	n.groups = group.New(groupCfg, n.offsetStore, logger.With("component", "group"))
	n.lc.onStop("group coordinator", func(stopping) error { n.groups.Close(); return nil })
	// From here on the store's partition loaders load into the coordinator:
	// they stop before it.
	n.offsetStore.SetCoordinator(n.groups)
	n.lc.onStop("group offsets store", func(stopping) error { n.offsetStore.Close(); return nil })
	var h *handlers.Handlers // the transaction coordinator takes producer ids from the handlers' block
	n.txnStore = offsets.NewForTopic(txn.StateTopic, n.replicas, logger.With("component", "txn-state"))
	n.txns = txn.New(txn.Config{Partitions: cfg.TransactionStatePartitions, MaxTimeout: cfg.TransactionMaxTimeout, IDExpiration: cfg.TransactionalIDExpiration,
		Overlap: func() bool { return n.ctrl.Image().BrokersSupport(metadata.FeatureOwedMarkers, 1) },
		Preadd:  func() bool { return n.ctrl.Image().BrokersSupport(metadata.FeaturePreadded, 1) }},
		n.txnStore, txn.BrokerMarkers{Brokers: txnBrokers{n}, Log: logger.With("component", "txn")}, func(ctx context.Context) (int64, error) { return h.NextProducerID(ctx) },
		logger.With("component", "txn"))
	n.lc.onStop("transaction coordinator", func(stopping) error { n.txns.Close(); return nil })
	n.txnStore.SetCoordinator(n.txns)
	n.lc.onStop("transaction state store", func(stopping) error { n.txnStore.Close(); return nil })
	if err := n.startShares(logger.With("component", "share")); err != nil {
		return fmt.Errorf("share groups: %w", err)
	}
	quotas := quota.New(nil)
	h = handlers.New(handlers.Config{
		NodeID:            cfg.NodeID,
		Loggers:           loglevels.From(logger),
		ClusterID:         n.clusterID,
		AutoCreateTopics:  cfg.AutoCreateTopics,
		DefaultPartitions: cfg.DefaultPartitions,
		BrokerEpoch:       n.brokerEpoch.Load,
		Observer:          n.metrics,
		Authorizer:        n.authorizerFunc(),
		Quotas:            quotas,

		OffsetsTopicPartitions:     cfg.OffsetsTopicPartition,
		Transactions:               n.txns,
		TransactionStatePartitions: cfg.TransactionStatePartitions,
		ShareStatePartitions:       cfg.ShareStatePartitions,
		AddToRemoteTxn:             txnBrokers{n}.AddPartitionsToTxn,
		Shares:                     n.shares,
		ShareCoordinator:           n.shareCoord,
		Telemetry:                  n.telemetry,
		RackAwareReplicaSelector:   cfg.ReplicaSelectorClass == config.RackAwareReplicaSelector,
		FetchSessionCacheSlots:     cfg.MaxIncrementalFetchSessionCacheSlots,
		TokenSecretKey:             cfg.DelegationTokenSecretKey,
	}, n.ctrl, n.replicas, n.groups, n.link, logger.With("component", "kafka"))
	n.kafkaHandlers = h
	// From here on the broker's handlers serve the link: a request the
	// active controller serves also waits for this broker's partitions.
	n.setLinkHandler(h)
	if cfg.IsController() {
		n.toController = h.Controller()
	}
	if err := n.followMetadata(remoteStore != nil); err != nil {
		return err
	}
	if err := n.startSession(ctx); err != nil {
		return err
	}
	if err := n.serveKafka(h, quotas); err != nil {
		return err
	}
	return n.startHTTPAPI()
}

// followMetadata brings the hosted partitions in line with the metadata image
// and keeps them there, and runs the log cleaner and, with remote storage, the
// tiering.
func (n *Node) followMetadata(tiered bool) error {
	images, stopWatch := n.ctrl.Watch()
	// The watch ends with the goroutine that reads it; its own step covers a
	// failure before that goroutine starts (a second stopWatch does nothing).
	n.lc.onStop("metadata watch", func(stopping) error { stopWatch(); return nil })
	if err := n.replicas.Apply(n.ctrl.Image()); err != nil {
		return fmt.Errorf("opening partitions: %w", err)
	}
	n.lc.goroutine("metadata images", func() { n.followImages(images) }, func(stopping) { stopWatch() })
	n.lc.goContext("log cleaner", func(ctx context.Context) { n.replicas.RunCleaner(ctx, n.cfg.LogCleanupInterval) })
	if tiered {
		n.lc.goContext("tiering", func(ctx context.Context) { n.replicas.RunTiering(ctx, n.cfg.RemoteUploadInterval) })
	}
	return nil
}

// startSession registers the broker (unless a broker-only node did so to
// join), adds the --add-scram credentials, and keeps the broker's session with
// the controller (heartbeats) and its ISRs (ISR maintenance) going. Their
// hand-off is the controlled shutdown, during which the broker still
// heartbeats; both stop after it.
func (n *Node) startSession(ctx context.Context) error {
	if n.brokerEpoch.Load() == 0 {
		if err := n.register(ctx); err != nil {
			return err
		}
	}
	if err := n.addScramCredentials(ctx); err != nil {
		return err
	}
	sessionCtx, endSession := context.WithCancel(context.Background())
	n.lc.goroutine("broker heartbeats", func() { n.runHeartbeats(sessionCtx) }, func(stopping) { endSession() })
	n.lc.goroutine("ISR maintenance", func() { n.replicas.RunISRMaintenance(sessionCtx) }, func(stopping) { endSession() })
	n.lc.onHandoff("controlled shutdown", func(s stopping) {
		if s.served && s.graceful {
			n.controlledShutdown(s.handoff)
		}
		endSession()
	})
	return nil
}

// offWhenZero maps a setting that 0 turns off to protocol.Server's fields, where
// 0 is the default and a negative value is off.
func offWhenZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// serveKafka serves Kafka clients on the Kafka listener with h; quotas also
// limits the rate of new connections per client address.
func (n *Node) serveKafka(h *handlers.Handlers, quotas *quota.Manager) error {
	n.kafka = &protocol.Server{
		Handler:         n.metrics.InstrumentHandler(n.auditChanges(h)),
		Hooks:           []protocol.Hook{n.metrics, shareConns{n.shares}},
		Versions:        handlers.Versions(),
		ReuseFrameKeys:  handlers.ReuseFrameKeys(),
		MaxRequestBytes: n.cfg.MaxRequestBytes,
		// -1 (no limit) passes through: the protocol package reads negative as off.
		MaxQueuedRequestBytes: n.cfg.MaxQueuedRequestBytes,
		BodyTimeout:           offWhenZero(n.cfg.RequestBodyTimeout),
		ConnectionsMaxIdle:    offWhenZero(n.cfg.ConnectionsMaxIdle),
		MaxConnections:        int(n.cfg.MaxConnections),
		MaxConnectionsPerIP:   int(n.cfg.MaxConnectionsPerIP),
		ConnectionThrottle: func(ip netip.Addr) time.Duration {
			return quotas.RecordConnection(n.ctrl.Image(), ip)
		},
		AcceptThrottle: acceptThrottle(n.cfg.MaxConnectionCreationRate),
		RequestThrottle: func(c *protocol.ConnInfo, _ *protocol.Request, busy time.Duration) time.Duration {
			return quotas.RecordRequestTime(n.ctrl.Image(), quota.UserOf(c.Principal()), c.ClientID(), busy)
		},
		SASL:       n.sasl,
		Principals: n.principals,
		ClusterID:  n.clusterID,
		NodeID:     n.cfg.NodeID,
		Logger:     n.log.With("component", "kafka"),
	}
	n.lc.goroutine("kafka server", func() {
		if err := n.kafka.Serve(n.kafkaLn); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, protocol.ErrServerClosed) {
			n.log.Error("kafka listener stopped", "err", err)
		}
	}, func(s stopping) { n.drained("kafka", n.kafka.Shutdown(s.drain)) })
	return nil
}

// startHTTPAPI serves the HTTP API, the console, health and metrics on the
// HTTP listener. The API's hand-off comes first on the way down, while this
// node still leads its partitions: its consumer instances leave their groups,
// and long polls end instead of holding up the HTTP shutdown.
func (n *Node) startHTTPAPI() (err error) {
	// The HTTP API's embedded clients reach this node's Kafka listener; the other
	// nodes reach its consumer instances at its advertised HTTP address.
	n.api, err = httpapi.New(httpapi.Config{
		KafkaAddr: n.kafkaLn.Addr().String(), AdvertisedAddr: advertisedHTTPAddr(n.cfg, n.httpLn.Addr()),
		ClientOpts: n.kafkaClientOpts(), ForwardTLS: n.httpForwardTLS(),
		Cluster: n.ctrl, Partitions: n.replicas, Observer: n.metrics, Requests: n.metrics, Logger: n.log.With("component", "httpapi"),
		Guard: n.guard,
	})
	if err != nil {
		return err
	}
	n.lc.onHandoff("http api", func(s stopping) { n.api.Close(s.handoff) })

	n.console = console.New(console.Config{
		NodeID: n.cfg.NodeID, ClusterID: n.clusterID, Cluster: n.ctrl, Controller: n.toController, Replicas: n.replicas,
		Admin: n.api.Admin(), Logger: n.log.With("component", "console"), Guard: n.guard,
	})
	return n.serveHTTP()
}

// acceptThrottle is the Kafka listener's broker-wide connection creation rate
// limit (max.connection.creation.rate), nil without one.
func acceptThrottle(rate int32) func() time.Duration {
	if rate <= 0 {
		return nil
	}
	return quota.NewConnectionRateLimit(float64(rate), nil).Record
}

// startControllerOnly finishes the start of a controller-only node: it serves
// the controller link (brokers register, heartbeat and forward admin requests
// there) and HTTP health and metrics, but no Kafka clients and no partitions.
func (n *Node) startControllerOnly(clusterID string) error {
	if err := n.serveHTTP(); err != nil {
		return err
	}
	n.lc.goContext("controller registration", n.registerController)
	n.started()
	n.log.Info("strata node started",
		"node_id", n.cfg.NodeID, "roles", n.cfg.Roles, "cluster_id", clusterID, "data_dir", n.cfg.DataDir,
		"controller_addr", n.raftAddr, "http_addr", n.httpLn.Addr().String())
	return nil
}

// serveLink serves the controller link as soon as the controller runs, on
// every node: any node may be a voter (a broker-only node promoted with
// AddRaftVoter runs as one from then on, whatever its --roles), and a voter
// may be elected the active controller while it starts. Until the broker's
// handlers take over (setLinkHandler), controller-only handlers serve it,
// which need nothing but the controller. Serving it only after the broker
// had registered left a broker-only voter elected during its start waiting
// for its own link to answer its registration, for ever, while every other
// broker's heartbeat went unanswered.
func (n *Node) serveLink() {
	n.setLinkHandler(handlers.New(handlers.Config{
		NodeID: n.cfg.NodeID, ClusterID: n.clusterID, DefaultPartitions: n.cfg.DefaultPartitions,
		OffsetsTopicPartitions: n.cfg.OffsetsTopicPartition,
	}, n.ctrl, nil, nil, nil, n.log.With("component", "kafka")))
	n.linkSrv = &protocol.Server{
		Handler: protocol.HandlerFunc(func(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
			return (*n.linkHandler.Load()).Handle(ctx, c, r)
		}),
		Versions: handlers.LinkVersions(),
		Logger:   n.log.With("component", "controller-link"),
		Hooks:    []protocol.Hook{newBrokerLinks(n.ctrl.BrokerLinkClosed)},
	}
	n.lc.goroutine("controller link server", func() {
		if err := n.linkSrv.Serve(n.mux.Link()); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, protocol.ErrServerClosed) {
			n.log.Error("controller link stopped", "err", err)
		}
	}, func(s stopping) { n.drained("controller link", n.linkSrv.Shutdown(s.drain)) })
}

// setLinkHandler makes h's link handlers serve the controller link.
func (n *Node) setLinkHandler(h *handlers.Handlers) {
	lh := h.LinkHandler()
	n.linkHandler.Store(&lh)
}

// listenHTTP binds the HTTP listener before anything else starts and serves
// health on it (healthRoutes) until serveHTTP serves everything: a start
// waits for the controller quorum, to register and for its log, and a node
// that answers /healthz at once and says on /readyz what it waits for can be
// told from one that hangs or died.
func (n *Node) listenHTTP() (err error) {
	if n.httpLn, err = n.listen("http", n.cfg.HTTPAddr); err != nil {
		return err
	}
	n.routes.set(n.healthRoutes())
	n.http = &http.Server{Handler: writeDeadline(&n.routes, n.cfg.HTTPWriteTimeout), ReadHeaderTimeout: 10 * time.Second}
	n.lc.goroutine("http server", func() {
		if err := n.http.Serve(n.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http listener stopped", "err", err)
		}
	}, func(s stopping) { n.drained("http", ignoreClosed(n.http.Shutdown(s.drain))) })
	return nil
}

// serveHTTP serves every route on the HTTP listener and starts the opt-in
// admin listener. Its stop goes back to health only and waits for the
// requests under way, so none runs on into the components stopped after.
func (n *Node) serveHTTP() error {
	n.routes.set(n.httpRoutes())
	n.lc.onStop("http routes", func(s stopping) error {
		n.routes.set(n.healthRoutes())
		n.drained("http", n.routes.wait(s.drain))
		return nil
	})
	return n.startAdmin()
}

// advertisedHTTPAddr is where the other nodes reach this node's HTTP API:
// --advertised-http-addr, else the listener's address with an unspecified host
// (0.0.0.0, ::) replaced by the advertised Kafka host.
func advertisedHTTPAddr(cfg config.Config, bound net.Addr) string {
	if cfg.AdvertisedHTTPAddr != "" {
		return cfg.AdvertisedHTTPAddr
	}
	host, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return bound.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if kafkaHost, _, err := net.SplitHostPort(cfg.AdvertisedKafkaAddr); err == nil {
			host = kafkaHost
		}
	}
	return net.JoinHostPort(host, port)
}

// KafkaAddr is the Kafka listener's address.
func (n *Node) KafkaAddr() string { return n.kafkaLn.Addr().String() }

// HTTPAddr is the HTTP listener's address.
func (n *Node) HTTPAddr() string { return n.httpLn.Addr().String() }

// followImages applies every new metadata image to the hosted partitions, and
// tells the group coordinator about deleted topics (their committed offsets go),
// until images is closed.
func (n *Node) followImages(images <-chan *metadata.Image) {
	prev := n.ctrl.Image()
	for img := range images {
		if err := n.replicas.Apply(img); err != nil {
			n.log.Error("applying metadata image", "offset", img.Offset(), "err", err)
		}
		var deleted []string
		for _, t := range prev.Topics() {
			if img.TopicByID(t.ID) == nil {
				deleted = append(deleted, t.Name)
			}
		}
		if len(deleted) > 0 {
			n.groups.TopicsDeleted(deleted...)
		}
		prev = img
	}
}

func (n *Node) httpRoutes() http.Handler {
	mux := n.healthMux()
	mux.Handle("GET /metrics", n.guard.Wrap(n.metricsRule(), writeGuardError, n.metrics.HTTPHandler()))
	if !n.cfg.IsBroker() {
		return mux // a controller-only node has no console and no data API
	}
	mux.Handle("/console/", n.console.Handler())
	mux.Handle("GET /{$}", http.RedirectHandler("/console/", http.StatusFound))
	n.api.Register(mux)
	return mux
}

// Close shuts the node down: leadership handed off (controlled shutdown), then
// listeners, partitions and the controller.
func (n *Node) Close() error { return n.close(true) }

// Abort stops the node at once, as a crash looks to the cluster: no controlled
// shutdown, no draining of client connections. Fault-injection tests use it for
// nodes that have already lost their power.
func (n *Node) Abort() error { return n.close(false) }

// close stops the node; graceful=false is a crash as far as the cluster can tell:
// no controlled shutdown, client connections cut (the logs are still closed, as
// the page cache survives a kill -9). It runs the lifecycle's steps: hand-offs,
// then stops, each newest first (lifecycle.go).
func (n *Node) close(graceful bool) error {
	stopping := "stopping"
	n.step.Store(&stopping)
	err := n.lc.stop(graceful, n.ready.Swap(false), n.cfg.ShutdownTimeout)
	n.log.Info("stopped")
	return err
}

// drained logs a listener whose connections had to be cut because they did not
// finish within the shutdown budget: the node still stops cleanly.
func (n *Node) drained(listener string, err error) {
	if err != nil {
		n.log.Warn("connections closed before their requests finished", "listener", listener, "err", err)
	}
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
