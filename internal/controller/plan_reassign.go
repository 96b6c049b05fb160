package controller

import (
	"fmt"
	"slices"

	"github.com/strata-stream/strata/internal/metadata"
)

// Reassignment is one partition's part of an AlterPartitionReassignments
// request (KIP-455).
type Reassignment struct {
	Topic     string
	Partition int32
	// Replicas is the target replica set, preferred leader first; nil cancels
	// the partition's ongoing reassignment.
	Replicas []int32
	// KeepReplicationFactor refuses a target with another number of replicas
	// than the partition has (AllowReplicationFactorChange false, KIP-860).
	KeepReplicationFactor bool
}

// PlanAlterReassignments starts, replaces or cancels partition reassignments,
// each planned against the image the earlier ones leave; errs[i] is the
// outcome of reqs[i] (nil: accepted).
//
// A reassignment works as in Kafka:
//
//  1. Start: Replicas becomes the target followed by the current replicas
//     outside it; Adding is target minus current, Removing current minus
//     target. Leader and ISR stay. The adding replicas open the partition and
//     fetch from the leader as followers.
//  2. The leader adds each adding replica to the ISR once it has caught up
//     (AlterPartition). When the ISR holds the whole target, the same batch
//     completes the reassignment (maybeCompleteReassignment).
//  3. Complete: Replicas becomes the target, the ISR keeps its target members,
//     and if the leader is being removed the first eligible target replica in
//     the ISR leads at the next leader epoch. The removed replicas delete
//     their copies when they apply the image.
//
// A target the ISR already holds completes at once. A new target while one is
// in progress is measured against the current replicas (adding ones
// included). Cancelling goes back to the original replicas (Replicas minus
// Adding) by the same completion step; with no original replica in sync only
// where the topic allows an unclean election (endReassignment). Errors:
// ErrUnknownTopic, ErrInvalidReplicaAssignment (empty, repeated or
// unregistered replicas; a cancel with no original replica in sync and
// unclean elections off), ErrInvalidReplicationFactor
// (KeepReplicationFactor), ErrNoReassignmentInProgress (cancel of none).
func PlanAlterReassignments(img *metadata.Image, reqs []Reassignment, down ShuttingDown) ([]metadata.Record, []error) {
	var all []metadata.Record
	errs := make([]error, len(reqs))
	for i, req := range reqs {
		recs, err := planReassignment(img, req, down)
		if err == nil && len(recs) > 0 {
			var next *metadata.Image
			if next, err = metadata.ApplyAll(img, recs); err == nil {
				img = next
				all = append(all, recs...)
			}
		}
		errs[i] = err
	}
	return all, errs
}

func planReassignment(img *metadata.Image, req Reassignment, down ShuttingDown) ([]metadata.Record, error) {
	p := img.Partition(req.Topic, req.Partition)
	if p == nil {
		return nil, fmt.Errorf("%w: %s-%d", metadata.ErrUnknownTopic, req.Topic, req.Partition)
	}
	name := fmt.Sprintf("%s-%d", req.Topic, req.Partition)
	if req.Replicas == nil {
		if !p.Reassigning() {
			return nil, fmt.Errorf("%w: %s", metadata.ErrNoReassignmentInProgress, name)
		}
		unclean := img.Topic(req.Topic).Config.UncleanLeaderElectionEnable
		rec, err := endReassignment(img, p, p.OriginalReplicas(), down, unclean)
		if err != nil {
			return nil, metadata.KafkaText(metadata.ErrInvalidReplicaAssignment,
				"Unable to revert partition assignment for %s:%d because it would require an unclean leader election.", req.Topic, req.Partition)
		}
		return []metadata.Record{rec}, nil
	}
	target := req.Replicas
	if err := checkReplicas(img, target); err != nil {
		return nil, err
	}
	if req.KeepReplicationFactor && len(target) != len(p.OriginalReplicas()) {
		return nil, fmt.Errorf("%w: %s: %d replicas, the partition has %d",
			metadata.ErrInvalidReplicationFactor, name, len(target), len(p.OriginalReplicas()))
	}
	if !p.Reassigning() && slices.Equal(target, p.Replicas) {
		return nil, nil
	}
	var adding, removing []int32
	for _, id := range target {
		if !slices.Contains(p.Replicas, id) {
			adding = append(adding, id)
		}
	}
	for _, id := range p.Replicas {
		if !slices.Contains(target, id) {
			removing = append(removing, id)
		}
	}
	start := &metadata.ReassignmentRecord{
		TopicID: p.TopicID, Partition: p.Index, BasePartitionEpoch: p.PartitionEpoch,
		Replicas: append(slices.Clone(target), removing...), Adding: adding, Removing: removing,
		ISR: p.ISR, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
	}
	recs := []metadata.Record{start}
	next, err := metadata.ApplyAll(img, recs)
	if err != nil {
		return nil, err
	}
	if done := maybeCompleteReassignment(next, next.Partition(req.Topic, req.Partition), down); done != nil {
		recs = append(recs, done)
	}
	return recs, nil
}

// maybeCompleteReassignment returns the record that completes p's
// reassignment once its ISR holds every target replica, or nil.
func maybeCompleteReassignment(img *metadata.Image, p *metadata.Partition, down ShuttingDown) *metadata.ReassignmentRecord {
	if !p.Reassigning() {
		return nil
	}
	target := p.TargetReplicas()
	for _, id := range target {
		if !slices.Contains(p.ISR, id) {
			return nil
		}
	}
	rec, err := endReassignment(img, p, target, down, false)
	if err != nil {
		return nil // unreachable: the ISR holds the whole target
	}
	return rec
}

// endReassignment moves p to the replica set final, ending its reassignment:
// the ISR keeps its members in final, and a leader outside final hands over
// to the first eligible replica of final in the new ISR (none: no leader).
// With no member of final in the ISR it fails, unless unclean: then, as
// Kafka's PartitionReassignmentRevert and unclean election, the first replica
// of final is the ISR, and if it is not eligible the first eligible replica
// of final leads as the ISR's only member.
//
// Electing a leader (also for a partition that had none) moves to the next
// leader epoch, and so does removing a replica even when the leader stays, as
// Kafka's controller does: the leader then fences every fetch the
// removed replica sent before (FENCED_LEADER_EPOCH), one still long-polling
// included. Without it such a fetch, answered after the replica was added
// back empty at the same epoch, credited the new replica with the old one's
// log end, and it joined the ISR holding nothing.
func endReassignment(img *metadata.Image, p *metadata.Partition, final []int32, down ShuttingDown, unclean bool) (*metadata.ReassignmentRecord, error) {
	var isr []int32
	for _, id := range p.ISR {
		if slices.Contains(final, id) {
			isr = append(isr, id)
		}
	}
	// Only a revert that restarts the ISR elects uncleanly, as Kafka's
	// PartitionReassignmentRevert: an ISR left with offline members waits for
	// them (or for the unclean election duty) like any other partition.
	uncleanRevert := false
	if len(isr) == 0 {
		if !unclean {
			return nil, fmt.Errorf("%w: no replica of %v is in sync (isr %v)", metadata.ErrInvalidReplicaAssignment, final, p.ISR)
		}
		isr, uncleanRevert = final[:1], true
	}
	leader, epoch := p.Leader, p.LeaderEpoch
	if !slices.Contains(isr, leader) {
		leader, isr = ElectLeader(&metadata.Partition{Replicas: final}, isr, eligible(img, down), uncleanRevert)
	}
	if leader != p.Leader || slices.ContainsFunc(p.Replicas, func(id int32) bool { return !slices.Contains(final, id) }) {
		epoch++ // a new leader, as every leader change, or a removal
	}
	return &metadata.ReassignmentRecord{
		TopicID: p.TopicID, Partition: p.Index, BasePartitionEpoch: p.PartitionEpoch,
		Replicas: slices.Clone(final), ISR: isr, Leader: leader, LeaderEpoch: epoch,
	}, nil
}

// PartitionReassignment is one ongoing reassignment (ListPartitionReassignments).
type PartitionReassignment struct {
	Topic                      string
	Partition                  int32
	Replicas, Adding, Removing []int32
}

// ListReassignments returns the ongoing reassignments of the given topics
// (every topic when topics is nil; partitions nil: all of the topic's), in
// topic and partition order. Unknown topics and partitions, and partitions
// not being reassigned, are left out.
func ListReassignments(img *metadata.Image, topics map[string][]int32) []PartitionReassignment {
	var out []PartitionReassignment
	for _, t := range img.Topics() {
		parts, asked := topics[t.Name]
		if topics != nil && !asked {
			continue
		}
		for _, p := range t.Partitions {
			if !p.Reassigning() || parts != nil && !slices.Contains(parts, p.Index) {
				continue
			}
			out = append(out, PartitionReassignment{
				Topic: t.Name, Partition: p.Index, Replicas: p.Replicas, Adding: p.Adding, Removing: p.Removing,
			})
		}
	}
	return out
}
