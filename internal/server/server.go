// Package server is the composition root of a Strata node: it builds every component
// from a config.Config, starts them in dependency order and stops them in reverse.
//
// Start-up, in order:
//  1. the controller (Raft metadata quorum; a single voter by default) and wait until
//     it has a leader and has applied its log. A broker-only node (--roles broker)
//     runs it as a non-voting member: it registers first, through the voters in
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
// logs are closed cleanly so the next start skips recovery.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
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
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/metrics"
	"github.com/strata-stream/strata/internal/offsets"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/quota"
	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/share"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/txn"
	"github.com/strata-stream/strata/internal/vfs"
)

// Node is a running Strata node.
type Node struct {
	cfg           config.Config
	log           *slog.Logger
	ctrl          *controller.Controller
	replicas      *replica.Manager
	remoteCache   *storage.BlockCache // nil without --remote-storage
	kafka         *protocol.Server
	kafkaLn       net.Listener
	http          *http.Server
	httpLn        net.Listener
	brokerEpoch   atomic.Int64
	ready         atomic.Bool
	stopWatch     func()
	stopRetention func()
	wg            sync.WaitGroup

	// Observability (observability.go): /metrics, the console, the admin listener.
	metrics *metrics.Metrics
	console *console.Console
	admin   *http.Server
	adminLn net.Listener

	// Cluster plumbing (cluster.go).
	mux           *controllerlink.Mux
	raftTransport *raft.NetworkTransport
	raftAddr      string // this node's Raft (and controller link) address
	clusterID     string
	link          *controllerlink.Client
	// toController is the one path to the active controller (registration,
	// heartbeats, ISR changes, --add-scram, the console): the link on a
	// broker-only node, the handlers' in-process path on a controller.
	toController  controllerlink.Transport
	linkSrv       *protocol.Server
	replicaClient *kgo.Client
	certs         *certs.Reloader // TLS material; nil when TLS is off (security.go)
	registration  controller.RegisterBroker
	stopLifecycle func()

	// Consumer groups.
	offsetStore *offsets.Store
	groups      *group.Coordinator

	// Transactions: the coordinator on __transaction_state.
	txnStore *offsets.Store
	txns     *txn.Coordinator
	// Share groups' record delivery (share.go).
	shares     *share.Manager
	shareStore *share.TopicStore
	shareDLQ   *share.TopicDeadLetters

	// api is the HTTP/JSON API (internal/httpapi), mounted in httpRoutes.
	api *httpapi.API
	// guard authenticates and authorizes HTTP requests (security.go); nil
	// without SASL and authorizer.
	guard *httpauth.Guard
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

// Start starts a node and returns once it serves clients.
func Start(ctx context.Context, cfg config.Config, logger *slog.Logger, fsys vfs.FS) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: logger}
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

	if err := n.loadTLS(); err != nil {
		return nil, err
	}
	peers, err := n.startControllerListener()
	if err != nil {
		return nil, err
	}
	ctrlCfg := controller.Config{
		NodeID:            cfg.NodeID,
		DataDir:           filepath.Join(cfg.DataDir, "metadata"),
		FS:                fsys,
		Transport:         n.raftTransport,
		Voters:            peers,
		Observer:          !cfg.IsController(),
		DefaultPartitions: cfg.DefaultPartitions,
		SessionTimeout:    cfg.BrokerSessionTimeout,

		LeaderImbalanceCheckInterval: cfg.LeaderImbalanceCheckInterval,
		Logger:                       logger.With("component", "controller"),
	}
	if ctrlCfg.Observer {
		ctrlCfg.Voters = nil
	}
	n.ctrl, err = controller.Start(ctrlCfg)
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	n.link = n.newLink(peers)
	if !cfg.IsController() {
		n.toController = n.link
		// A broker-only node receives the metadata log only once it is a member:
		// it registers (and so joins) first.
		if n.kafkaLn, err = n.listen("kafka", cfg.KafkaAddr); err != nil {
			return nil, err
		}
		if err := n.register(ctx); err != nil {
			return nil, err
		}
	}
	if err := n.ctrl.WaitReady(ctx); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	n.metrics = metrics.New(metrics.Config{
		NodeID: cfg.NodeID, Cluster: n.ctrl, Partitions: hostedPartitions{n}, Groups: nodeGroups{n},
		Logger: logger.With("component", "metrics"), GoCollectors: true,
	})

	if !cfg.IsBroker() {
		if err := n.startControllerOnly(clusterID); err != nil {
			return nil, err
		}
		return n, nil
	}
	if n.kafkaLn == nil {
		if n.kafkaLn, err = n.listen("kafka", cfg.KafkaAddr); err != nil {
			return nil, err
		}
	}
	n.replicaClient, err = kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(n.kafkaLn.Addr().String()),
		kgo.ClientID(fmt.Sprintf("strata-replica-%d", cfg.NodeID)),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}, n.kafkaClientOpts()...)...)
	if err != nil {
		return nil, err
	}
	var remoteStore remote.Store
	if cfg.RemoteStorage != "" {
		if remoteStore, err = remote.Open(cfg.RemoteStorage, fsys); err != nil {
			return nil, fmt.Errorf("remote storage: %w", err)
		}
		n.remoteCache = storage.NewBlockCache(cfg.RemoteCacheSize)
	}
	logsDir := filepath.Join(cfg.DataDir, "logs")
	onSync, onRoll := n.metrics.LogDirHooks(logsDir)
	n.replicas, err = replica.NewManager(fsys, logsDir, cfg.NodeID, logger.With("component", "replica"), replica.Options{
		OnSync:        onSync,
		OnRoll:        onRoll,
		Remote:        remoteStore,
		RemoteCache:   n.remoteCache,
		Transport:     replicaTransport{n.replicaClient},
		ISRChanger:    n.metrics.ISRChanger(isrChanger{n}),
		BrokerEpoch:   n.brokerEpoch.Load,
		ReplicaLagMax: cfg.ReplicaLagTimeMax,
		OnLeadership: func(p *replica.Partition, leader bool) {
			n.offsetStore.LeadershipChanged(p, leader)
			n.txnStore.LeadershipChanged(p, leader)
		},
	})
	if err != nil {
		return nil, err
	}
	n.offsetStore = offsets.New(n.replicas, logger.With("component", "offsets"))
	groupCfg := group.DefaultConfig()
	groupCfg.GroupInitialRebalanceDelay = cfg.GroupInitialDelay
	groupCfg.OffsetsTopicPartitions = cfg.OffsetsTopicPartition
	groupCfg.Topics = topicCatalog{image: n.ctrl.Image}
	groupCfg.ShareState = shareState{n}
	n.groups = group.New(groupCfg, n.offsetStore, logger.With("component", "group"))
	n.offsetStore.SetCoordinator(n.groups)
	var h *handlers.Handlers // the transaction coordinator takes producer ids from the handlers' block
	n.txnStore = offsets.NewForTopic(txn.StateTopic, n.replicas, logger.With("component", "txn-state"))
	n.txns = txn.New(txn.Config{Partitions: cfg.TransactionStatePartitions, MaxTimeout: cfg.TransactionMaxTimeout},
		n.txnStore, txn.BrokerMarkers{Brokers: txnBrokers{n}}, func(ctx context.Context) (int64, error) { return h.NextProducerID(ctx) },
		logger.With("component", "txn"))
	n.txnStore.SetCoordinator(n.txns)
	if err := n.startShares(logger.With("component", "share")); err != nil {
		return nil, fmt.Errorf("share groups: %w", err)
	}
	h = handlers.New(handlers.Config{
		NodeID:            cfg.NodeID,
		ClusterID:         clusterID,
		AutoCreateTopics:  cfg.AutoCreateTopics,
		DefaultPartitions: cfg.DefaultPartitions,
		BrokerEpoch:       n.brokerEpoch.Load,
		Observer:          n.metrics,
		Authorizer:        n.authorizerFunc(),
		Quotas:            quota.New(nil),

		OffsetsTopicPartitions:     cfg.OffsetsTopicPartition,
		Transactions:               n.txns,
		TransactionStatePartitions: cfg.TransactionStatePartitions,
		AddToRemoteTxn:             txnBrokers{n}.AddPartitionsToTxn,
		Shares:                     n.shares,
		RackAwareReplicaSelector:   cfg.ReplicaSelectorClass == config.RackAwareReplicaSelector,
	}, n.ctrl, n.replicas, n.groups, n.link, logger.With("component", "kafka"))
	n.serveLink(h)
	if cfg.IsController() {
		n.toController = h.Controller()
	}
	images, stop := n.ctrl.Watch()
	n.stopWatch = stop
	if err := n.replicas.Apply(n.ctrl.Image()); err != nil {
		return nil, fmt.Errorf("opening partitions: %w", err)
	}
	n.wg.Add(1)
	go n.followImages(images)
	retentionCtx, stopRetention := context.WithCancel(context.Background())
	n.stopRetention = stopRetention
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.replicas.RunCleaner(retentionCtx, cfg.LogCleanupInterval)
	}()
	if remoteStore != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.replicas.RunTiering(retentionCtx, cfg.RemoteUploadInterval)
		}()
	}

	if n.brokerEpoch.Load() == 0 {
		if err := n.register(ctx); err != nil {
			return nil, err
		}
	}
	if err := n.addScramCredentials(ctx); err != nil {
		return nil, err
	}
	lifeCtx, stopLifecycle := context.WithCancel(context.Background())
	n.stopLifecycle = stopLifecycle
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		n.runHeartbeats(lifeCtx)
	}()
	go func() {
		defer n.wg.Done()
		n.replicas.RunISRMaintenance(lifeCtx)
	}()
	saslCfg, guard, err := n.security()
	n.guard = guard
	if err != nil {
		return nil, err
	}
	n.kafka = &protocol.Server{
		Handler:         n.metrics.InstrumentHandler(n.auditChanges(h)),
		Hooks:           []protocol.Hook{n.metrics},
		Versions:        handlers.Versions(),
		ReuseFrameKeys:  handlers.ReuseFrameKeys(),
		MaxRequestBytes: cfg.MaxRequestBytes,
		// -1 (no limit) passes through: the protocol package reads negative as off.
		MaxQueuedRequestBytes: cfg.MaxQueuedRequestBytes,
		MaxConnections:        int(cfg.MaxConnections),
		MaxConnectionsPerIP:   int(cfg.MaxConnectionsPerIP),
		SASL:                  saslCfg,
		Logger:                logger.With("component", "kafka"),
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.kafka.Serve(n.kafkaLn); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, protocol.ErrServerClosed) {
			logger.Error("kafka listener stopped", "err", err)
		}
	}()

	n.httpLn, err = n.listen("http", cfg.HTTPAddr)
	if err != nil {
		return nil, err
	}
	// The HTTP API's embedded clients reach this node's Kafka listener; the other
	// nodes reach its consumer instances at its advertised HTTP address.
	n.api, err = httpapi.New(httpapi.Config{
		KafkaAddr: n.kafkaLn.Addr().String(), AdvertisedAddr: advertisedHTTPAddr(cfg, n.httpLn.Addr()),
		ClientOpts: n.kafkaClientOpts(), ForwardTLS: n.httpForwardTLS(),
		Cluster: n.ctrl, Partitions: n.replicas, Observer: n.metrics, Logger: logger.With("component", "httpapi"),
		Guard: n.guard,
	})
	if err != nil {
		return nil, err
	}

	n.console = console.New(console.Config{
		NodeID: cfg.NodeID, ClusterID: clusterID, Cluster: n.ctrl, Controller: n.toController, Replicas: n.replicas, Groups: n.groups,
		Admin: n.api.Admin(), Logger: logger.With("component", "console"), Guard: n.guard,
	})
	if err := n.serveHTTP(); err != nil {
		return nil, err
	}
	n.ready.Store(true)
	logger.Info("strata node started",
		"node_id", cfg.NodeID, "roles", cfg.Roles, "cluster_id", clusterID, "data_dir", cfg.DataDir,
		"kafka_addr", n.kafkaLn.Addr().String(), "advertised_kafka_addr", cfg.AdvertisedKafkaAddr,
		"http_addr", n.httpLn.Addr().String())
	return n, nil
}

// startControllerOnly finishes the start of a controller-only node: it serves
// the controller link (brokers register, heartbeat and forward admin requests
// there) and HTTP health and metrics, but no Kafka clients and no partitions.
func (n *Node) startControllerOnly(clusterID string) error {
	h := handlers.New(handlers.Config{
		NodeID: n.cfg.NodeID, ClusterID: clusterID, DefaultPartitions: n.cfg.DefaultPartitions,
		OffsetsTopicPartitions: n.cfg.OffsetsTopicPartition,
	}, n.ctrl, nil, nil, nil, n.log.With("component", "kafka"))
	n.serveLink(h)
	var err error
	if _, n.guard, err = n.security(); err != nil {
		return err
	}
	if n.httpLn, err = n.listen("http", n.cfg.HTTPAddr); err != nil {
		return err
	}
	if err := n.serveHTTP(); err != nil {
		return err
	}
	n.ready.Store(true)
	n.log.Info("strata node started",
		"node_id", n.cfg.NodeID, "roles", n.cfg.Roles, "cluster_id", clusterID, "data_dir", n.cfg.DataDir,
		"controller_addr", n.raftAddr, "http_addr", n.httpLn.Addr().String())
	return nil
}

// serveLink serves the controller link with h's link handlers.
func (n *Node) serveLink(h *handlers.Handlers) {
	n.linkSrv = &protocol.Server{
		Handler:  h.LinkHandler(),
		Versions: handlers.LinkVersions(),
		Logger:   n.log.With("component", "controller-link"),
		Hooks:    []protocol.Hook{newBrokerLinks(n.ctrl.BrokerLinkClosed)},
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.linkSrv.Serve(n.mux.Link()); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, protocol.ErrServerClosed) {
			n.log.Error("controller link stopped", "err", err)
		}
	}()
}

// serveHTTP serves HTTP on the listener and starts the opt-in admin listener.
func (n *Node) serveHTTP() error {
	n.http = &http.Server{Handler: n.httpRoutes(), ReadHeaderTimeout: 10 * time.Second}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.http.Serve(n.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http listener stopped", "err", err)
		}
	}()
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

// followImages applies every new metadata image to the hosted partitions.
// followImages applies every new metadata image to the hosted partitions, and
// tells the group coordinator about deleted topics (their committed offsets go).
func (n *Node) followImages(images <-chan *metadata.Image) {
	defer n.wg.Done()
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
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyWait)
		defer cancel()
		if err := n.readiness(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error()+"\n", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
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
// the page cache survives a kill -9).
func (n *Node) close(graceful bool) error {
	wasReady := n.ready.Swap(false)
	// Half the shutdown budget goes to handing work off (HTTP consumers leaving
	// their groups, leadership moving away), half to draining connections. A
	// hand-off that cannot finish (no controller quorum left, say) only costs its
	// half: the node still stops cleanly.
	handoff, cancelHandoff := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout/2)
	defer cancelHandoff()
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	if !graceful {
		cancelHandoff()
		cancel()
	}
	// The HTTP API first, while this node still leads its partitions: its consumer
	// instances leave their groups, and long polls end instead of holding up the
	// HTTP shutdown.
	if n.api != nil {
		n.api.Close(handoff)
	}
	if wasReady && graceful && n.link != nil && n.cfg.IsBroker() {
		n.controlledShutdown(handoff)
	}
	cancelHandoff()
	if n.stopLifecycle != nil {
		n.stopLifecycle()
	}
	var errs []error
	if n.http != nil {
		n.drained("http", ignoreClosed(n.http.Shutdown(ctx)))
	}
	if n.admin != nil {
		n.drained("admin", ignoreClosed(n.admin.Shutdown(ctx)))
	} else if n.adminLn != nil {
		n.adminLn.Close()
	}
	if n.kafka != nil {
		n.drained("kafka", n.kafka.Shutdown(ctx))
	} else if n.kafkaLn != nil {
		n.kafkaLn.Close()
	}
	if n.stopWatch != nil {
		n.stopWatch()
	}
	if n.stopRetention != nil {
		n.stopRetention()
	}
	if n.linkSrv != nil {
		n.drained("controller link", n.linkSrv.Shutdown(ctx))
	}
	if n.link != nil {
		n.link.Close()
	}
	// Every goroutine of the node is done before the partitions close, so nothing
	// (an image being applied, say) opens a log behind Close's back.
	n.wg.Wait()
	// The coordinators' partition loaders before the coordinators they load into.
	if n.offsetStore != nil {
		n.offsetStore.Close()
	}
	if n.txnStore != nil {
		n.txnStore.Close()
	}
	if n.groups != nil {
		n.groups.Close()
	}
	if n.txns != nil {
		n.txns.Close()
	}
	if n.shares != nil {
		n.shares.Close()
	}
	if n.shareStore != nil {
		n.shareStore.Close()
	}
	if n.shareDLQ != nil {
		n.shareDLQ.Close()
	}
	if n.replicas != nil {
		errs = append(errs, n.replicas.Close())
	}
	if n.replicaClient != nil {
		n.replicaClient.Close()
	}
	if n.ctrl != nil {
		errs = append(errs, n.ctrl.Close())
	}
	if n.raftTransport != nil {
		errs = append(errs, n.raftTransport.Close())
	}
	if n.mux != nil {
		n.mux.Close()
	}
	n.log.Info("stopped")
	return errors.Join(errs...)
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
