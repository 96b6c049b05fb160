package controller

import (
	"slices"

	"github.com/strata-stream/strata/internal/metadata"
)

// ElectLeader picks a leader for p among the brokers isLive accepts: the first
// replica in preference order that is in isr and live. Only if there is none and
// unclean is set does it take the first live replica outside isr, whose log may
// lack acknowledged records; the ISR then shrinks to that replica alone.
// It returns metadata.NoLeader and isr unchanged when nobody is eligible.
func ElectLeader(p *metadata.Partition, isr []int32, isLive func(int32) bool, unclean bool) (leader int32, newISR []int32) {
	for _, id := range p.Replicas {
		if slices.Contains(isr, id) && isLive(id) {
			return id, isr
		}
	}
	if unclean {
		for _, id := range p.Replicas {
			if isLive(id) {
				return id, []int32{id}
			}
		}
	}
	return metadata.NoLeader, isr
}

// partitionChange returns the record that moves p to leader and isr, raising
// the leader epoch if the leader changes, or nil if nothing changes.
func partitionChange(p *metadata.Partition, leader int32, isr []int32) *metadata.PartitionChangeRecord {
	if leader == p.Leader && slices.Equal(isr, p.ISR) {
		return nil
	}
	epoch := p.LeaderEpoch
	if leader != p.Leader {
		epoch++
	}
	return &metadata.PartitionChangeRecord{
		TopicID: p.TopicID, Partition: p.Index, BasePartitionEpoch: p.PartitionEpoch,
		Leader: leader, LeaderEpoch: epoch, ISR: isr,
	}
}

// changesAfterFence moves leadership and ISR membership away from a broker that
// is being fenced: it leaves every ISR (except as the last member, so that it
// can lead again cleanly when it returns), and partitions it led elect a new
// leader from the remaining ISR.
func changesAfterFence(img *metadata.Image, id int32) []metadata.Record {
	isLive := func(b int32) bool { return b != id && img.IsLive(b) }
	var recs []metadata.Record
	for _, t := range img.Topics() {
		for _, p := range t.Partitions {
			if p.Leader != id && !slices.Contains(p.ISR, id) {
				continue
			}
			isr := p.ISR
			if len(isr) > 1 {
				isr = slices.DeleteFunc(slices.Clone(isr), func(b int32) bool { return b == id })
			}
			leader := p.Leader
			if leader == id || leader == metadata.NoLeader {
				leader, isr = ElectLeader(p, isr, isLive, t.Config.UncleanLeaderElectionEnable)
			}
			if rec := partitionChange(p, leader, isr); rec != nil {
				recs = append(recs, rec)
			}
		}
	}
	return recs
}

// changesAfterUnfence elects leaders for leaderless partitions now that broker
// id is live again.
func changesAfterUnfence(img *metadata.Image, id int32) []metadata.Record {
	isLive := func(b int32) bool { return b == id || img.IsLive(b) }
	var recs []metadata.Record
	for _, t := range img.Topics() {
		for _, p := range t.Partitions {
			if p.Leader != metadata.NoLeader || !slices.Contains(p.Replicas, id) {
				continue
			}
			leader, isr := ElectLeader(p, p.ISR, isLive, t.Config.UncleanLeaderElectionEnable)
			if rec := partitionChange(p, leader, isr); rec != nil {
				recs = append(recs, rec)
			}
		}
	}
	return recs
}
