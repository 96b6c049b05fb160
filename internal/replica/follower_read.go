package replica

import "time"

// ReadReplica serves a consumer's fetch from this replica whether it leads the
// partition or follows it (KIP-392 follower fetching): as Read, up to this
// replica's own high-water mark or last stable offset, which on a follower
// trail the leader's by at most a fetch. A removed replica answers ErrNotLeader.
func (p *Partition) ReadReplica(offset int64, maxBytes int, iso Isolation) (FetchResult, error) {
	if p.closed.Load() {
		return FetchResult{}, ErrNotLeader
	}
	return p.read(offset, maxBytes, iso)
}

// ReadReplicas is, while this broker leads, the in-sync followers that hold a
// consumer's fetchOffset by their last fetch (tracker.readReplicas): those the
// leader may point the consumer at (KIP-392). Nil on a follower.
func (p *Partition) ReadReplicas(fetchOffset int64, now time.Time) []ReplicaView {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mu.leader {
		return nil
	}
	return p.mu.set.readReplicas(fetchOffset, now)
}
