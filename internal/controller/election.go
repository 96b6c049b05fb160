package controller

import (
	"fmt"
	"slices"

	"github.com/strata-stream/strata/internal/metadata"
)

// ShuttingDown is the set of brokers in controlled shutdown as the active
// controller remembers them (a broker repeats its request with every
// heartbeat until told to stop). The metadata marks them too
// (metadata.ControlledShutdownRecord), for the brokers and for a controller
// that takes over; a broker in either may neither be elected leader nor join
// an ISR, though it is still live. nil is the empty set.
type ShuttingDown map[int32]bool

// inControlledShutdown reports whether broker id is in controlled shutdown:
// in down or marked in img.
func inControlledShutdown(img *metadata.Image, down ShuttingDown, id int32) bool {
	return down[id] || img.InControlledShutdown(id)
}

// eligible returns the test for brokers that may lead or join an ISR:
// registered, unfenced and not in controlled shutdown.
func eligible(img *metadata.Image, down ShuttingDown) func(int32) bool {
	return func(id int32) bool { return img.IsLive(id) && !inControlledShutdown(img, down, id) }
}

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

// electionChange returns the records of an election that moves p to leader
// and isr: partitionChange's, and the completion of p's reassignment when the
// new ISR holds its whole target (maybeCompleteReassignment). Only an unclean
// election can newly get there (the leader becomes the whole ISR), and no
// AlterPartition follows to complete it: its leader sends none for an ISR
// that does not change. Completion is planned only where it keeps the
// elected leader, so it reads no liveness from img (where a broker being
// fenced still looks live).
func electionChange(img *metadata.Image, p *metadata.Partition, leader int32, isr []int32, down ShuttingDown) []metadata.Record {
	rec := partitionChange(p, leader, isr)
	if rec == nil {
		return nil
	}
	np := p.AfterChange(rec)
	if !slices.Contains(np.TargetReplicas(), leader) {
		return []metadata.Record{rec}
	}
	if done := maybeCompleteReassignment(img, np, down); done != nil {
		return []metadata.Record{rec, done}
	}
	return []metadata.Record{rec}
}

// without returns isr minus id, unless id is its only member: the last member
// of an ISR stays, so that it can lead again without data loss when it returns.
func without(isr []int32, id int32) []int32 {
	if len(isr) <= 1 {
		return isr
	}
	return slices.DeleteFunc(slices.Clone(isr), func(b int32) bool { return b == id })
}

// changesAfterFence moves leadership and ISR membership away from a broker that
// is being fenced: it leaves every ISR (except as the last member), and
// partitions it led elect a new leader from the remaining ISR (unclean only
// where the topic allows it).
func changesAfterFence(img *metadata.Image, id int32, down ShuttingDown) []metadata.Record {
	return leaveISRs(img, id, down, false)
}

// changesAfterLostDir is changesAfterFence for a broker that registered with
// another data directory than its last registration's: its replicas' logs hold
// nothing of what they acknowledged (a replaced disk or machine), so it leaves
// every ISR as the last member too. A partition whose ISR held only it is then
// left leaderless with an empty ISR (unless the topic allows an unclean
// election of another replica), so the empty replica is never elected
// cleanly. Kafka gets the same from directory ids (KIP-858: a replica in a
// directory its broker no longer registers is offline) and, with ELR
// (KIP-966), by not electing a broker back from an unclean shutdown.
func changesAfterLostDir(img *metadata.Image, id int32, down ShuttingDown) []metadata.Record {
	return leaveISRs(img, id, down, true)
}

// leaveISRs takes broker id out of every ISR, as the last member only if
// lastToo, and elects new leaders where it led or nobody leads.
func leaveISRs(img *metadata.Image, id int32, down ShuttingDown, lastToo bool) []metadata.Record {
	ok := eligible(img, down)
	isLive := func(b int32) bool { return b != id && ok(b) }
	var recs []metadata.Record
	for _, t := range img.Topics() {
		for _, p := range t.Partitions {
			if p.Leader != id && !slices.Contains(p.ISR, id) {
				continue
			}
			isr := without(p.ISR, id)
			if lastToo {
				isr = slices.DeleteFunc(slices.Clone(p.ISR), func(b int32) bool { return b == id })
			}
			leader := p.Leader
			if leader == id || leader == metadata.NoLeader {
				leader, isr = ElectLeader(p, isr, isLive, t.Config.UncleanLeaderElectionEnable)
			}
			recs = append(recs, electionChange(img, p, leader, isr, down)...)
		}
	}
	return recs
}

// changesAfterUnfence elects leaders for leaderless partitions now that broker
// id is live again (or registered anew).
func changesAfterUnfence(img *metadata.Image, id int32, down ShuttingDown) []metadata.Record {
	ok := eligible(img, down)
	isLive := func(b int32) bool { return b == id || ok(b) }
	var recs []metadata.Record
	for _, t := range img.Topics() {
		for _, p := range t.Partitions {
			if p.Leader != metadata.NoLeader || !slices.Contains(p.Replicas, id) {
				continue
			}
			leader, isr := ElectLeader(p, p.ISR, isLive, t.Config.UncleanLeaderElectionEnable)
			recs = append(recs, electionChange(img, p, leader, isr, down)...)
		}
	}
	return recs
}

// changesForShutdown hands off what a broker in controlled shutdown holds: each
// partition it leads moves to the next eligible ISR member (never unclean),
// and it leaves every ISR it is not the last member of. A partition with no
// other eligible ISR member stays led by it; those are what a controlled
// shutdown cannot hand off.
func changesForShutdown(img *metadata.Image, id int32, down ShuttingDown) []metadata.Record {
	ok := eligible(img, down)
	isLive := func(b int32) bool { return b != id && ok(b) }
	var recs []metadata.Record
	for _, t := range img.Topics() {
		for _, p := range t.Partitions {
			if !slices.Contains(p.ISR, id) {
				continue
			}
			leader, isr := p.Leader, without(p.ISR, id)
			if p.Leader == id {
				if leader, isr = ElectLeader(p, isr, isLive, false); leader == metadata.NoLeader {
					continue
				}
			}
			if rec := partitionChange(p, leader, isr); rec != nil {
				recs = append(recs, rec)
			}
		}
	}
	return recs
}

// PlanUncleanElections elects leaders for the leaderless partitions of topics
// whose unclean.leader.election.enable is true (a topic override or the
// cluster-wide broker default): the first eligible ISR member if one is back,
// else the first eligible replica outside the ISR, as Kafka's controller does
// on its own. It is what turning the config on does to partitions that lost
// their whole ISR before; fencing and unfencing elect unclean by themselves
// (changesAfterFence, changesAfterUnfence). nil when nothing can be elected.
func PlanUncleanElections(img *metadata.Image, down ShuttingDown) []metadata.Record {
	ok := eligible(img, down)
	var recs []metadata.Record
	for _, t := range img.Topics() {
		if !t.Config.UncleanLeaderElectionEnable {
			continue
		}
		for _, p := range t.Partitions {
			if p.Leader != metadata.NoLeader {
				continue
			}
			leader, isr := ElectLeader(p, p.ISR, ok, true)
			if leader == metadata.NoLeader {
				continue
			}
			recs = append(recs, electionChange(img, p, leader, slices.Clone(isr), down)...)
		}
	}
	return recs
}

// TopicPartitionRef names one partition.
type TopicPartitionRef struct {
	Topic     string
	Partition int32
}

// ElectionType is the kind of election ElectLeaders runs, with Kafka's codes.
type ElectionType int8

// Election types.
const (
	// ElectPreferred moves leadership back to each partition's first replica.
	ElectPreferred ElectionType = 0
	// ElectUnclean gives a leaderless partition a leader, outside the ISR if
	// no ISR member is live: acknowledged records only the ISR held are lost.
	ElectUnclean ElectionType = 1
)

// ElectResult is the outcome of an election for one partition: Err is nil when
// the partition got the leader the election wanted, else a metadata error
// (ErrElectionNotNeeded, ErrPreferredLeaderNotAvailable,
// ErrEligibleLeadersNotAvailable, ErrUnknownTopic).
type ElectResult struct {
	Topic     string
	Partition int32
	Err       error
}

// PlanElectLeaders runs an election of type typ, as Kafka's controller does:
//
//   - ElectPreferred: each partition whose first replica is in the ISR and
//     eligible (live, not in controlled shutdown) but does not lead moves
//     leadership to it, raising the leader epoch and keeping the ISR.
//   - ElectUnclean: each partition without a leader elects the first eligible
//     ISR member in replica order, else the first eligible replica outside the
//     ISR, which then becomes the whole ISR (and completes a reassignment
//     whose whole target it is, in the same batch); the leader epoch rises,
//     so the other replicas truncate to the new leader's log when they
//     return. A partition that has a leader needs no election; one with no
//     eligible replica gets ErrEligibleLeadersNotAvailable. The topic's
//     unclean.leader.election.enable does not matter: the request is the
//     operator's consent.
//
// parts nil means every partition, topic by topic (the ElectLeaders handler
// then leaves out those that needed no election, as Kafka does). Partitions
// are planned in order against the image the earlier ones leave, so a
// repeated partition gets ErrElectionNotNeeded the second time.
func PlanElectLeaders(img *metadata.Image, parts []TopicPartitionRef, typ ElectionType, down ShuttingDown) ([]metadata.Record, []ElectResult) {
	if parts == nil {
		for _, t := range img.Topics() {
			for _, p := range t.Partitions {
				parts = append(parts, TopicPartitionRef{Topic: t.Name, Partition: p.Index})
			}
		}
	}
	elect := electPreferred
	if typ == ElectUnclean {
		elect = electUnclean
	}
	var (
		recs    []metadata.Record
		results []ElectResult
	)
	for _, ref := range parts {
		partRecs, err := elect(img, ref, down)
		if len(partRecs) > 0 {
			next, applyErr := metadata.ApplyAll(img, partRecs)
			if err = applyErr; err == nil {
				img = next
				recs = append(recs, partRecs...)
			}
		}
		results = append(results, ElectResult{Topic: ref.Topic, Partition: ref.Partition, Err: err})
	}
	return recs, results
}

// electedPartition finds the partition of an election, or answers Kafka's
// UNKNOWN_TOPIC_OR_PARTITION with its message for a missing topic or partition.
func electedPartition(img *metadata.Image, ref TopicPartitionRef) (*metadata.Partition, error) {
	if img.Topic(ref.Topic) == nil {
		return nil, metadata.KafkaText(metadata.ErrUnknownTopic, "No such topic as %s", ref.Topic)
	}
	p := img.Partition(ref.Topic, ref.Partition)
	if p == nil {
		return nil, metadata.KafkaText(metadata.ErrUnknownTopic, "No such partition as %s-%d", ref.Topic, ref.Partition)
	}
	return p, nil
}

func electPreferred(img *metadata.Image, ref TopicPartitionRef, down ShuttingDown) ([]metadata.Record, error) {
	p, err := electedPartition(img, ref)
	if err != nil {
		return nil, err
	}
	preferred := p.Replicas[0]
	switch {
	case p.Leader == preferred:
		return nil, metadata.ErrElectionNotNeeded
	case !slices.Contains(p.ISR, preferred) || !eligible(img, down)(preferred):
		return nil, fmt.Errorf("%w: %s-%d: broker %d is not an eligible member of isr %v",
			metadata.ErrPreferredLeaderNotAvailable, ref.Topic, ref.Partition, preferred, p.ISR)
	}
	return []metadata.Record{partitionChange(p, preferred, p.ISR)}, nil
}

func electUnclean(img *metadata.Image, ref TopicPartitionRef, down ShuttingDown) ([]metadata.Record, error) {
	p, err := electedPartition(img, ref)
	if err != nil {
		return nil, err
	}
	if p.Leader != metadata.NoLeader {
		return nil, metadata.ErrElectionNotNeeded
	}
	leader, isr := ElectLeader(p, p.ISR, eligible(img, down), true)
	if leader == metadata.NoLeader {
		return nil, fmt.Errorf("%w: %s-%d: no replica of %v is live",
			metadata.ErrEligibleLeadersNotAvailable, ref.Topic, ref.Partition, p.Replicas)
	}
	return electionChange(img, p, leader, slices.Clone(isr), down), nil
}
