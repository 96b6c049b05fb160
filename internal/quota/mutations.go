package quota

import (
	"time"

	"github.com/strata-stream/strata/internal/metadata"
)

// Controller mutations (KIP-599): controller_mutation_rate bounds the partitions a
// user or client id creates or deletes per second (CreateTopics, CreatePartitions,
// DeleteTopics), with a token bucket rather than a windowed rate, so that a burst
// is paid back at the quota's pace:
//
//  1. The bucket holds at most quota x Samples x Window tokens and starts full;
//     it refills at quota tokens a second.
//  2. A mutation of n partitions is admitted while the bucket is not negative,
//     and takes n tokens (it may drive the bucket below zero).
//  3. In strict mode (the request versions that know THROTTLING_QUOTA_EXCEEDED)
//     a mutation asked for while the bucket is below zero is refused, and only a
//     refusal throttles the client: for the time the refill needs to bring the
//     bucket back to zero. An admitted mutation is never throttled, however far
//     it overdraws the bucket (Kafka's StrictControllerMutationQuota).
//  4. In permissive mode (older versions) every mutation is admitted, and the
//     client is throttled whenever the bucket is below zero after it.

// bucket is one token bucket.
type bucket struct {
	tokens float64
	last   time.Time
}

// Mutations asks for n partition mutations by user and clientID. It reports
// whether they are admitted (always, when no quota applies or when not strict)
// and how long the client is to be throttled (in strict mode, only when they
// are refused).
func (m *Manager) Mutations(img *metadata.Image, user, clientID string, n int, strict bool) (admitted bool, throttle time.Duration) {
	e, quota, ok := Resolve(img, user, clientID, metadata.QuotaControllerMutationRate)
	if !ok {
		return true, 0
	}
	sk := sensorOf(e, user, clientID, metadata.QuotaControllerMutationRate)
	burst := quota * (Samples * Window).Seconds()
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.mu.buckets[sk]
	if b == nil {
		b = &bucket{tokens: burst, last: now}
		m.mu.buckets[sk] = b
	}
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(burst, b.tokens+quota*elapsed.Seconds())
		b.last = now
	}
	if strict && b.tokens >= 0 {
		b.tokens -= float64(n)
		return true, 0
	}
	if !strict {
		b.tokens -= float64(n)
	}
	if b.tokens < 0 {
		throttle = throttleOf(-b.tokens / quota)
	}
	return !strict, throttle
}
