package controller

// Telling the other members at once what the leader committed.
//
// A Raft follower (or non-voter) learns the commit index only from the
// leader's next AppendEntries: one carrying new entries, or the idle one
// hashicorp/raft sends every CommitTimeout to twice that (50-100 ms at the
// defaults; its heartbeats carry no commit index). Until then the member's
// image, and so the Metadata its broker answers, lags what the active
// controller applied: a client that asks that broker right after a failover
// is sent to the leader that was just replaced. In Kafka a voter or observer
// learns the high watermark as soon as it moves (KIP-1166, Kafka 4.1).
//
// So the leader follows every proposal it applies (and its barrier of a new
// term) with a Raft barrier: a new entry, replicated at once, whose
// AppendEntries carries the new commit index. One barrier at a time; the
// proposals applied meanwhile share the next. A barrier never reaches the
// state machine: image offsets skip it as they skip Raft's other entries (see
// committed.go).

// notePush asks pushCommits for a barrier; it never blocks.
func (c *Controller) notePush() {
	select {
	case c.push <- struct{}{}:
	default:
	}
}

// pushCommits appends a barrier for each batch of notes while this node leads.
func (c *Controller) pushCommits() {
	defer c.pushWG.Done()
	for {
		select {
		case <-c.push:
		case <-c.done:
			return
		}
		select {
		case <-c.done: // both were ready: closing wins
			return
		default:
		}
		if !c.IsLeader() {
			continue
		}
		// It fails only with the leadership lost: a new leader pushes its
		// own commits. Raft is still running here (Close waits for this
		// loop before it stops Raft), as hashicorp/raft never answers a
		// barrier still queued at its shutdown.
		_ = c.raft.Barrier(c.cfg.ApplyTimeout).Error()
	}
}
