package handlers

// KIP-392 follower fetching: the leader's choice of a preferred read replica
// for a consumer that names its rack (client.rack, Fetch v11+), with the
// semantics of Kafka's RackAwareReplicaSelector, on when the broker runs with
// replica.selector.class (--replica-selector-class).

import (
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
)

// noPreferredReplica: read from the leader.
const noPreferredReplica = -1

// preferredReadReplica returns the replica a consumer in clientRack should
// fetch a partition from instead of this leader, or noPreferredReplica: none
// when the consumer names no rack or the leader is in its rack; else, of the
// candidates (the in-sync followers that hold the fetch offset:
// Partition.ReadReplicas), one in its rack that is registered and unfenced,
// the most caught up of several; none when no candidate is in the rack.
func preferredReadReplica(img *metadata.Image, candidates []replica.ReplicaView, leader int32, clientRack string) int32 {
	if clientRack == "" {
		return noPreferredReplica
	}
	rackOf := func(id int32) string {
		if b := img.Broker(id); b != nil && !b.Fenced {
			return b.Rack
		}
		return ""
	}
	if rackOf(leader) == clientRack {
		return noPreferredReplica
	}
	var best *replica.ReplicaView
	for i := range candidates {
		c := &candidates[i]
		if c.ID != leader && rackOf(c.ID) == clientRack && (best == nil || moreCaughtUp(c, best)) {
			best = c
		}
	}
	if best == nil {
		return noPreferredReplica
	}
	return best.ID
}

// moreCaughtUp orders replicas as Kafka's ReplicaView.comparator, whose
// greatest the selector picks: the higher log end, then the more recently
// caught up, then the higher id.
func moreCaughtUp(a, b *replica.ReplicaView) bool {
	if a.LogEndOffset != b.LogEndOffset {
		return a.LogEndOffset > b.LogEndOffset
	}
	if a.SinceCaughtUp != b.SinceCaughtUp {
		return a.SinceCaughtUp < b.SinceCaughtUp
	}
	return a.ID > b.ID
}
