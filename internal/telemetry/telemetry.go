// Package telemetry is the broker side of KIP-714 client metrics: it matches
// clients to the client metrics subscriptions of the metadata image, answers
// GetTelemetrySubscriptions and PushTelemetry as Kafka 4.4's ClientMetricsManager
// does, and keeps the metrics clients push (OTLP, otlp.go) as series for
// /metrics (package metrics reads Snapshot).
//
// # Calling protocol
//
//  1. A handler calls Subscriptions with the client's instance id (zero for a
//     new client), the connection's attributes and the image's subscriptions.
//     A new client gets a fresh id. The client's subscription is the union of
//     the metrics of every subscription it matches at the smallest interval.
//  2. The client pushes with Push at that interval, echoing the subscription
//     id. A push whose subscription id is stale (the subscriptions changed) is
//     UNKNOWN_SUBSCRIPTION_ID and the client asks again.
//  3. Snapshot returns the series of every client that pushed recently.
//
// # Bounds
//
// At most Config.MaxClients client instances are kept (the least recently
// seen is forgotten first) and at most Config.MaxSeries series over all of
// them (a push's series beyond it are dropped and counted). A client is
// forgotten, with its series, once it sent nothing for max(60 s, 3 push
// intervals), as Kafka expires its instances; a series it has not pushed for
// as long is dropped.
//
// # Concurrency
//
// Every method is safe for concurrent use; one mutex guards the state and is
// never held while decompressing or decoding a payload.
package telemetry

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/metadata"
)

// Defaults of Config.
const (
	DefaultMaxBytes   = 1 << 20 // Kafka's telemetry.max.bytes
	DefaultMaxClients = 16384   // Kafka's client instance cache
	DefaultMaxSeries  = 10000
	// minExpiry is the shortest time a silent client is kept, Kafka's.
	minExpiry = time.Minute
)

// acceptedCompression is what a push may be compressed with, in the order of
// preference Kafka 4.4 sends: zstd, lz4, gzip, snappy.
var acceptedCompression = []int8{4, 3, 1, 2}

// Config sets the bounds; zero values take the defaults.
type Config struct {
	// MaxBytes is the largest (compressed) payload a push may carry.
	MaxBytes int32
	// MaxClients bounds the client instances kept.
	MaxClients int
	// MaxSeries bounds the series kept over every client.
	MaxSeries int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Client is what the broker knows of the connection a request came on: the
// attributes a subscription's match selects on.
type Client struct {
	ClientID        string
	SoftwareName    string
	SoftwareVersion string
	SourceAddress   string
	SourcePort      string
}

// Subscription is a GetTelemetrySubscriptions answer.
type Subscription struct {
	ClientInstanceID    [16]byte
	SubscriptionID      int32
	AcceptedCompression []int8
	PushIntervalMs      int32
	MaxBytes            int32
	// DeltaTemporality is false: Strata exposes sums as Prometheus counters,
	// which are cumulative, so it asks clients for cumulative sums (Kafka
	// asks for deltas and leaves them to its plugin).
	DeltaTemporality bool
	// Metrics are the subscribed name prefixes: empty none, ["*"] all.
	Metrics []string
}

// Push is a PushTelemetry request.
type Push struct {
	ClientInstanceID [16]byte
	SubscriptionID   int32
	Terminating      bool
	CompressionType  int8
	Metrics          []byte
}

// Errors, each carrying the Kafka code the response gets (kerr).
var (
	errThrottled    = kerr.ThrottlingQuotaExceeded
	errInvalid      = kerr.InvalidRequest
	errUnknownSub   = kerr.UnknownSubscriptionID
	errCompression  = kerr.UnsupportedCompressionType
	errTooLarge     = kerr.TelemetryTooLarge
	errInvalidBatch = kerr.InvalidRecord
)

// Manager keeps the client instances and their series.
type Manager struct {
	cfg Config
	mu  struct {
		sync.Mutex
		clients    map[[16]byte]*instance
		series     int    // over every client
		dropped    uint64 // series refused by MaxSeries
		lastExpire time.Time
	}
}

// instance is one client instance (Kafka's ClientMetricsInstance).
type instance struct {
	id       [16]byte
	attrs    map[string]string // by match selector
	metrics  []string
	interval time.Duration
	subID    int32
	lastGet  time.Time
	lastPush time.Time
	lastSeen time.Time
	// terminating: the client said it is closing; later pushes are refused.
	terminating bool
	// lastErr is the code of the client's last answer.
	lastErr int16
	series  map[string]*Series
}

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.MaxSeries <= 0 {
		cfg.MaxSeries = DefaultMaxSeries
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Manager{cfg: cfg}
	m.mu.clients = make(map[[16]byte]*instance)
	return m
}

// InstanceIDString is a client instance id as Kafka prints a Uuid (URL-safe
// base64, no padding): the form of the client_instance_id selector and label.
func InstanceIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// Subscriptions answers GetTelemetrySubscriptions. A request sooner than the
// push interval after the client's last request is THROTTLING_QUOTA_EXCEEDED,
// unless the subscriptions changed since or the client's last push was
// refused for its subscription id or codec (as Kafka 4.4).
func (m *Manager) Subscriptions(id [16]byte, c Client, subs []metadata.Subscription) (Subscription, error) {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLocked(now)
	if id == ([16]byte{}) {
		id = m.newIDLocked()
	}
	in := m.instanceLocked(id, c, subs, now)
	if now.Sub(latest(in.lastGet, in.lastPush)) >= in.interval {
		in.lastGet = now
	} else if in.lastErr != errUnknownSub.Code && in.lastErr != errCompression.Code {
		return Subscription{}, fmt.Errorf("%w: request from client %s before its next push interval", errThrottled, InstanceIDString(id))
	}
	in.lastErr = 0
	return Subscription{
		ClientInstanceID:    id,
		SubscriptionID:      in.subID,
		AcceptedCompression: slices.Clone(acceptedCompression),
		PushIntervalMs:      int32(in.interval / time.Millisecond),
		MaxBytes:            m.cfg.MaxBytes,
		Metrics:             slices.Clone(in.metrics),
	}, nil
}

// Push answers PushTelemetry: it checks the push as Kafka does (in its order:
// terminating, throttling, subscription id, compression, size), then decodes
// the payload and keeps its series. A payload that does not decode is
// INVALID_RECORD.
func (m *Manager) Push(p Push, c Client, subs []metadata.Subscription) error {
	if p.ClientInstanceID == ([16]byte{}) || p.ClientInstanceID == ([16]byte{15: 1}) { // Kafka's reserved ids
		return fmt.Errorf("%w: invalid client instance id", errInvalid)
	}
	now := m.cfg.Now()
	m.mu.Lock()
	m.expireLocked(now)
	in := m.instanceLocked(p.ClientInstanceID, c, subs, now)
	err := m.checkPushLocked(in, p, now)
	in.terminating = in.terminating || p.Terminating
	in.lastErr = Code(err)
	metrics := in.metrics
	m.mu.Unlock()
	if err != nil || len(p.Metrics) == 0 {
		return err
	}
	points, err := decode(p.Metrics, p.CompressionType)
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.mu.clients[p.ClientInstanceID] // nil if forgotten meanwhile
	if err != nil {
		if cur != nil {
			cur.lastErr = errInvalidBatch.Code
		}
		return fmt.Errorf("%w: %v", errInvalidBatch, err)
	}
	if cur != nil {
		m.recordLocked(cur, slices.DeleteFunc(points, func(pt point) bool { return !subscribed(metrics, pt.name) }), now)
	}
	return nil
}

func (m *Manager) checkPushLocked(in *instance, p Push, now time.Time) error {
	idStr := InstanceIDString(in.id)
	if in.terminating {
		return fmt.Errorf("%w: client %s already sent a terminating push", errInvalid, idStr)
	}
	// A push right after a GetTelemetrySubscriptions is taken whenever it comes:
	// clients jitter the interval.
	accept := in.lastGet.After(in.lastPush) || now.Sub(in.lastPush) >= in.interval
	if accept {
		in.lastPush = now
	} else if !p.Terminating {
		return fmt.Errorf("%w: push from client %s before its next push interval", errThrottled, idStr)
	}
	if p.SubscriptionID != in.subID {
		return fmt.Errorf("%w: unknown subscription id for client %s", errUnknownSub, idStr)
	}
	if p.CompressionType < 0 || p.CompressionType > 4 {
		return fmt.Errorf("%w: unknown compression type %d from client %s", errCompression, p.CompressionType, idStr)
	}
	if len(p.Metrics) > int(m.cfg.MaxBytes) {
		return fmt.Errorf("%w: push from client %s is larger than %d bytes", errTooLarge, idStr, m.cfg.MaxBytes)
	}
	return nil
}

// instanceLocked returns the client's instance, created for an id this broker
// has not seen (another broker may have issued it) and re-evaluated when the
// subscriptions it matches changed. It counts as seen now.
func (m *Manager) instanceLocked(id [16]byte, c Client, subs []metadata.Subscription, now time.Time) *instance {
	in := m.mu.clients[id]
	if in == nil {
		if len(m.mu.clients) >= m.cfg.MaxClients {
			m.evictOldestLocked()
		}
		in = &instance{id: id, attrs: map[string]string{
			"client_instance_id":      InstanceIDString(id),
			"client_id":               c.ClientID,
			"client_software_name":    c.SoftwareName,
			"client_software_version": c.SoftwareVersion,
			"client_source_address":   c.SourceAddress,
			"client_source_port":      c.SourcePort,
		}}
		m.mu.clients[id] = in
		in.metrics, in.interval = match(in.attrs, subs)
		in.subID = subscriptionID(in.metrics, in.interval, id)
	} else if metrics, interval := match(in.attrs, subs); interval != in.interval || !slices.Equal(metrics, in.metrics) {
		// As Kafka's new instance on a subscription change: the client may ask
		// at once, and its old subscription id is stale.
		in.metrics, in.interval = metrics, interval
		in.subID = subscriptionID(metrics, interval, id)
		in.lastGet, in.lastPush, in.terminating, in.lastErr = time.Time{}, time.Time{}, false, 0
	}
	in.lastSeen = now
	return in
}

// match is a client's subscription: the metrics of every subscription whose
// match entries all match the client's attributes (an empty match matches
// all), sorted, or only "*" when one of them has it; the smallest interval of
// those, else the default.
func match(attrs map[string]string, subs []metadata.Subscription) ([]string, time.Duration) {
	interval := int32(metadata.DefaultPushIntervalMs)
	var metrics []string
	all := false
	for _, s := range subs {
		ok := true
		for sel, re := range s.Match {
			if v := attrs[sel]; v == "" || !re.MatchString(v) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		interval = min(interval, s.PushIntervalMs)
		for _, name := range s.Metrics {
			all = all || name == "*"
			if !slices.Contains(metrics, name) {
				metrics = append(metrics, name)
			}
		}
	}
	if all {
		metrics = []string{"*"}
	}
	slices.Sort(metrics)
	return metrics, time.Duration(interval) * time.Millisecond
}

// subscriptionID identifies a client's subscription set: a CRC-32C of its
// metrics and interval, mixed with the instance id, as Kafka derives it.
func subscriptionID(metrics []string, interval time.Duration, id [16]byte) int32 {
	h := crc32.Checksum(fmt.Appendf(nil, "%s%d", strings.Join(metrics, ","), interval.Milliseconds()), crc32.MakeTable(crc32.Castagnoli))
	return int32(h ^ crc32.ChecksumIEEE(id[:]))
}

func subscribed(metrics []string, name string) bool {
	for _, p := range metrics {
		if p == "*" || strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func (m *Manager) newIDLocked() [16]byte {
	for {
		var id [16]byte
		rand.Read(id[:])
		id[6] = id[6]&0x0f | 0x40 // a version 4 UUID, as Kafka's Uuid.randomUuid
		id[8] = id[8]&0x3f | 0x80
		if _, taken := m.mu.clients[id]; !taken && id != ([16]byte{}) && id != ([16]byte{15: 1}) {
			return id
		}
	}
}

// expireLocked forgets the clients silent for max(minExpiry, 3 intervals),
// and the series a client has not pushed for as long (a metric it stopped
// sending, or no longer subscribed to), looking at most once a second.
func (m *Manager) expireLocked(now time.Time) {
	if now.Sub(m.mu.lastExpire) < time.Second {
		return
	}
	m.mu.lastExpire = now
	for id, in := range m.mu.clients {
		ttl := max(minExpiry, 3*in.interval)
		if now.Sub(in.lastSeen) >= ttl {
			m.forgetLocked(id)
			continue
		}
		for k, se := range in.series {
			if now.Sub(se.updated) >= ttl {
				delete(in.series, k)
				m.mu.series--
			}
		}
	}
}

func (m *Manager) evictOldestLocked() {
	var oldest *instance
	for _, in := range m.mu.clients {
		if oldest == nil || in.lastSeen.Before(oldest.lastSeen) {
			oldest = in
		}
	}
	if oldest != nil {
		m.forgetLocked(oldest.id)
	}
}

func (m *Manager) forgetLocked(id [16]byte) {
	m.mu.series -= len(m.mu.clients[id].series)
	delete(m.mu.clients, id)
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Code is the Kafka error code of an error Subscriptions or Push returned.
func Code(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if err != nil {
		return kerr.UnknownServerError.Code
	}
	return 0
}
