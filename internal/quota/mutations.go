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
//  3. With the bucket below zero the client is throttled for the time the refill
//     needs to bring it back to zero; in strict mode (the request versions that
//     know THROTTLING_QUOTA_EXCEEDED) further mutations are refused meanwhile, in
//     permissive mode (older versions) they are admitted and only throttled.

// bucket is one token bucket.
type bucket struct {
	tokens float64
	last   time.Time
}

// Mutations asks for n partition mutations by user and clientID. It reports
// whether they are admitted (always, when no quota applies or when not strict)
// and how long the client is to be throttled after them.
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
	admitted = !strict || b.tokens >= 0
	if admitted {
		b.tokens -= float64(n)
	}
	if b.tokens < 0 {
		throttle = min(time.Duration(-b.tokens/quota*float64(time.Second)), MaxThrottle)
	}
	return admitted, throttle
}
