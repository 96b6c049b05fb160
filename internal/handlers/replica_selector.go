package handlers

// KIP-392 follower fetching: the leader's choice of a preferred read replica
// for a consumer that names its rack (client.rack, Fetch v11+), with the
// semantics of Kafka's RackAwareReplicaSelector, on when the broker runs with
// replica.selector.class (--replica-selector-class).

import (
	"slices"

	"github.com/strata-stream/strata/internal/metadata"
)

// noPreferredReplica: read from the leader.
const noPreferredReplica = -1

// preferredReadReplica returns the replica a consumer in clientRack should
// fetch a partition (its ISR, led by leader) from instead of this leader, or noPreferredReplica: none when the
// consumer names no rack or the leader is in its rack; else the in-sync
// follower in its rack that is registered and unfenced (Kafka considers only
// ISR members: they hold everything up to the high-water mark), the lowest id
// when there are several; none when no replica is in the rack.
func preferredReadReplica(img *metadata.Image, isr []int32, leader int32, clientRack string) int32 {
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
	for _, id := range slices.Sorted(slices.Values(isr)) {
		if id != leader && rackOf(id) == clientRack {
			return id
		}
	}
	return noPreferredReplica
}
