// Package config holds the server's configuration: every setting with its default,
// validation, and loading from flags, STRATA_* environment variables and an optional
// JSON config file (precedence: flag > environment > file > default).
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/strata-stream/strata/internal/remote"
)

// Config is the configuration of one Strata node.
type Config struct {
	NodeID              int32
	DataDir             string
	KafkaAddr           string // listener for the Kafka protocol
	AdvertisedKafkaAddr string // what clients are told to connect to; defaults to KafkaAddr
	AdvertisedHTTPAddr  string // where other nodes reach the HTTP API; defaults to HTTPAddr
	HTTPAddr            string // JSON API, console, /metrics, health
	AdminAddr           string // opt-in pprof listener; empty = off
	ControllerAddr      string // Raft transport listener
	Controllers         string // static voters: "1@host:port,2@host:port"; empty = this node alone

	AutoCreateTopics      bool
	DefaultPartitions     int32
	MaxRequestBytes       int32
	LogLevel              string
	LogFormat             string // text | json
	ShutdownTimeout       time.Duration
	GroupInitialDelay     time.Duration
	OffsetsTopicPartition int32
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
	// LeaderImbalanceCheckInterval is how often the controller moves leadership back
	// to preferred replicas (auto.leader.rebalance); 0 turns it off.
	LeaderImbalanceCheckInterval time.Duration
	// RemoteStorage is the object store of tiered topics (file:///path); empty:
	// no tiered storage.
	RemoteStorage string
	// RemoteCacheSize bounds the bytes of remote blocks kept in memory.
	RemoteCacheSize int64
	// RemoteUploadInterval is how often leaders look for closed segments to upload.
	RemoteUploadInterval time.Duration
}

// Default returns the embedded defaults: a single node serving on loopback.
func Default() Config {
	return Config{
		NodeID:                       1,
		DataDir:                      "./data",
		KafkaAddr:                    "127.0.0.1:9092",
		HTTPAddr:                     "127.0.0.1:8080",
		ControllerAddr:               "127.0.0.1:9093",
		AutoCreateTopics:             true,
		DefaultPartitions:            1,
		MaxRequestBytes:              100 << 20,
		LogLevel:                     "info",
		LogFormat:                    "text",
		ShutdownTimeout:              30 * time.Second,
		GroupInitialDelay:            3 * time.Second,
		OffsetsTopicPartition:        50,
		LogCleanupInterval:           time.Minute,
		BrokerHeartbeatInterval:      time.Second,
		BrokerSessionTimeout:         9 * time.Second,
		ReplicaLagTimeMax:            30 * time.Second,
		LeaderImbalanceCheckInterval: 5 * time.Minute,
		RemoteCacheSize:              256 << 20,
		RemoteUploadInterval:         time.Second,
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
		{"advertised-http-addr", "host:port where the other nodes reach this node's HTTP API, to forward requests for its HTTP consumers (default: --http-addr, an unspecified host replaced by the advertised Kafka host)", stringValue{&c.AdvertisedHTTPAddr}},
		{"admin-addr", "admin listener host:port serving /debug/pprof/ (empty: off)", stringValue{&c.AdminAddr}},
		{"controller-addr", "Raft controller listener host:port", stringValue{&c.ControllerAddr}},
		{"controllers", "controller voters id@host:port,... (empty: this node alone)", stringValue{&c.Controllers}},
		{"auto-create-topics", "create unknown topics that clients ask Metadata about", boolValue{&c.AutoCreateTopics}},
		{"default-partitions", "partitions of auto-created topics", int32Value{&c.DefaultPartitions}},
		{"max-request-bytes", "largest accepted request frame (socket.request.max.bytes)", int32Value{&c.MaxRequestBytes}},
		{"log-level", "debug, info, warn or error", stringValue{&c.LogLevel}},
		{"log-format", "text or json", stringValue{&c.LogFormat}},
		{"shutdown-timeout", "how long a clean shutdown may take", durationValue{&c.ShutdownTimeout}},
		{"group-initial-rebalance-delay", "group.initial.rebalance.delay.ms as a duration", durationValue{&c.GroupInitialDelay}},
		{"offsets-topic-partitions", "partitions of __consumer_offsets", int32Value{&c.OffsetsTopicPartition}},
		{"log-cleanup-interval", "how often retention and compaction run over every partition", durationValue{&c.LogCleanupInterval}},
		{"cluster-id", "cluster id shared by every node (empty: a single node makes its own)", stringValue{&c.ClusterID}},
		{"broker-heartbeat-interval", "how often a broker heartbeats to the controller", durationValue{&c.BrokerHeartbeatInterval}},
		{"broker-session-timeout", "a broker silent this long is fenced and loses leadership", durationValue{&c.BrokerSessionTimeout}},
		{"replica-lag-time-max", "a follower not caught up for this long leaves the ISR (replica.lag.time.max.ms)", durationValue{&c.ReplicaLagTimeMax}},
		{"leader-imbalance-check-interval", "how often leadership moves back to preferred replicas (0: never)", durationValue{&c.LeaderImbalanceCheckInterval}},
		{"remote-storage", "object store for topics with remote.storage.enable=true: file:///path (empty: no tiered storage)", stringValue{&c.RemoteStorage}},
		{"remote-cache-size", "bytes of remote-storage read blocks cached in memory", int64Value{&c.RemoteCacheSize}},
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
	if c.AdvertisedHTTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertisedHTTPAddr); err != nil {
			errs = append(errs, fmt.Errorf("advertised-http-addr %q: %w", c.AdvertisedHTTPAddr, err))
		}
	}
	if _, err := c.Voters(); err != nil {
		errs = append(errs, err)
	}
	if c.DefaultPartitions < 1 {
		errs = append(errs, fmt.Errorf("default-partitions must be >= 1, got %d", c.DefaultPartitions))
	}
	if c.OffsetsTopicPartition < 1 {
		errs = append(errs, fmt.Errorf("offsets-topic-partitions must be >= 1, got %d", c.OffsetsTopicPartition))
	}
	if c.BrokerHeartbeatInterval <= 0 || c.BrokerSessionTimeout <= c.BrokerHeartbeatInterval {
		errs = append(errs, fmt.Errorf("broker-session-timeout (%v) must be longer than broker-heartbeat-interval (%v)", c.BrokerSessionTimeout, c.BrokerHeartbeatInterval))
	}
	if c.LeaderImbalanceCheckInterval < 0 {
		errs = append(errs, fmt.Errorf("leader-imbalance-check-interval must not be negative, got %v", c.LeaderImbalanceCheckInterval))
	}
	if c.ReplicaLagTimeMax <= 0 {
		errs = append(errs, fmt.Errorf("replica-lag-time-max must be positive, got %v", c.ReplicaLagTimeMax))
	}
	if c.LogCleanupInterval <= 0 {
		errs = append(errs, fmt.Errorf("log-cleanup-interval must be positive, got %v", c.LogCleanupInterval))
	}
	if c.RemoteStorage != "" {
		if err := remote.CheckURL(c.RemoteStorage); err != nil {
			errs = append(errs, fmt.Errorf("remote-storage: %w", err))
		}
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
	if _, err := c.SlogLevel(); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log-format must be text or json, got %q", c.LogFormat))
	}
	return errors.Join(errs...)
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
