package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactional offset commits (TxnOffsetCommit, KIP-98/447). A producer in a
// transaction commits a group's offsets as offset commit records in a
// transactional batch of its own producer id on the group's __consumer_offsets
// partition. They stay pending, invisible to OffsetFetch, until the
// transaction's marker lands on that partition: CompleteTxnOffsets then applies
// them (commit) or drops them (abort). A replay does the same where the log
// holds the marker, as Kafka's coordinator replays its log: a transaction's
// offset commit (a Txn record) makes its group at once, which stays whatever
// the marker, and an offset's tombstone deletes the open transactions' commits
// of it; transactions without a marker stay pending. As in Kafka, a committed
// offset keeps the log offset of its record, and a transaction's commit
// replaces the group's offset only if it was written after it: a plain commit
// written after the transactional one stays, and of two transactions' commits
// the later written wins whatever the order of their markers.

// TxnOffsetStore is an OffsetStore that can also append records as one
// transactional batch of a producer (the broker's offsets.Store).
type TxnOffsetStore interface {
	AppendTxn(ctx context.Context, partition, leaderEpoch int32, producerID int64, producerEpoch int16, records []Record) (first int64, err error)
}

// TxnOffsetCommit serves TxnOffsetCommit v0-v6 (topics by name: v6's ids are
// resolved by the handlers). With a member id or generation
// (v3+) the member and generation are checked as for OffsetCommit; without them
// the commit is accepted whatever the group's state (older producers do not know
// the group's generation), except by a share group, which has no committed
// offsets (GROUP_ID_NOT_FOUND). The records are appended in their turn among the
// group's writes (txnCommitLocked) and the answer comes once they are; the
// store refuses a producer epoch older than the producer's on the partition
// (INVALID_PRODUCER_EPOCH), so a fenced zombie's offsets never become pending.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	setAll := func(code int16) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == 0 {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
	}
	if _, ok := c.store.(TxnOffsetStore); !ok {
		setAll(kerr.CoordinatorNotAvailable.Code)
		return resp
	}
	p, code := c.partitionOf(req.Group)
	if code != 0 {
		setAll(code)
		return resp
	}
	// Outside group management (generation -1) a commit creates the group, a
	// simple one, as Kafka's does: its pending offsets can then be deleted.
	g := p.lookup(c, req.Group, req.Generation < 0)
	if g == nil {
		setAll(txnCommitCode(kerr.GroupIDNotFound.Code, req.Version))
		return resp
	}
	done := make(chan error, 1)
	var queued bool
	g.withLock(func() { code, queued = g.txnCommitLocked(req, resp, done) })
	if code != 0 {
		setAll(code)
		return resp
	}
	if !queued {
		return resp
	}
	c.flush(g)
	select {
	case err := <-done:
		setAll(AppendErrorCode(err))
	case <-ctx.Done():
		setAll(kerr.RequestTimedOut.Code)
	}
	return resp
}

// txnCommitLocked checks a TxnOffsetCommit and queues its offset commits, to
// be appended in the producer's transaction in their turn among the group's
// writes, answering the partitions it refuses in resp. Until appended they
// count as commits in flight (pendingCommits), as Kafka applies them at once,
// so a deletion meanwhile deletes them too; then they are pending until the
// transaction's marker. A share group takes none: it has no committed offsets,
// and Kafka's ShareGroup answers every commit GROUP_ID_NOT_FOUND, at every
// version. It returns a group-level error code, or whether it queued
// anything; done receives the append's result.
func (g *group) txnCommitLocked(req *kmsg.TxnOffsetCommitRequest, resp *kmsg.TxnOffsetCommitResponse, done chan<- error) (int16, bool) {
	switch {
	case g.state == stateDead:
		return kerr.CoordinatorNotAvailable.Code, false
	case g.sg != nil:
		return kerr.GroupIDNotFound.Code, false
	}
	if req.Generation >= 0 || req.MemberID != "" || deref(req.InstanceID) != "" {
		// As an OffsetCommit of the newest version: a KIP-848 member names its
		// epoch. An older epoch, which OffsetCommit checks per partition
		// (KIP-1251), is refused here as a whole.
		commit := &kmsg.OffsetCommitRequest{Version: 9, Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID}
		code, perPartition := g.validateCommitLocked(commit)
		if perPartition {
			code = kerr.StaleMemberEpoch.Code
		}
		if code != 0 {
			return txnCommitCode(code, req.Version), false
		}
	}
	now := g.c.now()
	var (
		recs []Record
		tps  []topicPartition
		offs []offsetCommit
	)
	for ti, t := range req.Topics {
		for pi, pt := range t.Partitions {
			meta := deref(pt.Metadata)
			if len(meta) > g.c.cfg.OffsetMetadataMaxBytes {
				resp.Topics[ti].Partitions[pi].ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			tp := topicPartition{t.Topic, pt.Partition}
			o := offsetCommit{offset: pt.Offset, leaderEpoch: -1, metadata: meta, commitTime: now}
			if req.Version >= 2 {
				o.leaderEpoch = pt.LeaderEpoch
			}
			tps, offs = append(tps, tp), append(offs, o)
			recs = append(recs, Record{Key: offsetKey(req.Group, tp), Value: offsetValue(o)})
			g.pendingCommits[tp]++
		}
	}
	if len(recs) == 0 {
		if !g.writing {
			g.dropFreshLocked()
		}
		return 0, false
	}
	txn := &producer{req.ProducerID, req.ProducerEpoch}
	g.writeQ = append(g.writeQ, write{records: recs, txn: txn, done: func(first int64, err error) {
		g.landedLocked(tps)
		switch {
		case err != nil:
			g.dropFreshLocked()
		case !g.unloaded:
			g.p.addTxnOffsets(txn.id, g.id, tps, offs, first)
		}
		done <- err
	}})
	return 0, true
}

// txnCommitCode is how a TxnOffsetCommit of version answers a group's absence
// or a member's check: before v6 (KIP-1319) GROUP_ID_NOT_FOUND and
// STALE_MEMBER_EPOCH are ILLEGAL_GENERATION, as Kafka 4.4 answers them.
func txnCommitCode(code, version int16) int16 {
	if version < 6 && (code == kerr.GroupIDNotFound.Code || code == kerr.StaleMemberEpoch.Code) {
		return kerr.IllegalGeneration.Code
	}
	return code
}

// txnOffsets are pending transactional offset commits: producer id -> group ->
// partition -> offset.
type txnOffsets map[int64]map[string]map[topicPartition]offsetCommit

// add notes one pending commit, making the maps as needed.
func (t *txnOffsets) add(pid int64, groupID string, tp topicPartition, o offsetCommit) {
	if *t == nil {
		*t = make(txnOffsets)
	}
	byGroup := (*t)[pid]
	if byGroup == nil {
		byGroup = make(map[string]map[topicPartition]offsetCommit)
		(*t)[pid] = byGroup
	}
	offs := byGroup[groupID]
	if offs == nil {
		offs = make(map[topicPartition]offsetCommit)
		byGroup[groupID] = offs
	}
	offs[tp] = o
}

// pending returns the partitions of group groupID with a commit pending, and
// whether a transaction is open for the group: one with commits of it, even
// if they were all deleted since (Kafka's openTransactionsByGroup).
func (t txnOffsets) pending(groupID string) (tps map[topicPartition]bool, open bool) {
	tps = map[topicPartition]bool{}
	for _, byGroup := range t {
		offs, ok := byGroup[groupID]
		open = open || ok
		for tp := range offs {
			tps[tp] = true
		}
	}
	return tps, open
}

// drop deletes the pending commits of group groupID's partitions tps from
// every transaction, as the tombstones of those offsets do in Kafka: their
// markers then apply nothing to them. The transactions stay open for the
// group until their markers.
func (t txnOffsets) drop(groupID string, tps []topicPartition) {
	for _, byGroup := range t {
		if offs := byGroup[groupID]; offs != nil {
			for _, tp := range tps {
				delete(offs, tp)
			}
		}
	}
}

// addTxnOffsets notes producer pid's pending commits of group groupID: offs[i]
// of tps[i], whose records are in the log from offset first on.
func (p *partition) addTxnOffsets(pid int64, groupID string, tps []topicPartition, offs []offsetCommit, first int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, tp := range tps {
		offs[i].recordOffset = first + int64(i)
		p.txnOffsets.add(pid, groupID, tp, offs[i])
	}
}

// txnPending is txnOffsets.pending under the partition's lock.
func (p *partition) txnPending(groupID string) (map[topicPartition]bool, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.txnOffsets.pending(groupID)
}

// dropTxnOffsets is txnOffsets.drop under the partition's lock.
func (p *partition) dropTxnOffsets(groupID string, tps []topicPartition) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.txnOffsets.drop(groupID, tps)
}

// CompleteTxnOffsets is called once producer pid's transaction marker is
// committed on partition of __consumer_offsets: the transaction's pending offset
// commits become the groups' committed offsets (commit), each unless the group's
// offset of its partition was written later in the log (Kafka's
// replayEndTransactionMarker), or are dropped (abort).
func (c *Coordinator) CompleteTxnOffsets(partition int32, pid int64, commit bool) {
	c.mu.RLock()
	p := c.mu.partitions[partition]
	c.mu.RUnlock()
	if p == nil {
		return // not loaded here: a replay will see the marker
	}
	p.mu.Lock()
	pending := p.txnOffsets[pid]
	delete(p.txnOffsets, pid)
	p.mu.Unlock()
	if !commit {
		return
	}
	for groupID, offs := range pending {
		if len(offs) == 0 {
			continue // deleted since: the group may be gone too
		}
		g := p.lookup(c, groupID, true)
		g.withLock(func() {
			if !g.unloaded {
				for tp, o := range offs {
					putOffset(g.offsets, tp, o)
				}
			}
		})
	}
}

// applyTxn folds an offset commit of a transaction into the replayed state:
// pending until the transaction's marker, it makes its group at once, as
// Kafka's replay does, whatever the marker.
func (r *replayed) applyTxn(rec Record, k decodedKey) error {
	if k.kind != kindOffset || rec.Value == nil {
		r.skipped++
		return nil
	}
	o, err := decodeOffsetValue(rec.Value)
	if err != nil {
		return err
	}
	o.recordOffset = rec.Offset
	r.committed[k.group] = true
	r.txnOffsets.add(rec.ProducerID, k.group, k.tp, o)
	return nil
}

// endTxn replays producer pid's transaction marker as CompleteTxnOffsets
// applies it: a commit makes the transaction's pending commits the groups'
// offsets, each unless the group's was written later; an abort drops them.
func (r *replayed) endTxn(pid int64, commit bool) {
	pending := r.txnOffsets[pid]
	delete(r.txnOffsets, pid)
	if !commit {
		return
	}
	for id, offs := range pending {
		for tp, o := range offs {
			putOffset(r.groupOffsets(id), tp, o)
		}
	}
}

// markUnstable answers UNSTABLE_OFFSET_COMMIT (offset -1) for the partitions of
// an OffsetFetch with RequireStable (v7+) that have a transactional commit
// pending: the client retries until the transaction ends (KIP-447).
func (c *Coordinator) markUnstable(req *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse) {
	if req.Version < 7 || !req.RequireStable {
		return
	}
	mark := func(pending map[topicPartition]bool, tp topicPartition, code *int16, offset *int64, epoch *int32) {
		if pending[tp] && *code == 0 {
			*code, *offset, *epoch = kerr.UnstableOffsetCommit.Code, -1, -1
		}
	}
	if req.Version < 8 {
		pending := c.pendingTxnOffsets(req.Group)
		for _, t := range resp.Topics {
			for i := range t.Partitions {
				p := &t.Partitions[i]
				mark(pending, topicPartition{t.Topic, p.Partition}, &p.ErrorCode, &p.Offset, &p.LeaderEpoch)
			}
		}
		return
	}
	for _, g := range resp.Groups {
		pending := c.pendingTxnOffsets(g.Group)
		for _, t := range g.Topics {
			for i := range t.Partitions {
				p := &t.Partitions[i]
				mark(pending, topicPartition{t.Topic, p.Partition}, &p.ErrorCode, &p.Offset, &p.LeaderEpoch)
			}
		}
	}
}

// pendingTxnOffsets returns the partitions of group groupID with a transactional
// commit pending.
func (c *Coordinator) pendingTxnOffsets(groupID string) map[topicPartition]bool {
	p, code := c.partitionOf(groupID)
	if code != 0 {
		return nil
	}
	tps, _ := p.txnPending(groupID)
	return tps
}
