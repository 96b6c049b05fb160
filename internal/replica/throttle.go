package replica

import (
	"slices"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/throttle"
)

// replicationThrottle is the broker's replication throttle of partition moves
// (KIP-73): one bucket for what it sends to followers as a leader, one for
// what it fetches as a follower, set from the image's
// leader/follower.replication.throttled.rate on every Apply.
type replicationThrottle struct {
	leader, follower throttle.Bucket
}

func (m *Manager) applyThrottle(img *metadata.Image) {
	now := m.now()
	l, f := img.ReplicationThrottleRates(m.nodeID)
	m.throttle.leader.SetRate(l, now)
	m.throttle.follower.SetRate(f, now)
}

// LeaderThrottle returns the bucket a follower's fetch of p from this leader
// counts against, or nil when it is not throttled: the topic's
// leader.replication.throttled.replicas lists p on this broker and the
// follower is not in the ISR. The fetch handler leaves p's records out of the
// answer while the bucket is Exceeded and Records what it sends.
func (m *Manager) LeaderThrottle(p *Partition, follower int32) *throttle.Bucket {
	if !m.throttle.leader.Limited() { // the usual case, asked first: no lock, no per-partition look-up
		return nil
	}
	cfg := p.Config()
	if cfg == nil || !cfg.LeaderThrottledReplicas.Has(p.Index, m.nodeID) {
		return nil
	}
	if slices.Contains(p.ISR(), follower) {
		return nil
	}
	return &m.throttle.leader
}

// followerThrottle is LeaderThrottle's counterpart in this broker's fetcher:
// the bucket p's fetches count against while this broker is a throttled
// replica of p (follower.replication.throttled.replicas) out of the ISR.
func (m *Manager) followerThrottle(p *Partition) *throttle.Bucket {
	if !m.throttle.follower.Limited() {
		return nil
	}
	cfg := p.Config()
	if cfg == nil || !cfg.FollowerThrottledReplicas.Has(p.Index, m.nodeID) {
		return nil
	}
	if slices.Contains(p.ISR(), m.nodeID) {
		return nil
	}
	return &m.throttle.follower
}

// throttleDelay is how long a throttled partition waits before it is fetched
// again; at most fetchMaxWait, so a rate raised or lifted takes effect soon.
func throttleDelay(b *throttle.Bucket, now time.Time) time.Duration {
	return min(b.Delay(now), fetchMaxWait)
}

// ThrottleRates returns the broker's replication throttle rates in bytes per
// second (throttle.Unlimited: none), as last applied from the image.
func (m *Manager) ThrottleRates() (leader, follower int64) {
	return m.throttle.leader.Rate(), m.throttle.follower.Rate()
}
