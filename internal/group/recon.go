package group

import "maps"

// recon is one member's step of KIP-848's revoke-first reconciliation (Kafka's
// CurrentAssignmentBuilder), shared by KIP-848 consumer members (consumer.go),
// where the units are partitions, and streams members (streams.go), where they
// are active tasks. It works on pointers to the member's fields; it runs with
// the group's mutex held.
type recon struct {
	id               string
	epoch, prevEpoch *int32
	state            *memberState
	// assigned maps each unit the member owns to the member epoch it got it in;
	// revoking holds units it still owns but must give up.
	assigned map[topicPartition]int32
	revoking *partSet
	// owners maps each unit to the member owning (or revoking) it, group-wide.
	owners      map[topicPartition]string
	targetEpoch int32
	target      partSet // the member's target assignment
	// armRevoke starts the member's deadline to revoke; stopRevoke ends it.
	armRevoke, stopRevoke func()
}

// reconcile moves the member towards its target given what its heartbeat says
// it owns (nil: it did not say), and reports whether the member's epochs,
// state or units changed.
func (r recon) reconcile(owned partSet) bool {
	switch *r.state {
	case memberStable:
		return *r.epoch != r.targetEpoch && r.next(owned)
	case memberUnrevoked:
		if owned == nil {
			return false
		}
		for tp := range *r.revoking {
			if owned.has(tp) {
				return false // still revoking
			}
		}
		releaseOwned(r.owners, r.id, *r.revoking)
		*r.revoking = nil
		r.stopRevoke()
		r.next(owned)
		return true
	case memberUnreleased:
		return r.next(owned)
	}
	return false
}

// next is Kafka's computeNextAssignment: revoke first, then move to the target
// epoch with every target unit nobody else owns. Units to revoke that the
// heartbeat shows the member no longer owns (owned non-nil and holding none of
// them) are free at once, without a revocation step. It reports whether the
// member's epochs, state or units changed.
func (r recon) next(owned partSet) bool {
	revoke := partSet{}
	stillOwned := owned == nil
	for tp := range r.assigned {
		if !r.target.has(tp) {
			revoke[tp] = struct{}{}
			stillOwned = stillOwned || owned.has(tp)
		}
	}
	for tp := range revoke {
		delete(r.assigned, tp)
	}
	if len(revoke) > 0 && stillOwned {
		if *r.revoking == nil {
			*r.revoking = partSet{}
		}
		maps.Copy(*r.revoking, revoke)
		*r.state = memberUnrevoked
		r.armRevoke()
		return true
	}
	releaseOwned(r.owners, r.id, revoke)
	changed := *r.epoch != r.targetEpoch || len(revoke) > 0
	if changed {
		*r.prevEpoch, *r.epoch = *r.epoch, r.targetEpoch
	}
	state := memberStable
	for _, tp := range r.target.sorted() {
		if _, ok := r.assigned[tp]; ok {
			continue
		}
		if owner, ok := r.owners[tp]; ok && owner != r.id {
			state = memberUnreleased
			continue
		}
		r.assigned[tp] = *r.epoch
		r.owners[tp] = r.id
		changed = true
	}
	changed = changed || *r.state != state
	*r.state = state
	return changed
}

// releaseOwned frees the units of ps that member id owns.
func releaseOwned(owners map[topicPartition]string, id string, ps partSet) {
	for tp := range ps {
		if owners[tp] == id {
			delete(owners, tp)
		}
	}
}

// ownedSet is the set of units an assigned map holds.
func ownedSet(assigned map[topicPartition]int32) partSet {
	out := make(partSet, len(assigned))
	for tp := range assigned {
		out[tp] = struct{}{}
	}
	return out
}
