// Package config holds the server's configuration: every setting with its default,
// validation, and loading from flags, STRATA_* environment variables and an optional
// JSON config file (precedence: flag > environment > file > default).
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/sasl"
)

// RackAwareReplicaSelector is the one replica.selector.class Strata implements
// (Kafka's class name, as operators write it).
const RackAwareReplicaSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// The values of --log-dir-sync (Config.LogDirSync).
const (
	// LogDirSyncFile: each log fsyncs its own active segment.
	LogDirSyncFile = "file"
	// LogDirSyncFilesystem: a log's fsync of its active segment is a syncfs(2)
	// of the filesystem holding the logs directory, shared by every log
	// syncing at the time (storage.LogDirOptions.SyncFilesystem).
	LogDirSyncFilesystem = "filesystem"
	// LogDirSyncAuto: filesystem when the operator gave Strata a filesystem
	// of its own (mounted whole at the data directory or inside it), else file.
	// Not the default: a syncfs makes a small log's sync wait for every
	// other log's writes (docs/storage.md).
	LogDirSyncAuto = "auto"
)

// Config is the configuration of one Strata node.
type Config struct {
	NodeID              int32
	DataDir             string
	KafkaAddr           string // listener for the Kafka protocol
	AdvertisedKafkaAddr string // what clients are told to connect to; defaults to KafkaAddr
	AdvertisedHTTPAddr  string // where other nodes reach the HTTP API; defaults to HTTPAddr
	Rack                string // the broker's rack (broker.rack): replicas spread over racks; empty: none
	HTTPAddr            string // JSON API, console, /metrics, health
	AdminAddr           string // opt-in pprof listener; empty = off
	ControllerAddr      string // Raft transport listener (a broker-only node receives the metadata log on it)
	// AdvertisedControllerAddr is where the other nodes reach ControllerAddr (a
	// NAT or proxy in between): this node's address in the Raft configuration,
	// registered by a broker-only node and recorded by add-controller. Empty:
	// the listener's own address.
	AdvertisedControllerAddr string
	// ControllerSourceHost is the local IP this node's controller-quorum
	// connections (Raft RPCs, controller-link requests) are made from. Empty:
	// the operating system's choice.
	ControllerSourceHost string
	// KafkaSourceHost is the local IP this node's own Kafka clients (replica
	// fetchers, transaction markers, the HTTP API's and share groups'
	// clients) connect to brokers from. Empty: the operating system's choice.
	KafkaSourceHost string
	Controllers     string // static voters: "1@host:port,2@host:port"; empty = this node alone
	// Roles is "broker,controller" (the default), "broker" (serves clients, finds
	// the quorum through Controllers and follows its log without a vote) or
	// "controller" (a voter that serves no Kafka clients).
	Roles string
	// ReplicaSelectorClass is Kafka's replica.selector.class: RackAwareReplicaSelector
	// sends consumers that name a client.rack to an in-sync replica in their rack
	// (KIP-392); empty: consumers read from leaders.
	ReplicaSelectorClass string

	AutoCreateTopics  bool
	DefaultPartitions int32
	MaxRequestBytes   int32
	// MaxQueuedRequestBytes bounds request bytes read and not yet handled across
	// all Kafka connections (queued.max.request.bytes, on by default); -1: no bound.
	MaxQueuedRequestBytes int64
	// RequestBodyTimeout closes a Kafka connection whose request body has not
	// arrived this long after the broker reserved its memory; 0: no bound.
	RequestBodyTimeout time.Duration
	// ConnectionsMaxIdle closes a Kafka connection with nothing read and no
	// request in flight for this long (connections.max.idle.ms); 0: never.
	ConnectionsMaxIdle time.Duration
	// HTTPWriteTimeout closes an HTTP connection whose answer has not been
	// written this long after the handler began writing it; 0: no bound.
	HTTPWriteTimeout time.Duration
	// MaxConnections and MaxConnectionsPerIP bound open Kafka connections in total
	// and per client IP (max.connections, max.connections.per.ip); -1: no limit.
	MaxConnections      int32
	MaxConnectionsPerIP int32
	// MaxIncrementalFetchSessionCacheSlots is how many KIP-227 fetch sessions
	// the broker caches (max.incremental.fetch.session.cache.slots); 0: none,
	// every fetch is a full one.
	MaxIncrementalFetchSessionCacheSlots int32
	// MaxConnectionCreationRate bounds the Kafka connections accepted per
	// second (max.connection.creation.rate): over it, accepting waits; -1: no
	// limit.
	MaxConnectionCreationRate int32
	// TLSCertFile and TLSKeyFile turn TLS on for the Kafka, HTTP and controller
	// listeners and for every connection this node opens to another node; the
	// files are reloaded when they change.
	TLSCertFile string
	TLSKeyFile  string
	// TLSClientCAFile requires client certificates signed by its CAs (mTLS); the
	// principal is User:<subject CN>.
	TLSClientCAFile string
	// TLSCAFile holds the CAs trusted for connections to other nodes (default: the
	// client CA file, else the system roots).
	TLSCAFile string
	// SSLPrincipalMappingRules maps client certificates' subject DNs to
	// principals (Kafka's ssl.principal.mapping.rules, certs.PrincipalMapper);
	// empty: User:<subject CN>.
	SSLPrincipalMappingRules string
	// SASLMechanisms turns SASL on for the Kafka listener: a comma-separated list
	// of SCRAM-SHA-256, SCRAM-SHA-512, PLAIN and OAUTHBEARER. Empty: no SASL.
	SASLMechanisms string
	// AddScram creates these credentials at start when absent (kafka-storage
	// format --add-scram syntax: SCRAM-SHA-256=[name=admin,password=secret]).
	AddScram []string
	// SASLSessionLifetime is how long a SASL authentication lasts before the client
	// must re-authenticate (KIP-368, connections.max.reauth.ms); 0: until its
	// credential expires (a token), else forever.
	SASLSessionLifetime time.Duration
	// SASLPlainWithoutTLS allows PLAIN on a listener without TLS (passwords in the
	// clear on the wire); off, PLAIN needs --tls-cert-file.
	SASLPlainWithoutTLS bool
	// InterBrokerSASL is the SCRAM credential (--add-scram syntax) this node's
	// replica fetchers authenticate with to other brokers; created when absent.
	InterBrokerSASL string
	// DelegationTokenSecretKey keys delegation tokens' HMACs (KIP-48,
	// delegation.token.secret.key); the same on every node. Empty: tokens are off.
	DelegationTokenSecretKey string
	// DelegationTokenMaxLifetime bounds a token's life however often it is
	// renewed (delegation.token.max.lifetime.ms); DelegationTokenExpiryTime is
	// how long it lives from its creation or last renewal
	// (delegation.token.expiry.time.ms).
	DelegationTokenMaxLifetime time.Duration
	DelegationTokenExpiryTime  time.Duration
	// DelegationTokenExpiryCheckInterval is how often the active controller
	// removes expired tokens (delegation.token.expiry.check.interval.ms).
	DelegationTokenExpiryCheckInterval time.Duration
	// OAUTHBEARER token validation: the JWKS (file or http(s) URL), the expected
	// issuer and audience (empty: not checked) and the claim naming the principal.
	OAuthJWKS           string
	OAuthIssuer         string
	OAuthAudience       string
	OAuthPrincipalClaim string
	// Authorizer turns authorization on: "acl" (ACLs from the metadata log), or
	// empty for none.
	Authorizer string
	// SuperUsers are principals allowed everything, comma-separated
	// ("User:admin,User:broker").
	SuperUsers string
	// AllowEveryoneIfNoACL allows operations on resources no ACL names
	// (allow.everyone.if.no.acl.found); off: only super users pass.
	AllowEveryoneIfNoACL bool
	// MetricsAuth puts /metrics behind the HTTP guard (credentials with SASL on,
	// DESCRIBE on the cluster with an authorizer); off, /metrics stays open.
	MetricsAuth           bool
	LogLevel              string
	LogFormat             string // text | json
	ShutdownTimeout       time.Duration
	GroupInitialDelay     time.Duration
	OffsetsTopicPartition int32
	// TelemetryMaxClients and TelemetryMaxSeries bound the client instances
	// whose pushed metrics (KIP-714) a node keeps and the series it exposes
	// for them on /metrics (package telemetry).
	TelemetryMaxClients, TelemetryMaxSeries int32
	// GroupConsumerMaxSize and GroupClassicMaxSize are group.consumer.max.size
	// and group.classic.max.size: the most members a consumer group (classic
	// members in it included) and a classic group hold; they also bound the
	// online conversions between the two.
	GroupConsumerMaxSize, GroupClassicMaxSize int32
	// TransactionStatePartitions is transaction.state.log.num.partitions.
	TransactionStatePartitions int32
	// ShareStatePartitions is share.coordinator.state.topic.num.partitions: the
	// partitions of __share_group_state, created with the first share group.
	ShareStatePartitions int32
	// TransactionMaxTimeout is transaction.max.timeout.ms: the longest transaction
	// timeout a producer may ask for.
	TransactionMaxTimeout time.Duration
	// TransactionalIDExpiration is transactional.id.expiration.ms: a
	// transactional id without a transaction whose state is this old is
	// removed by its coordinator.
	TransactionalIDExpiration time.Duration
	// LogCleanupInterval is how often retention (log.retention.check.interval.ms) and
	// compaction run over every partition.
	LogCleanupInterval time.Duration
	// ClusterID names the cluster; every node of one cluster must be given the same
	// one. Empty: a single node generates and keeps its own.
	ClusterID string
	// BrokerHeartbeatInterval is how often a broker heartbeats to the controller.
	BrokerHeartbeatInterval time.Duration
	// BrokerSessionTimeout: a broker silent this long is fenced and loses leadership.
	BrokerSessionTimeout time.Duration
	// ReplicaLagTimeMax: a follower not caught up for this long leaves the ISR.
	ReplicaLagTimeMax time.Duration
	// ProducerIDExpiration is producer.id.expiration.ms: a partition forgets an
	// idempotent or transactional producer idle this long (no batch or marker
	// newer), unless its transaction there is open; checked at every log
	// cleanup.
	ProducerIDExpiration time.Duration
	// LeaderImbalanceCheckInterval is how often the controller moves leadership back
	// to preferred replicas (auto.leader.rebalance); 0 turns it off.
	LeaderImbalanceCheckInterval time.Duration
	// MetadataSnapshotMaxBytes and MetadataSnapshotMaxInterval are Kafka's
	// metadata.log.max.record.bytes.between.snapshots and
	// metadata.log.max.snapshot.interval.ms: a controller snapshots its metadata
	// log after that many bytes of new records, or that long after its last
	// snapshot when there are new records (0: no time bound).
	MetadataSnapshotMaxBytes    int64
	MetadataSnapshotMaxInterval time.Duration
	// RemoteStorage is the object store of tiered topics (file:///path); empty:
	// no tiered storage.
	RemoteStorage string
	// RemoteCacheSize bounds the bytes of remote blocks kept in memory.
	RemoteCacheSize int64
	// LogCacheTailBytes is how much of each log's newest durable data stays in
	// the page cache; older durable data is dropped from it after each fsync
	// (storage.Config.CacheTailBytes). -1 drops nothing.
	LogCacheTailBytes int64
	// LogDirSync is how the logs of the data directory make their appends
	// durable: LogDirSyncFile, LogDirSyncFilesystem or LogDirSyncAuto.
	LogDirSync string
	// RemoteUploadInterval is how often leaders look for closed segments to upload.
	RemoteUploadInterval time.Duration
}

// Default returns the embedded defaults: a single node serving on loopback.
func Default() Config {
	return Config{
		NodeID:                               1,
		DataDir:                              "./data",
		KafkaAddr:                            "127.0.0.1:9092",
		HTTPAddr:                             "127.0.0.1:8080",
		ControllerAddr:                       "127.0.0.1:9093",
		Roles:                                "broker,controller",
		AutoCreateTopics:                     true,
		DefaultPartitions:                    1,
		MaxRequestBytes:                      100 << 20,
		MaxQueuedRequestBytes:                256 << 20,
		RequestBodyTimeout:                   30 * time.Second,
		ConnectionsMaxIdle:                   10 * time.Minute,
		HTTPWriteTimeout:                     30 * time.Second,
		MaxConnections:                       10000,
		MaxConnectionsPerIP:                  1000,
		MaxConnectionCreationRate:            -1,
		MaxIncrementalFetchSessionCacheSlots: 1000,
		LogLevel:                             "info",
		LogFormat:                            "text",
		ShutdownTimeout:                      30 * time.Second,
		GroupInitialDelay:                    3 * time.Second,
		OffsetsTopicPartition:                50,
		TelemetryMaxClients:                  16384,
		TelemetryMaxSeries:                   10000,
		GroupConsumerMaxSize:                 math.MaxInt32,
		GroupClassicMaxSize:                  math.MaxInt32,
		TransactionStatePartitions:           50,
		ShareStatePartitions:                 50,
		TransactionMaxTimeout:                15 * time.Minute,
		TransactionalIDExpiration:            7 * 24 * time.Hour,
		OAuthPrincipalClaim:                  "sub",
		DelegationTokenMaxLifetime:           7 * 24 * time.Hour,
		DelegationTokenExpiryTime:            24 * time.Hour,
		DelegationTokenExpiryCheckInterval:   time.Hour,
		LogCleanupInterval:                   time.Minute,
		BrokerHeartbeatInterval:              time.Second,
		BrokerSessionTimeout:                 9 * time.Second,
		ReplicaLagTimeMax:                    30 * time.Second,
		ProducerIDExpiration:                 24 * time.Hour,
		LeaderImbalanceCheckInterval:         5 * time.Minute,
		MetadataSnapshotMaxBytes:             20 << 20,
		MetadataSnapshotMaxInterval:          time.Hour,
		RemoteCacheSize:                      256 << 20,
		LogCacheTailBytes:                    64 << 20, // storage.DefaultCacheTailBytes
		LogDirSync:                           LogDirSyncFile,
		RemoteUploadInterval:                 time.Second,
	}
}

// option binds one setting to its flag name; the env var and file key derive from it.
type option struct {
	name  string
	usage string
	value pflag.Value
}

func (c *Config) options() []option {
	return []option{
		{"node-id", "unique id of this node", int32Value{&c.NodeID}},
		{"data-dir", "directory for logs and metadata", stringValue{&c.DataDir}},
		{"kafka-addr", "Kafka protocol listener host:port", stringValue{&c.KafkaAddr}},
		{"advertised-kafka-addr", "address clients are told to use (default: --kafka-addr)", stringValue{&c.AdvertisedKafkaAddr}},
		{"http-addr", "HTTP API, console, /metrics and health listener host:port", stringValue{&c.HTTPAddr}},
		{"rack", "this broker's rack (Kafka's broker.rack): a partition's replicas go to different racks when there are enough", stringValue{&c.Rack}},
		{"replica-selector-class", "Kafka's replica.selector.class: " + RackAwareReplicaSelector + " points consumers that set client.rack at an in-sync replica in their rack (empty: consumers read from leaders)", stringValue{&c.ReplicaSelectorClass}},
		{"advertised-http-addr", "host:port where the other nodes reach this node's HTTP API, to forward requests for its HTTP consumers (default: --http-addr, an unspecified host replaced by the advertised Kafka host)", stringValue{&c.AdvertisedHTTPAddr}},
		{"admin-addr", "admin listener host:port serving /debug/pprof/ (empty: off)", stringValue{&c.AdminAddr}},
		{"controller-addr", "Raft controller listener host:port", stringValue{&c.ControllerAddr}},
		{"advertised-controller-addr", "host:port where the other nodes reach this node's controller listener, written into the Raft configuration (default: --controller-addr)", stringValue{&c.AdvertisedControllerAddr}},
		{"controller-source-host", "local IP address this node's Raft and controller-link connections are made from (default: the operating system's choice)", stringValue{&c.ControllerSourceHost}},
		{"kafka-source-host", "local IP address this node's own Kafka connections to brokers (replica fetches, transaction markers, the HTTP API's and share groups' clients) are made from (default: the operating system's choice)", stringValue{&c.KafkaSourceHost}},
		{"controllers", "controller voters id@host:port,... (empty: this node alone)", stringValue{&c.Controllers}},
		{"roles", "broker, controller, or broker,controller", stringValue{&c.Roles}},
		{"auto-create-topics", "create unknown topics that clients ask Metadata about", boolValue{&c.AutoCreateTopics}},
		{"default-partitions", "partitions of auto-created topics", int32Value{&c.DefaultPartitions}},
		{"max-request-bytes", "largest accepted request frame (socket.request.max.bytes)", int32Value{&c.MaxRequestBytes}},
		{"max-queued-request-bytes", "request bytes read and not yet handled, over all connections (queued.max.request.bytes; -1: no bound)", int64Value{&c.MaxQueuedRequestBytes}},
		{"request-body-timeout", "close a Kafka connection whose request body has not arrived this long after its memory was reserved (0: no bound)", durationValue{&c.RequestBodyTimeout}},
		{"connections-max-idle", "close a Kafka connection with nothing read and no request in flight for this long (connections.max.idle.ms; 0: never)", durationValue{&c.ConnectionsMaxIdle}},
		{"http-write-timeout", "close an HTTP connection whose answer has not been written this long after writing began; a long poll's wait does not count (0: no bound)", durationValue{&c.HTTPWriteTimeout}},
		{"max-connections", "open Kafka connections in total (max.connections; -1: no limit)", int32Value{&c.MaxConnections}},
		{"max-connections-per-ip", "open Kafka connections per client IP (max.connections.per.ip; -1: no limit)", int32Value{&c.MaxConnectionsPerIP}},
		{"max-incremental-fetch-session-cache-slots", "incremental fetch sessions (KIP-227) the broker keeps for consumers and followers of many partitions (max.incremental.fetch.session.cache.slots; 0: none)", int32Value{&c.MaxIncrementalFetchSessionCacheSlots}},
		{"max-connection-creation-rate", "Kafka connections accepted per second; over it, accepting waits (max.connection.creation.rate; -1: no limit)", int32Value{&c.MaxConnectionCreationRate}},
		{"tls-cert-file", "PEM certificate: TLS on the Kafka, HTTP and controller listeners and between nodes (reloaded on change)", stringValue{&c.TLSCertFile}},
		{"tls-key-file", "PEM private key of --tls-cert-file", stringValue{&c.TLSKeyFile}},
		{"tls-client-ca-file", "PEM CAs: client certificates required (mTLS), principal User:<CN> unless --ssl-principal-mapping-rules", stringValue{&c.TLSClientCAFile}},
		{"tls-ca-file", "PEM CAs trusted for connections to other nodes (default: --tls-client-ca-file, else the system roots)", stringValue{&c.TLSCAFile}},
		{"ssl-principal-mapping-rules", "map client certificates' subject DNs to principals with Kafka's ssl.principal.mapping.rules, e.g. 'RULE:^CN=([^,]+),OU=apps,.*$/$1/L,DEFAULT' (empty: User:<subject CN>)", stringValue{&c.SSLPrincipalMappingRules}},
		{"sasl-mechanisms", "SASL on the Kafka listener: comma-separated SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, OAUTHBEARER (empty: off)", stringValue{&c.SASLMechanisms}},
		{"add-scram", "create this SCRAM credential at start if absent, e.g. 'SCRAM-SHA-256=[name=admin,password=admin-secret]' (repeatable)", stringsValue{&c.AddScram}},
		{"sasl-session-lifetime", "how long a SASL authentication lasts before re-authentication (KIP-368; 0: until its credential expires, an OAUTHBEARER or delegation token, else forever)", durationValue{&c.SASLSessionLifetime}},
		{"sasl-plain-without-tls", "allow SASL PLAIN without TLS (passwords travel in the clear)", boolValue{&c.SASLPlainWithoutTLS}},
		{"inter-broker-sasl", "SCRAM credential the replica fetchers use with SASL on, e.g. 'SCRAM-SHA-512=[name=broker,password=...]' (created if absent)", stringValue{&c.InterBrokerSASL}},
		{"delegation-token-secret-key", "key of delegation tokens' HMACs, the same on every node (delegation.token.secret.key; empty: tokens off; prefer the env var)", stringValue{&c.DelegationTokenSecretKey}},
		{"delegation-token-max-lifetime", "longest life of a delegation token, renewals included (delegation.token.max.lifetime.ms)", durationValue{&c.DelegationTokenMaxLifetime}},
		{"delegation-token-expiry-time", "life of a delegation token from its creation or last renewal (delegation.token.expiry.time.ms)", durationValue{&c.DelegationTokenExpiryTime}},
		{"delegation-token-expiry-check-interval", "how often the active controller removes expired delegation tokens (delegation.token.expiry.check.interval.ms)", durationValue{&c.DelegationTokenExpiryCheckInterval}},
		{"oauthbearer-jwks", "JWKS file or http(s) URL whose keys sign OAUTHBEARER tokens", stringValue{&c.OAuthJWKS}},
		{"oauthbearer-issuer", "required iss claim of OAUTHBEARER tokens (empty: not checked)", stringValue{&c.OAuthIssuer}},
		{"oauthbearer-audience", "required aud claim of OAUTHBEARER tokens (empty: not checked)", stringValue{&c.OAuthAudience}},
		{"oauthbearer-principal-claim", "the claim whose value is the principal's name", stringValue{&c.OAuthPrincipalClaim}},
		{"authorizer", "authorization: acl (ACLs managed with CreateAcls/DeleteAcls), or empty for none", stringValue{&c.Authorizer}},
		{"super-users", "principals allowed everything with --authorizer, e.g. User:admin,User:broker", stringValue{&c.SuperUsers}},
		{"allow-everyone-if-no-acl", "with --authorizer, allow operations on resources no ACL names (allow.everyone.if.no.acl.found)", boolValue{&c.AllowEveryoneIfNoACL}},
		{"metrics-auth", "with SASL or --authorizer, /metrics needs credentials and DESCRIBE on the cluster (default: open)", boolValue{&c.MetricsAuth}},
		{"log-level", "debug, info, warn or error", stringValue{&c.LogLevel}},
		{"log-format", "text or json", stringValue{&c.LogFormat}},
		{"shutdown-timeout", "how long a clean shutdown may take", durationValue{&c.ShutdownTimeout}},
		{"group-initial-rebalance-delay", "group.initial.rebalance.delay.ms as a duration", durationValue{&c.GroupInitialDelay}},
		{"offsets-topic-partitions", "partitions of __consumer_offsets", int32Value{&c.OffsetsTopicPartition}},
		{"telemetry-max-clients", "most client instances whose pushed metrics (KIP-714) are kept; the least recently seen goes first", int32Value{&c.TelemetryMaxClients}},
		{"telemetry-max-series", "most series of pushed client metrics exposed on /metrics; new ones beyond are dropped", int32Value{&c.TelemetryMaxSeries}},
		{"group-consumer-max-size", "most members of a consumer group (group.consumer.max.size)", int32Value{&c.GroupConsumerMaxSize}},
		{"group-classic-max-size", "most members of a classic group (group.classic.max.size)", int32Value{&c.GroupClassicMaxSize}},
		{"transaction-state-partitions", "partitions of __transaction_state (transaction.state.log.num.partitions)", int32Value{&c.TransactionStatePartitions}},
		{"share-state-partitions", "partitions of __share_group_state (share.coordinator.state.topic.num.partitions)", int32Value{&c.ShareStatePartitions}},
		{"transaction-max-timeout", "longest transaction timeout a producer may ask for (transaction.max.timeout.ms)", durationValue{&c.TransactionMaxTimeout}},
		{"transactional-id-expiration", "a transactional id without a transaction is removed once idle this long (transactional.id.expiration.ms)", durationValue{&c.TransactionalIDExpiration}},
		{"log-cleanup-interval", "how often retention and compaction run over every partition", durationValue{&c.LogCleanupInterval}},
		{"cluster-id", "cluster id shared by every node (empty: a single node makes its own)", stringValue{&c.ClusterID}},
		{"broker-heartbeat-interval", "how often a broker heartbeats to the controller", durationValue{&c.BrokerHeartbeatInterval}},
		{"broker-session-timeout", "a broker silent this long is fenced and loses leadership", durationValue{&c.BrokerSessionTimeout}},
		{"replica-lag-time-max", "a follower not caught up for this long leaves the ISR (replica.lag.time.max.ms)", durationValue{&c.ReplicaLagTimeMax}},
		{"producer-id-expiration", "a partition forgets a producer idle this long, unless its transaction is open (producer.id.expiration.ms)", durationValue{&c.ProducerIDExpiration}},
		{"leader-imbalance-check-interval", "how often leadership moves back to preferred replicas (0: never)", durationValue{&c.LeaderImbalanceCheckInterval}},
		{"metadata-log-max-record-bytes-between-snapshots", "bytes of new metadata records after which a controller snapshots its log (metadata.log.max.record.bytes.between.snapshots)", int64Value{&c.MetadataSnapshotMaxBytes}},
		{"metadata-log-max-snapshot-interval", "longest time between metadata snapshots while there are new records (metadata.log.max.snapshot.interval.ms; 0: no time bound)", durationValue{&c.MetadataSnapshotMaxInterval}},
		{"remote-storage", "object store for topics with remote.storage.enable=true: file:///path or s3://bucket/prefix?endpoint=host:port&region=r[&insecure=true] (credentials from the standard AWS chain; empty: no tiered storage, and a controller refuses remote.storage.enable=true)", stringValue{&c.RemoteStorage}},
		{"remote-cache-size", "bytes of remote-storage read blocks cached in memory", int64Value{&c.RemoteCacheSize}},
		{"log-cache-tail-bytes", "bytes of each log's newest durable data kept in the page cache; older durable data is dropped from it after each fsync (-1: drop nothing)", int64Value{&c.LogCacheTailBytes}},
		{"log-dir-sync", "how the logs make appends durable: file (each log fsyncs its active segment), filesystem (one syncfs(2) of the logs directory's filesystem, shared by the logs syncing at the time; Linux only) or auto (filesystem when a whole filesystem is mounted at the data directory or inside it, else file)", stringValue{&c.LogDirSync}},
		{"remote-upload-interval", "how often partition leaders upload closed segments to remote storage", durationValue{&c.RemoteUploadInterval}},
	}
}

// EnvName is the environment variable for a flag: node-id -> STRATA_NODE_ID.
func EnvName(flag string) string {
	return "STRATA_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Bind registers every setting as a flag on fs, plus --config.
func (c *Config) Bind(fs *pflag.FlagSet) *string {
	for _, o := range c.options() {
		fs.Var(o.value, o.name, o.usage+" (env "+EnvName(o.name)+")")
	}
	return fs.String("config", "", "optional JSON config file with the flag names as keys (env STRATA_CONFIG)")
}

// Resolve fills settings not given as flags from the environment, then from the JSON
// file at path (if any), then validates.
func (c *Config) Resolve(fs *pflag.FlagSet, path string, getenv func(string) string) error {
	if path == "" {
		path = getenv("STRATA_CONFIG")
	}
	file := map[string]any{}
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("config file: %w", err)
		}
		if err := json.Unmarshal(raw, &file); err != nil {
			return fmt.Errorf("config file %s: %w", path, err)
		}
	}
	known := map[string]bool{}
	for _, o := range c.options() {
		known[o.name] = true
		if f := fs.Lookup(o.name); f != nil && f.Changed {
			continue
		}
		if v := getenv(EnvName(o.name)); v != "" {
			if err := o.value.Set(v); err != nil {
				return fmt.Errorf("%s=%q: %w", EnvName(o.name), v, err)
			}
			continue
		}
		if v, ok := file[o.name]; ok {
			if err := o.value.Set(fmt.Sprint(v)); err != nil {
				return fmt.Errorf("config file key %q: %w", o.name, err)
			}
		}
	}
	for k := range file {
		if !known[k] {
			return fmt.Errorf("config file %s: unknown key %q", path, k)
		}
	}
	return c.Validate()
}

// Validate checks the settings and fills derived defaults.
func (c *Config) Validate() error {
	var errs []error
	if c.NodeID < 0 {
		errs = append(errs, fmt.Errorf("node-id must be >= 0, got %d", c.NodeID))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data-dir must not be empty"))
	}
	for name, addr := range map[string]string{"kafka-addr": c.KafkaAddr, "http-addr": c.HTTPAddr, "controller-addr": c.ControllerAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", name, addr, err))
		}
	}
	if c.ReplicaSelectorClass != "" && c.ReplicaSelectorClass != RackAwareReplicaSelector {
		errs = append(errs, fmt.Errorf("replica-selector-class %q: want %s or empty", c.ReplicaSelectorClass, RackAwareReplicaSelector))
	}
	if c.AdminAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
			errs = append(errs, fmt.Errorf("admin-addr %q: %w", c.AdminAddr, err))
		}
	}
	if c.AdvertisedKafkaAddr == "" {
		c.AdvertisedKafkaAddr = c.KafkaAddr
	}
	if _, _, err := net.SplitHostPort(c.AdvertisedKafkaAddr); err != nil {
		errs = append(errs, fmt.Errorf("advertised-kafka-addr %q: %w", c.AdvertisedKafkaAddr, err))
	}
	if c.AdvertisedControllerAddr != "" {
		if _, port, err := net.SplitHostPort(c.AdvertisedControllerAddr); err != nil {
			errs = append(errs, fmt.Errorf("advertised-controller-addr %q: %w", c.AdvertisedControllerAddr, err))
		} else if port == "0" {
			errs = append(errs, fmt.Errorf("advertised-controller-addr %q: needs the port the other nodes dial, not 0", c.AdvertisedControllerAddr))
		}
	}
	if c.ControllerSourceHost != "" && net.ParseIP(c.ControllerSourceHost) == nil {
		errs = append(errs, fmt.Errorf("controller-source-host %q: not an IP address", c.ControllerSourceHost))
	}
	if c.KafkaSourceHost != "" && net.ParseIP(c.KafkaSourceHost) == nil {
		errs = append(errs, fmt.Errorf("kafka-source-host %q: not an IP address", c.KafkaSourceHost))
	}
	if c.AdvertisedHTTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertisedHTTPAddr); err != nil {
			errs = append(errs, fmt.Errorf("advertised-http-addr %q: %w", c.AdvertisedHTTPAddr, err))
		}
	}
	if err := c.validateRoles(); err != nil {
		errs = append(errs, err)
	}
	if c.DefaultPartitions < 1 {
		errs = append(errs, fmt.Errorf("default-partitions must be >= 1, got %d", c.DefaultPartitions))
	}
	if c.GroupConsumerMaxSize < 1 {
		errs = append(errs, fmt.Errorf("group-consumer-max-size must be >= 1, got %d", c.GroupConsumerMaxSize))
	}
	if c.GroupClassicMaxSize < 1 {
		errs = append(errs, fmt.Errorf("group-classic-max-size must be >= 1, got %d", c.GroupClassicMaxSize))
	}
	if c.OffsetsTopicPartition < 1 {
		errs = append(errs, fmt.Errorf("offsets-topic-partitions must be >= 1, got %d", c.OffsetsTopicPartition))
	}
	if c.TelemetryMaxClients < 1 || c.TelemetryMaxSeries < 1 {
		errs = append(errs, fmt.Errorf("telemetry-max-clients and telemetry-max-series must be >= 1, got %d and %d", c.TelemetryMaxClients, c.TelemetryMaxSeries))
	}
	if c.TransactionStatePartitions < 1 {
		errs = append(errs, fmt.Errorf("transaction-state-partitions must be >= 1, got %d", c.TransactionStatePartitions))
	}
	if c.ShareStatePartitions < 1 {
		errs = append(errs, fmt.Errorf("share-state-partitions must be >= 1, got %d", c.ShareStatePartitions))
	}
	if c.TransactionMaxTimeout < time.Millisecond {
		errs = append(errs, fmt.Errorf("transaction-max-timeout must be at least 1ms, got %v", c.TransactionMaxTimeout))
	}
	if c.BrokerHeartbeatInterval <= 0 || c.BrokerSessionTimeout <= c.BrokerHeartbeatInterval {
		errs = append(errs, fmt.Errorf("broker-session-timeout (%v) must be longer than broker-heartbeat-interval (%v)", c.BrokerSessionTimeout, c.BrokerHeartbeatInterval))
	}
	if c.MetadataSnapshotMaxBytes < 1 {
		errs = append(errs, fmt.Errorf("metadata-log-max-record-bytes-between-snapshots must be at least 1, got %d", c.MetadataSnapshotMaxBytes))
	}
	if c.MetadataSnapshotMaxInterval < 0 {
		errs = append(errs, fmt.Errorf("metadata-log-max-snapshot-interval must not be negative, got %v", c.MetadataSnapshotMaxInterval))
	}
	if c.LeaderImbalanceCheckInterval < 0 {
		errs = append(errs, fmt.Errorf("leader-imbalance-check-interval must not be negative, got %v", c.LeaderImbalanceCheckInterval))
	}
	if c.ReplicaLagTimeMax <= 0 {
		errs = append(errs, fmt.Errorf("replica-lag-time-max must be positive, got %v", c.ReplicaLagTimeMax))
	}
	if c.TransactionalIDExpiration < time.Millisecond {
		errs = append(errs, fmt.Errorf("transactional-id-expiration must be at least 1ms, got %v", c.TransactionalIDExpiration))
	}
	if c.ProducerIDExpiration <= 0 {
		errs = append(errs, fmt.Errorf("producer-id-expiration must be positive, got %v", c.ProducerIDExpiration))
	}
	if c.LogCleanupInterval <= 0 {
		errs = append(errs, fmt.Errorf("log-cleanup-interval must be positive, got %v", c.LogCleanupInterval))
	}
	if c.RemoteStorage != "" {
		if err := remote.CheckURL(c.RemoteStorage); err != nil {
			errs = append(errs, fmt.Errorf("remote-storage: %w", err))
		}
	}
	if c.LogCacheTailBytes == 0 || c.LogCacheTailBytes < -1 {
		errs = append(errs, fmt.Errorf("log-cache-tail-bytes must be positive, or -1 to drop nothing, got %d", c.LogCacheTailBytes))
	}
	if !slices.Contains([]string{LogDirSyncFile, LogDirSyncFilesystem, LogDirSyncAuto}, c.LogDirSync) {
		errs = append(errs, fmt.Errorf("log-dir-sync must be %s, %s or %s, got %q", LogDirSyncFile, LogDirSyncFilesystem, LogDirSyncAuto, c.LogDirSync))
	}
	if c.RemoteCacheSize < 0 {
		errs = append(errs, fmt.Errorf("remote-cache-size must not be negative, got %d", c.RemoteCacheSize))
	}
	if c.RemoteUploadInterval <= 0 {
		errs = append(errs, fmt.Errorf("remote-upload-interval must be positive, got %v", c.RemoteUploadInterval))
	}
	if c.MaxRequestBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("max-request-bytes must be >= 1024, got %d", c.MaxRequestBytes))
	}
	if c.MaxQueuedRequestBytes != -1 && c.MaxQueuedRequestBytes < int64(c.MaxRequestBytes) {
		errs = append(errs, fmt.Errorf("max-queued-request-bytes (%d) must be -1 or at least max-request-bytes (%d)", c.MaxQueuedRequestBytes, c.MaxRequestBytes))
	}
	for name, d := range map[string]time.Duration{"request-body-timeout": c.RequestBodyTimeout, "connections-max-idle": c.ConnectionsMaxIdle,
		"http-write-timeout": c.HTTPWriteTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative (0 turns it off), got %v", name, d))
		}
	}
	for name, v := range map[string]int32{"max-connections": c.MaxConnections, "max-connections-per-ip": c.MaxConnectionsPerIP,
		"max-connection-creation-rate": c.MaxConnectionCreationRate} {
		if v != -1 && v < 1 {
			errs = append(errs, fmt.Errorf("%s must be -1 or positive, got %d", name, v))
		}
	}
	if c.MaxIncrementalFetchSessionCacheSlots < 0 {
		errs = append(errs, fmt.Errorf("max-incremental-fetch-session-cache-slots must not be negative, got %d", c.MaxIncrementalFetchSessionCacheSlots))
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("tls-cert-file and tls-key-file must be given together"))
	}
	if c.TLSCertFile == "" && (c.TLSClientCAFile != "" || c.TLSCAFile != "") {
		errs = append(errs, errors.New("tls-client-ca-file and tls-ca-file need tls-cert-file and tls-key-file"))
	}
	if c.SSLPrincipalMappingRules != "" {
		if c.TLSClientCAFile == "" {
			errs = append(errs, errors.New("ssl-principal-mapping-rules needs tls-client-ca-file (client certificates)"))
		}
		if _, err := certs.ParsePrincipalMappingRules(c.SSLPrincipalMappingRules); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.validateSASL()...)
	if c.Authorizer != "" && c.Authorizer != "acl" {
		errs = append(errs, fmt.Errorf("authorizer must be acl or empty, got %q", c.Authorizer))
	}
	for _, u := range c.SuperUserList() {
		if typ, name, ok := strings.Cut(u, ":"); !ok || typ == "" || name == "" {
			errs = append(errs, fmt.Errorf("super-users: %q is not Type:name (User:admin)", u))
		}
	}
	if _, err := c.SlogLevel(); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log-format must be text or json, got %q", c.LogFormat))
	}
	return errors.Join(errs...)
}

// IsBroker reports whether the node serves Kafka clients and hosts replicas.
func (c *Config) IsBroker() bool { b, _, _ := c.roles(); return b }

// IsController reports whether the node is a controller voter.
func (c *Config) IsController() bool { _, v, _ := c.roles(); return v }

func (c *Config) roles() (broker, controller bool, err error) {
	for _, r := range strings.Split(c.Roles, ",") {
		switch strings.TrimSpace(r) {
		case "broker":
			broker = true
		case "controller":
			controller = true
		default:
			return false, false, fmt.Errorf("roles %q: want broker, controller or broker,controller", c.Roles)
		}
	}
	return broker, controller, nil
}

// validateRoles checks the roles against the voter list: a voter is named in
// --controllers (or is the only node), a broker-only node is not, and finds
// the quorum through it.
func (c *Config) validateRoles() error {
	voters, err := c.Voters()
	if err != nil {
		return err
	}
	_, controller, err := c.roles()
	if err != nil {
		return err
	}
	listed := false
	for _, v := range voters {
		listed = listed || v.ID == c.NodeID
	}
	switch {
	case controller && !listed:
		return fmt.Errorf("node %d has the controller role but is not among --controllers %q", c.NodeID, c.Controllers)
	case !controller && strings.TrimSpace(c.Controllers) == "":
		return errors.New("a broker-only node (--roles broker) needs --controllers to find the quorum")
	case !controller && listed:
		return fmt.Errorf("node %d is among --controllers but has no controller role (--roles %q)", c.NodeID, c.Roles)
	case !controller && c.ClusterID == "":
		return errors.New("a broker-only node (--roles broker) needs the --cluster-id of the cluster it joins")
	}
	return nil
}

// Voter is one controller quorum member.
type Voter struct {
	ID   int32
	Addr string
}

// Voters parses Controllers; with none configured this node is the only voter.
func (c *Config) Voters() ([]Voter, error) {
	if strings.TrimSpace(c.Controllers) == "" {
		return []Voter{{ID: c.NodeID, Addr: c.ControllerAddr}}, nil
	}
	var voters []Voter
	seen := map[int32]bool{}
	for _, part := range strings.Split(c.Controllers, ",") {
		idStr, addr, ok := strings.Cut(strings.TrimSpace(part), "@")
		id, err := strconv.ParseInt(idStr, 10, 32)
		if !ok || err != nil || id < 0 {
			return nil, fmt.Errorf("controllers: %q is not id@host:port", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("controllers: %q: %w", part, err)
		}
		if seen[int32(id)] {
			return nil, fmt.Errorf("controllers: node %d listed twice", id)
		}
		seen[int32(id)] = true
		voters = append(voters, Voter{ID: int32(id), Addr: addr})
	}
	return voters, nil
}

// SlogLevel parses LogLevel.
func (c *Config) SlogLevel() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return 0, fmt.Errorf("log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	return l, nil
}

// SASLMechanismList parses SASLMechanisms.
func (c *Config) SASLMechanismList() ([]sasl.Mechanism, error) {
	var out []sasl.Mechanism
	for name := range strings.SplitSeq(c.SASLMechanisms, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		m, err := sasl.ParseMechanism(name)
		if err != nil {
			return nil, fmt.Errorf("sasl-mechanisms: %w", err)
		}
		if slices.Contains(out, m) {
			return nil, fmt.Errorf("sasl-mechanisms: %s listed twice", m)
		}
		out = append(out, m)
	}
	return out, nil
}

func (c *Config) validateSASL() []error {
	var errs []error
	mechs, err := c.SASLMechanismList()
	if err != nil {
		errs = append(errs, err)
	}
	if slices.Contains(mechs, sasl.Plain) && c.TLSCertFile == "" && !c.SASLPlainWithoutTLS {
		errs = append(errs, errors.New("sasl-mechanisms: PLAIN sends passwords in the clear without TLS: give --tls-cert-file or --sasl-plain-without-tls"))
	}
	if slices.Contains(mechs, sasl.OAuthBearer) && c.OAuthJWKS == "" {
		errs = append(errs, errors.New("sasl-mechanisms: OAUTHBEARER needs --oauthbearer-jwks"))
	}
	for _, spec := range c.AddScram {
		if _, err := sasl.ParseScramSpec(spec); err != nil {
			errs = append(errs, fmt.Errorf("add-scram: %w", err))
		}
	}
	if c.DelegationTokenMaxLifetime <= 0 || c.DelegationTokenExpiryTime <= 0 || c.DelegationTokenExpiryCheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("delegation-token-max-lifetime, -expiry-time and -expiry-check-interval must be positive, got %v, %v and %v",
			c.DelegationTokenMaxLifetime, c.DelegationTokenExpiryTime, c.DelegationTokenExpiryCheckInterval))
	}
	if c.SASLSessionLifetime < 0 {
		errs = append(errs, fmt.Errorf("sasl-session-lifetime must not be negative, got %v", c.SASLSessionLifetime))
	}
	if c.InterBrokerSASL != "" {
		spec, err := sasl.ParseScramSpec(c.InterBrokerSASL)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("inter-broker-sasl: %w", err))
		case !slices.Contains(mechs, spec.Mechanism):
			errs = append(errs, fmt.Errorf("inter-broker-sasl: %s is not in --sasl-mechanisms", spec.Mechanism))
		}
	}
	return errs
}

// SuperUserList parses SuperUsers.
func (c *Config) SuperUserList() []string {
	var out []string
	for u := range strings.SplitSeq(c.SuperUsers, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}
