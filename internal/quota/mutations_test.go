package quota

import (
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
)

// TestMutations drives one user's token bucket (quota 2 partitions/s: a burst of
// 22) through a script of mutations at given times.
func TestMutations(t *testing.T) {
	img := quotaImage(t, &metadata.ClientQuotaRecord{Entity: metadata.QuotaEntity{User: named("alice")},
		Key: metadata.QuotaControllerMutationRate, Value: 2})
	type step struct {
		at         time.Duration
		user       string
		n          int
		strict     bool
		admitted   bool
		throttleMs int64
	}
	for _, tt := range []struct {
		name  string
		steps []step
	}{
		{"within the burst", []step{{0, "alice", 10, true, true, 0}, {0, "alice", 12, true, true, 0}}},
		{"a request may overdraw; the next strict one is refused", []step{
			{0, "alice", 30, true, true, 0}, // 22 - 30 = -8 tokens: 4 s to refill
			{time.Second, "alice", 1, true, false, 3000},
			{4 * time.Second, "alice", 1, true, true, 0}, // back at 0: admitted, -1
		}},
		{"permissive admits and throttles", []step{
			{0, "alice", 30, false, true, 4000},
			{0, "alice", 2, false, true, 5000},
		}},
		{"the refill stops at the burst", []step{
			{0, "alice", 22, true, true, 0},
			{time.Hour, "alice", 23, true, true, 0},
			{time.Hour, "alice", 1, true, false, 500},
		}},
		{"no quota, no limit", []step{{0, "bob", 1000, true, true, 0}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t0 := time.Unix(1000, 0)
			now := t0
			m := New(func() time.Time { return now })
			for i, s := range tt.steps {
				now = t0.Add(s.at)
				ok, throttle := m.Mutations(img, s.user, "app", s.n, s.strict)
				if ok != s.admitted || throttle.Milliseconds() != s.throttleMs {
					t.Fatalf("step %d: admitted %v throttle %v, want %v %dms", i, ok, throttle, s.admitted, s.throttleMs)
				}
			}
		})
	}
}

// TestStrictMutationsThrottleOnlyRefusals: as Kafka's
// StrictControllerMutationQuota, a strict request admitted while the bucket is
// not negative is not throttled, however far it overdraws the bucket; only a
// refused one carries the time until the bucket is back at zero. (Strata used
// to throttle the admitted request too, and mute its connection.)
func TestStrictMutationsThrottleOnlyRefusals(t *testing.T) {
	img := quotaImage(t, &metadata.ClientQuotaRecord{Entity: metadata.QuotaEntity{User: named("alice")},
		Key: metadata.QuotaControllerMutationRate, Value: 2})
	t0 := time.Unix(1000, 0)
	now := t0
	m := New(func() time.Time { return now })
	if ok, d := m.Mutations(img, "alice", "app", 30, true); !ok || d != 0 {
		t.Fatalf("30 partitions from a full bucket of 22: admitted %v throttle %v, want admitted, no throttle", ok, d)
	}
	now = t0.Add(time.Second) // -8 + 2 = -6 tokens: 3 s to go
	if ok, d := m.Mutations(img, "alice", "app", 1, true); ok || d != 3*time.Second {
		t.Fatalf("while overdrawn: admitted %v throttle %v, want refused and 3s", ok, d)
	}
	now = t0.Add(4 * time.Second) // back at 0
	if ok, d := m.Mutations(img, "alice", "app", 30, true); !ok || d != 0 {
		t.Fatalf("back at zero: admitted %v throttle %v, want admitted, no throttle", ok, d)
	}
}
