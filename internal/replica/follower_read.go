package replica

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
