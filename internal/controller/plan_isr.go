package controller

import (
	"fmt"
	"slices"

	"github.com/strata-stream/strata/internal/metadata"
)

// AlterPartitionRequest is an ISR change proposed by a partition's leader
// (Kafka's AlterPartition, one partition).
type AlterPartitionRequest struct {
	// BrokerID and BrokerEpoch: the leader's current registration.
	BrokerID    int32
	BrokerEpoch int64
	TopicID     metadata.UUID
	Partition   int32
	// LeaderEpoch and PartitionEpoch: the partition state the change is based on.
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []int32
	// NewISRBrokerEpochs, when set, holds the broker epoch of each member of
	// NewISR as the leader saw it (AlterPartition v3, KIP-903; -1: unchecked).
	NewISRBrokerEpochs []int64
}

// PlanAlterPartition validates an ISR change against img (KIP-497, KIP-841 and
// KIP-903 semantics, with the checks and codes of Kafka 4.4's controller) and
// returns the PartitionChangeRecord that applies it, with the partition as it
// will be once applied: the same leader and leader epoch, the new ISR, the
// partition epoch raised by one (PlanAlterPartitions with one change). An ISR
// equal to the current one as a set changes nothing and returns the current
// partition. An ISR that now holds every target replica of a reassignment
// completes it in the same batch (PlanAlterReassignments), and the partition
// returned is the one after that; when the completion moves the leadership
// away from the broker (it was a replica the reassignment removes), the change
// is planned all the same and also answered ErrNewLeaderElected, as Kafka's
// controller answers it (FENCED_LEADER_EPOCH before AlterPartition v2): the
// broker may not read the answer as an ISR it leads with. (A resignation,
// which Kafka refuses, is answered with the partition, completed or not.)
//
// A leader may leave itself out of the ISR to resign (Strata's own extension:
// its log failed and takes no writes until the broker restarts, where Kafka
// would take the whole log directory offline and refuse such an ISR with
// INVALID_REQUEST): the first eligible replica of the new ISR in preference
// order leads at the next leader epoch, and with none the change is refused
// (ErrIneligibleReplica); a resignation may only remove members
// (ErrInvalidRequest). Checks, in Kafka's order:
//
//  1. the broker's registration (ErrStaleBrokerEpoch, also for an unknown
//     broker; PlanAlterPartitions refuses the whole request);
//  2. the partition exists (ErrUnknownTopicID, ErrUnknownTopic);
//  3. LeaderEpoch and PartitionEpoch are not newer than the image's
//     (ErrNotController: the leader has seen metadata this controller has
//     not, so it is likely no longer the active one);
//  4. LeaderEpoch is the current one (ErrFencedLeaderEpoch);
//  5. the broker leads the partition (ErrInvalidRequest);
//  6. PartitionEpoch is the current one (ErrStalePartitionEpoch);
//  7. NewISR holds distinct replicas of the partition and is not empty
//     (ErrInvalidRequest);
//  8. every member of NewISR, kept or added, is registered, unfenced, not in
//     controlled shutdown (in down or marked in img) and at the broker epoch the
//     leader names for it, if any (ErrIneligibleReplica; KIP-903: the leader
//     saw the fetches of an earlier registration). One exception to Kafka's
//     rule: the leader itself may be in controlled shutdown, as Strata keeps
//     such a broker leading the partitions it could not hand off, and growing
//     their ISR is what lets the hand-off happen.
func PlanAlterPartition(img *metadata.Image, req AlterPartitionRequest, down ShuttingDown) ([]metadata.Record, *metadata.Partition, error) {
	recs, res, err := PlanAlterPartitions(img, []AlterPartitionRequest{req}, down)
	if err != nil {
		return nil, nil, err
	}
	return recs, res[0].Partition, res[0].Err
}

// AlterPartitionResult answers one partition of an AlterPartition: the
// partition as the change leaves it, or why the change was refused. With
// ErrNewLeaderElected the change was not refused: Partition is as it leaves
// it.
type AlterPartitionResult struct {
	Partition *metadata.Partition
	Err       error
}

// PlanAlterPartitions plans the ISR changes of one AlterPartition request, of
// any number of partitions, as one batch of records: the controller commits a
// leader's whole request in one proposal, as Kafka's does, not one per
// partition. A request from a broker that is not registered at the epoch it
// names is refused whole (err, ErrStaleBrokerEpoch, as Kafka answers it at the
// top of the response). Otherwise each change is checked against img as
// PlanAlterPartition says, on its own: a refused change leaves the others to
// apply. A partition named a second time is refused (ErrInvalidRequest).
// results[i] answers reqs[i].
func PlanAlterPartitions(img *metadata.Image, reqs []AlterPartitionRequest, down ShuttingDown) (recs []metadata.Record, results []AlterPartitionResult, err error) {
	for _, req := range reqs {
		if _, err := checkBrokerEpoch(img, req.BrokerID, req.BrokerEpoch); err != nil {
			return nil, nil, err
		}
	}
	type partitionKey struct {
		topic metadata.UUID
		index int32
	}
	results = make([]AlterPartitionResult, len(reqs))
	plans := make([][]metadata.Record, len(reqs))
	seen := make(map[partitionKey]bool, len(reqs))
	for i, req := range reqs {
		k := partitionKey{req.TopicID, req.Partition}
		if seen[k] {
			results[i].Err = fmt.Errorf("%w: partition %d of topic %s named twice", metadata.ErrInvalidRequest, req.Partition, req.TopicID)
			continue
		}
		seen[k] = true
		plans[i], results[i].Partition, results[i].Err = planAlterPartition(img, req, down)
	}
	recs = slices.Concat(plans...)
	if _, err := metadata.ApplyAll(img, recs); err == nil {
		return recs, results, nil
	}
	// Planning missed a check that applying makes (such as a partition epoch
	// at its limit): apply the changes one at a time, refusing only those that
	// fail, so that one bad partition does not sink the request.
	recs, cur := recs[:0], img
	for i, plan := range plans {
		if len(plan) == 0 {
			continue
		}
		next, err := metadata.ApplyAll(cur, plan)
		if err != nil {
			results[i] = AlterPartitionResult{Err: err}
			continue
		}
		cur, recs = next, append(recs, plan...)
	}
	return recs, results, nil
}

// planAlterPartition checks and plans one change of a registered broker
// against img, without applying it.
func planAlterPartition(img *metadata.Image, req AlterPartitionRequest, down ShuttingDown) ([]metadata.Record, *metadata.Partition, error) {
	t := img.TopicByID(req.TopicID)
	if t == nil {
		return nil, nil, fmt.Errorf("%w: %s", metadata.ErrUnknownTopicID, req.TopicID)
	}
	if req.Partition < 0 || int(req.Partition) >= len(t.Partitions) {
		return nil, nil, fmt.Errorf("%w: %s-%d", metadata.ErrUnknownTopic, t.Name, req.Partition)
	}
	p := t.Partitions[req.Partition]
	name := fmt.Sprintf("%s-%d", t.Name, p.Index)
	switch {
	case req.LeaderEpoch > p.LeaderEpoch:
		return nil, nil, fmt.Errorf("%w: %s: leader epoch %d is newer than this controller's %d",
			ErrNotController, name, req.LeaderEpoch, p.LeaderEpoch)
	case req.PartitionEpoch > p.PartitionEpoch:
		return nil, nil, fmt.Errorf("%w: %s: partition epoch %d is newer than this controller's %d",
			ErrNotController, name, req.PartitionEpoch, p.PartitionEpoch)
	case req.LeaderEpoch < p.LeaderEpoch:
		return nil, nil, fmt.Errorf("%w: %s: leader epoch %d, current %d",
			metadata.ErrFencedLeaderEpoch, name, req.LeaderEpoch, p.LeaderEpoch)
	case req.BrokerID != p.Leader:
		return nil, nil, fmt.Errorf("%w: %s: broker %d is not the leader (%d)",
			metadata.ErrInvalidRequest, name, req.BrokerID, p.Leader)
	case req.PartitionEpoch < p.PartitionEpoch:
		return nil, nil, fmt.Errorf("%w: %s: partition epoch %d, current %d",
			metadata.ErrStalePartitionEpoch, name, req.PartitionEpoch, p.PartitionEpoch)
	}
	for i, id := range req.NewISR {
		if !slices.Contains(p.Replicas, id) || slices.Contains(req.NewISR[:i], id) {
			return nil, nil, fmt.Errorf("%w: %s: isr %v with replicas %v",
				metadata.ErrInvalidRequest, name, req.NewISR, p.Replicas)
		}
	}
	if len(req.NewISR) == 0 {
		return nil, nil, fmt.Errorf("%w: %s: empty isr", metadata.ErrInvalidRequest, name)
	}
	for i, id := range req.NewISR {
		epoch := int64(-1)
		if i < len(req.NewISRBrokerEpochs) {
			epoch = req.NewISRBrokerEpochs[i]
		}
		if why := ineligibleForISR(img, down, id, epoch, id == p.Leader); why != "" {
			return nil, nil, fmt.Errorf("%w: %s: broker %d in the new isr %v is %s",
				metadata.ErrIneligibleReplica, name, id, req.NewISR, why)
		}
	}
	if len(req.NewISR) == len(p.ISR) && !slices.ContainsFunc(req.NewISR, func(id int32) bool { return !slices.Contains(p.ISR, id) }) {
		return nil, p, nil
	}
	leader := p.Leader
	if !slices.Contains(req.NewISR, p.Leader) {
		if slices.ContainsFunc(req.NewISR, func(id int32) bool { return !slices.Contains(p.ISR, id) }) {
			return nil, nil, fmt.Errorf("%w: %s: leader %d resigns and adds to isr %v at once",
				metadata.ErrInvalidRequest, name, p.Leader, p.ISR)
		}
		// Every member is eligible (checked above): the first in preference
		// order takes over.
		leader, _ = ElectLeader(p, req.NewISR, eligible(img, down), false)
	}
	change := partitionChange(p, leader, slices.Clone(req.NewISR))
	recs := []metadata.Record{change}
	np := p.AfterChange(change)
	// Only brokers' liveness is read from img here, which no change alters.
	if done := maybeCompleteReassignment(img, np, down); done != nil {
		recs = append(recs, done)
		np = np.AfterReassignment(done)
		if leader == p.Leader && np.Leader != leader { // not a resignation: answered with the partition
			return recs, np, fmt.Errorf("%w: %s: completing its reassignment moved the leadership from %d to %d",
				metadata.ErrNewLeaderElected, name, req.BrokerID, np.Leader)
		}
	}
	return recs, np, nil
}

// ineligibleForISR says why broker id may not be a member of a new ISR, or
// "" if it may: Kafka's reasons, in Kafka's order. epoch is the broker epoch
// the leader saw it fetch with (-1: unchecked). isLeader exempts the
// partition's leader from the controlled-shutdown rule (PlanAlterPartition).
func ineligibleForISR(img *metadata.Image, down ShuttingDown, id int32, epoch int64, isLeader bool) string {
	b := img.Broker(id)
	switch {
	case b == nil:
		return "not registered"
	case inControlledShutdown(img, down, id) && !isLeader:
		return "shutting down"
	case b.Fenced:
		return "fenced"
	case epoch != -1 && epoch != b.Epoch:
		return fmt.Sprintf("at broker epoch %d, its registration's is %d", epoch, b.Epoch)
	}
	return ""
}
