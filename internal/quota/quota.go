// Package quota measures client byte rates against the client quotas of the
// metadata image and says how long a client must be throttled, as Kafka's
// ClientQuotaManager does (KIP-13, KIP-55, KIP-219).
//
//  1. A request's principal and client id pick the quota: the most specific
//     entity configured for the key, in Kafka's order: /users/U/clients/C,
//     /users/U/clients/<default>, /users/U, /users/<default>/clients/C,
//     /users/<default>/clients/<default>, /users/<default>, /clients/C,
//     /clients/<default>. No quota: nothing is measured.
//  2. The bytes are added to the rate of that quota's sensor: one per user and/or
//     client id the entity names (a default quota gives each user its own), over
//     Samples windows of Window each.
//  3. Above the quota, the throttle is (rate - quota) / quota x the measured
//     window, with no bound but MaxThrottle, as in Kafka: the broker answers
//     at once with the throttle time and stops reading from the connection for
//     that long.
//
// Request time (request_percentage, KIP-124) uses the same sensors: a request adds
// the percent of one second it kept a request handler busy (RecordRequestTime),
// so the rate is the percent of one thread in use and the throttle is worked out
// as for bytes, but at most one Window, as Kafka's ClientRequestQuotaManager
// bounds it.
//
// Controller mutations (controller_mutation_rate) use a token bucket instead:
// see mutations.go. Connection creation rates of client addresses
// (connection_creation_rate on IP entities) are in connections.go.
package quota

import (
	"math"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
)

// Kafka's defaults (quota.window.num, quota.window.size.seconds).
const (
	Samples = 11
	Window  = time.Second
)

// MaxThrottle is the longest throttle: what throttle_time_ms, an int32 of
// milliseconds, can say (about 24.8 days).
const MaxThrottle = math.MaxInt32 * time.Millisecond

// throttleOf converts a throttle in seconds to a Duration of at most MaxThrottle.
func throttleOf(seconds float64) time.Duration {
	if seconds >= MaxThrottle.Seconds() {
		return MaxThrottle
	}
	return time.Duration(seconds * float64(time.Second))
}

// Manager tracks the sensors; safe for concurrent use.
type Manager struct {
	now func() time.Time
	mu  struct {
		sync.Mutex
		sensors map[sensorKey]*rate
		buckets map[sensorKey]*bucket // controller mutations (mutations.go)
		// connection creation rates by client address (connections.go)
		conns      map[netip.Addr]*rate
		connsSwept time.Time
	}
}

type sensorKey struct {
	user, clientID string
	userSet        bool
	clientSet      bool
	key            string
}

// New returns a Manager; now nil means time.Now.
func New(now func() time.Time) *Manager {
	if now == nil {
		now = time.Now
	}
	m := &Manager{now: now}
	m.mu.sensors = map[sensorKey]*rate{}
	m.mu.buckets = map[sensorKey]*bucket{}
	m.mu.conns = map[netip.Addr]*rate{}
	return m
}

// UserOf is the quota user of a principal: its name ("User:alice" -> "alice").
func UserOf(principal string) string {
	if _, name, ok := strings.Cut(principal, ":"); ok {
		return name
	}
	return principal
}

// Resolve finds the quota for key that applies to user and clientID, and the
// entity it is configured on.
func Resolve(img *metadata.Image, user, clientID, key string) (metadata.QuotaEntity, float64, bool) {
	if !img.HasQuotas() { // every request asks, and most clusters have none
		return metadata.QuotaEntity{}, 0, false
	}
	named := func(n string) metadata.QuotaName { return metadata.QuotaName{Set: true, Name: n} }
	def := metadata.QuotaName{Set: true, Default: true}
	none := metadata.QuotaName{}
	for _, e := range []metadata.QuotaEntity{
		{User: named(user), ClientID: named(clientID)},
		{User: named(user), ClientID: def},
		{User: named(user), ClientID: none},
		{User: def, ClientID: named(clientID)},
		{User: def, ClientID: def},
		{User: def, ClientID: none},
		{User: none, ClientID: named(clientID)},
		{User: none, ClientID: def},
	} {
		if v, ok := img.Quota(e, key); ok {
			return e, v, true
		}
	}
	return metadata.QuotaEntity{}, 0, false
}

// Record adds bytes for user and clientID against key's quota in img and
// returns how long the client must be throttled (0 within its quota).
func (m *Manager) Record(img *metadata.Image, user, clientID, key string, bytes int) time.Duration {
	return m.RecordValue(img, user, clientID, key, float64(bytes))
}

// RequestPercentage is the value RecordRequestTime adds for busy: the percent of
// one second, so that its rate per second is the percent of one request thread
// used (KIP-124's request_percentage unit).
func RequestPercentage(busy time.Duration) float64 {
	return float64(busy) * 100 / float64(time.Second)
}

// RecordRequestTime adds the time a request kept a request handler busy against
// the request_percentage quota of user and clientID in img and returns how long
// the client must be throttled (0 without a quota or within it, at most one
// Window: Kafka's quota.window.size.seconds bounds a request-quota throttle).
func (m *Manager) RecordRequestTime(img *metadata.Image, user, clientID string, busy time.Duration) time.Duration {
	return min(m.RecordValue(img, user, clientID, metadata.QuotaRequestPercentage, RequestPercentage(busy)), Window)
}

// RecordValue adds v (in the key's unit) for user and clientID against key's
// quota in img and returns how long the client must be throttled.
func (m *Manager) RecordValue(img *metadata.Image, user, clientID, key string, v float64) time.Duration {
	e, quota, ok := Resolve(img, user, clientID, key)
	if !ok {
		return 0
	}
	sk := sensorOf(e, user, clientID, key)
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.mu.sensors[sk]
	if r == nil {
		r = &rate{}
		m.mu.sensors[sk] = r
	}
	r.add(now, v)
	perSecond, window := r.measure(now)
	if perSecond <= quota {
		return 0
	}
	return throttleOf((perSecond - quota) / quota * window.Seconds())
}

// sensorOf is the sensor of the quota configured on e, for user and clientID:
// one per user and/or client id the entity names.
func sensorOf(e metadata.QuotaEntity, user, clientID, key string) sensorKey {
	sk := sensorKey{key: key, userSet: e.User.Set, clientSet: e.ClientID.Set}
	if e.User.Set {
		sk.user = user
	}
	if e.ClientID.Set {
		sk.clientID = clientID
	}
	return sk
}

// rate sums values over the last Samples windows, as Kafka's SampledStat and
// Rate (3.8 and later) do: Samples+1 samples, one Window each, the extra one
// for a sample that started before the measured span but overlaps it.
type rate struct {
	samples [Samples + 1]sample
	cur     int
}

type sample struct {
	start, last time.Time // zero start: never used
	sum         float64
}

func (r *rate) add(now time.Time, v float64) {
	if s := &r.samples[r.cur]; s.start.IsZero() || now.Sub(s.start) >= Window {
		r.cur = (r.cur + 1) % len(r.samples)
		r.samples[r.cur] = sample{start: now}
	}
	s := &r.samples[r.cur]
	s.sum += v
	s.last = now
}

// measure returns the rate per second and the span it was measured over. A
// sample whose last value is Samples x Window old is emptied. The span is the
// time since the oldest sample started, topped up with whole Windows to at least
// Samples-1 of them (so a burst is not judged on a sliver), at least 1 ms.
func (r *rate) measure(now time.Time) (float64, time.Duration) {
	total := 0.0
	oldest := now
	for i := range r.samples {
		s := &r.samples[i]
		if s.start.IsZero() {
			continue
		}
		if now.Sub(s.last) >= Samples*Window {
			*s = sample{start: now, last: now}
		}
		total += s.sum
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	window := now.Sub(oldest)
	if full := int(window / Window); full < Samples-1 {
		window += time.Duration(Samples-1-full) * Window
	}
	window = max(window, time.Millisecond)
	return total / window.Seconds(), window
}
