package quota

import (
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
)

func quotaImage(t *testing.T, recs ...*metadata.ClientQuotaRecord) *metadata.Image {
	t.Helper()
	var rs []metadata.Record
	for _, r := range recs {
		rs = append(rs, r)
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), rs)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

var (
	named = func(n string) metadata.QuotaName { return metadata.QuotaName{Set: true, Name: n} }
	def   = metadata.QuotaName{Set: true, Default: true}
)

func TestResolvePrecedence(t *testing.T) {
	set := func(u, c metadata.QuotaName, v float64) *metadata.ClientQuotaRecord {
		return &metadata.ClientQuotaRecord{Entity: metadata.QuotaEntity{User: u, ClientID: c}, Key: metadata.QuotaProducerByteRate, Value: v}
	}
	img := quotaImage(t,
		set(named("alice"), named("app"), 1),
		set(named("alice"), metadata.QuotaName{}, 3),
		set(def, metadata.QuotaName{}, 6),
		set(metadata.QuotaName{}, named("app"), 7),
	)
	for _, tt := range []struct {
		user, client string
		want         float64
		ok           bool
	}{
		{"alice", "app", 1, true},
		{"alice", "other", 3, true},
		{"bob", "app", 6, true}, // the user default beats a client-id quota
		{"bob", "other", 6, true},
	} {
		_, got, ok := Resolve(img, tt.user, tt.client, metadata.QuotaProducerByteRate)
		if ok != tt.ok || got != tt.want {
			t.Errorf("Resolve(%s, %s) = %v, %t; want %v", tt.user, tt.client, got, ok, tt.want)
		}
	}
	if _, _, ok := Resolve(quotaImage(t), "alice", "app", metadata.QuotaProducerByteRate); ok {
		t.Error("a quota without any configured")
	}
}

func TestThrottle(t *testing.T) {
	now := time.Unix(1000, 0)
	m := New(func() time.Time { return now })
	img := quotaImage(t, &metadata.ClientQuotaRecord{Entity: metadata.QuotaEntity{User: def}, Key: metadata.QuotaProducerByteRate, Value: 1000})
	// Within the quota: 1000 B/s for 10 s.
	for range 10 {
		if d := m.Record(img, "alice", "c", metadata.QuotaProducerByteRate, 1000); d != 0 {
			t.Fatalf("throttled within the quota: %v", d)
		}
		now = now.Add(time.Second)
	}
	// A burst of 20 kB: the rate over the 10 s window is about 3000 B/s, twice
	// over the quota, so the throttle is about twice the window.
	d := m.Record(img, "alice", "c", metadata.QuotaProducerByteRate, 20000)
	if d < 15*time.Second || d > 25*time.Second {
		t.Fatalf("throttle %v, want about 20s", d)
	}
	// Another user has its own sensor under the default quota.
	if d := m.Record(img, "bob", "c", metadata.QuotaProducerByteRate, 1000); d != 0 {
		t.Fatalf("bob throttled for alice's bytes: %v", d)
	}
	// Once the burst leaves the window, alice is within her quota again.
	now = now.Add(Samples * Window)
	if d := m.Record(img, "alice", "c", metadata.QuotaProducerByteRate, 100); d != 0 {
		t.Fatalf("still throttled after the window: %v", d)
	}
	// No quota for the key: nothing measured.
	if d := m.Record(img, "alice", "c", metadata.QuotaConsumerByteRate, 1<<30); d != 0 {
		t.Fatalf("throttled without a consumer quota: %v", d)
	}
}

// TestRequestTime: request_percentage is the percent of one thread used per
// second. 10% is 100 ms of handler time a second: 1 s in the 10 s window is
// within it; another 1 s over the window makes the rate twice the quota, so the
// throttle would be about the window again, but a request-quota throttle is at
// most one Window.
func TestRequestTime(t *testing.T) {
	if got := RequestPercentage(250 * time.Millisecond); got != 25 {
		t.Fatalf("RequestPercentage(250ms) = %v, want 25", got)
	}
	now := time.Unix(1000, 0)
	m := New(func() time.Time { return now })
	img := quotaImage(t, &metadata.ClientQuotaRecord{Entity: metadata.QuotaEntity{User: named("alice")}, Key: metadata.QuotaRequestPercentage, Value: 10})
	for range 10 {
		if d := m.RecordRequestTime(img, "alice", "c", 100*time.Millisecond); d != 0 {
			t.Fatalf("throttled within the quota: %v", d)
		}
		now = now.Add(time.Second)
	}
	if d := m.RecordRequestTime(img, "alice", "c", 50*time.Millisecond); d <= 0 || d >= Window {
		t.Fatalf("throttle %v, want within (0, %v)", d, Window)
	}
	if d := m.RecordRequestTime(img, "alice", "c", time.Second); d != Window {
		t.Fatalf("throttle %v, want %v", d, Window)
	}
	if d := m.RecordRequestTime(img, "bob", "c", time.Hour); d != 0 {
		t.Fatalf("bob, without a quota, throttled %v", d)
	}
}

// TestRequestTimeThrottleAtMostOneWindow: Kafka's ClientRequestQuotaManager
// bounds a request-quota throttle by one quota window (quota.window.size.seconds,
// 1 s), however far over its request_percentage the client is; the byte rates
// have no such bound. Strata used to allow up to 30 s.
func TestRequestTimeThrottleAtMostOneWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	m := New(func() time.Time { return now })
	img := quotaImage(t, &metadata.ClientQuotaRecord{Entity: metadata.QuotaEntity{User: named("alice")}, Key: metadata.QuotaRequestPercentage, Value: 1})
	// 5 s of handler time against 1% of a thread over a 10 s window: 50 times
	// over, a throttle of 490 s uncapped.
	if d := m.RecordRequestTime(img, "alice", "c", 5*time.Second); d != Window {
		t.Fatalf("throttle %v, want one window (%v)", d, Window)
	}
}

// TestThrottleWindowAsKafka: the throttle is (rate - quota) / quota x the window
// the rate was measured over, and that window is Kafka's (Rate.windowSize and
// SampledStat since Kafka 3.8): the time since the oldest sample started,
// topped up with whole windows to at least Samples-1 of them (so 2.5 s of
// samples is measured over 10.5 s, not 10 s), a sample kept while its last value
// is within Samples x Window even when it started before (so 11.5 s after a
// sample that started at 0 and was last added to at 0.9 s, it still counts).
// Strata measured over at least 10 s and dropped a sample 11 s after its start.
func TestThrottleWindowAsKafka(t *testing.T) {
	type rec struct {
		at    time.Duration
		bytes int
	}
	for _, tt := range []struct {
		name string
		recs []rec
		want time.Duration // the last record's throttle
	}{
		// 15000 B over 10.5 s against 1000 B/s: 15 s - 10.5 s.
		{"topped up to whole windows", []rec{{0, 5000}, {2500 * time.Millisecond, 10000}}, 4500 * time.Millisecond},
		// 14000 B over 11.5 s.
		{"a sample overlapping the window counts", []rec{{0, 1000}, {900 * time.Millisecond, 1000}, {11500 * time.Millisecond, 12000}}, 2500 * time.Millisecond},
		// The first sample's last value is 11 s old: dropped, 12000 B over 10 s.
		{"a sample whose last value left the window", []rec{{0, 1000}, {500 * time.Millisecond, 1000}, {11500 * time.Millisecond, 12000}}, 2 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t0 := time.Unix(1000, 0)
			now := t0
			m := New(func() time.Time { return now })
			img := quotaImage(t, &metadata.ClientQuotaRecord{Entity: metadata.QuotaEntity{User: def}, Key: metadata.QuotaProducerByteRate, Value: 1000})
			var d time.Duration
			for _, r := range tt.recs {
				now = t0.Add(r.at)
				d = m.Record(img, "alice", "c", metadata.QuotaProducerByteRate, r.bytes)
			}
			if d.Round(time.Millisecond) != tt.want {
				t.Fatalf("throttle %v, want %v", d, tt.want)
			}
		})
	}
}

// TestByteRateThrottleUnbounded: Kafka bounds only request-quota and
// connection throttles by a window; a byte-rate or controller-mutation throttle is
// whatever the rate or the bucket needs (ClientQuotaManager.throttleTime,
// ControllerMutationQuotaManager.throttleTimeMs). Strata capped both at 30 s.
func TestByteRateThrottleUnbounded(t *testing.T) {
	now := time.Unix(1000, 0)
	m := New(func() time.Time { return now })
	img := quotaImage(t,
		&metadata.ClientQuotaRecord{Entity: metadata.QuotaEntity{User: named("alice")}, Key: metadata.QuotaProducerByteRate, Value: 1000},
		&metadata.ClientQuotaRecord{Entity: metadata.QuotaEntity{User: named("alice")}, Key: metadata.QuotaControllerMutationRate, Value: 1})
	// 400 kB against 1000 B/s over the 10 s window: 40 times over, 390 s.
	if d := m.Record(img, "alice", "c", metadata.QuotaProducerByteRate, 400_000); d != 390*time.Second {
		t.Fatalf("byte-rate throttle %v, want 390s", d)
	}
	// Never more than throttle_time_ms can say.
	if d := m.Record(img, "alice", "c", metadata.QuotaProducerByteRate, 1<<62); d != MaxThrottle {
		t.Fatalf("throttle of an absurd burst %v, want %v", d, MaxThrottle)
	}
	// 100 partitions from a bucket of 11 at 1 a second: 89 s to refill.
	if _, d := m.Mutations(img, "alice", "c", 100, false); d != 89*time.Second {
		t.Fatalf("mutation throttle %v, want 89s", d)
	}
}
