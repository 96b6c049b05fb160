package group

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit serves OffsetCommit v2-v9. Members of a group commit with their member
// id and generation; a group without members also accepts "simple" commits
// (generation -1) from consumers that assign partitions themselves. The
// answer comes once the records are appended (OffsetStore.Append returned); if ctx
// ends first the commit still completes and the response says REQUEST_TIMED_OUT.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	c.commit(ctx, req, resp)
	return resp
}

// commit fills resp's partition error codes.
func (c *Coordinator) commit(ctx context.Context, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) {
	setAll := func(code int16) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
	}
	p, code := c.partitionOf(req.Group)
	if code != 0 {
		setAll(code)
		return
	}
	// Only a commit outside group management (generation -1) creates a group;
	// anything else for an unknown group is GROUP_ID_NOT_FOUND from v9, and
	// before it ILLEGAL_GENERATION (as Kafka).
	g := p.lookup(c, req.Group, req.Generation < 0)
	if g == nil {
		code := kerr.IllegalGeneration.Code
		if req.Version >= 9 {
			code = kerr.GroupIDNotFound.Code
		}
		setAll(code)
		return
	}

	done := make(chan error, 1)
	var acc []commitIndex
	g.withLock(func() { code, acc = g.commitLocked(req, resp, done) })
	if code != 0 {
		setAll(code)
		return
	}
	if len(acc) == 0 {
		return
	}
	c.flush(g)

	var result int16
	select {
	case err := <-done:
		result = AppendErrorCode(err)
	case <-ctx.Done():
		result = kerr.RequestTimedOut.Code
	}
	for _, a := range acc {
		resp.Topics[a.ti].Partitions[a.pi].ErrorCode = result
	}
}

// commitIndex is the place of a partition in an OffsetCommit request: topic
// and partition index.
type commitIndex struct{ ti, pi int }

// commitLocked checks req and queues the records of the offsets it accepts,
// answering the partitions it refuses in resp. It returns a group-level error
// code, or the places of the partitions queued; done receives their append's
// result.
func (g *group) commitLocked(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, done chan<- error) (int16, []commitIndex) {
	code, perPartition := g.validateCommitLocked(req)
	if code != 0 {
		return code, nil
	}
	now := g.c.now()
	var expire time.Time
	if req.Version <= 4 && req.RetentionTimeMillis >= 0 {
		expire = now.Add(time.Duration(req.RetentionTimeMillis) * time.Millisecond)
	}
	var (
		acc  []commitIndex
		recs []Record
		tps  []topicPartition
		offs []offsetCommit
	)
	if m := g.members[req.MemberID]; m != nil {
		// A commit is a sign of life (heartbeats may be delayed by processing).
		g.touchLocked(m)
	}
	for ti, t := range req.Topics {
		for pi, pt := range t.Partitions {
			meta := deref(pt.Metadata)
			if len(meta) > g.c.cfg.OffsetMetadataMaxBytes {
				resp.Topics[ti].Partitions[pi].ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			tp := topicPartition{t.Topic, pt.Partition}
			if perPartition {
				if code := g.commitPartitionCodeLocked(req, tp); code != 0 {
					resp.Topics[ti].Partitions[pi].ErrorCode = code
					continue
				}
			}
			o := offsetCommit{offset: pt.Offset, leaderEpoch: -1, metadata: meta, commitTime: now, expireTime: expire}
			if req.Version >= 6 {
				o.leaderEpoch = pt.LeaderEpoch
			}
			acc = append(acc, commitIndex{ti, pi})
			tps = append(tps, tp)
			offs = append(offs, o)
			recs = append(recs, Record{Key: offsetKey(g.id, tp), Value: offsetValue(o)})
			g.pendingCommits[tp]++
		}
	}
	if len(recs) > 0 {
		g.queueAtLocked(recs, func(first int64, err error) {
			g.landedLocked(tps)
			for i, tp := range tps {
				if err == nil && !g.unloaded {
					offs[i].recordOffset = first + int64(i)
					putOffset(g.offsets, tp, offs[i])
				}
			}
			if err != nil {
				g.dropFreshLocked()
			}
			done <- err
		})
	} else if !g.writing {
		g.dropFreshLocked()
	}
	return 0, acc
}

// landedLocked ends the flight of commits of tps (pendingCommits): their
// append returned.
func (g *group) landedLocked(tps []topicPartition) {
	for _, tp := range tps {
		if g.pendingCommits[tp]--; g.pendingCommits[tp] <= 0 {
			delete(g.pendingCommits, tp)
		}
	}
}

// validateCommitLocked is Kafka's offset commit check: a group without members
// accepts generation -1 whatever member id it names; otherwise a request naming a
// member or generation must come from a current member of the current generation,
// and a simple one (no member, generation -1) is refused; nothing is accepted while a
// rebalance waits for the leader's assignment. A consumer group checks member epochs
// instead (validateConsumerCommitLocked), sometimes per partition.
func (g *group) validateCommitLocked(req *kmsg.OffsetCommitRequest) (code int16, perPartition bool) {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code, false
	}
	if g.cg != nil {
		return g.validateConsumerCommitLocked(req)
	}
	if g.sg != nil {
		return kerr.GroupIDNotFound.Code, false // share groups have no committed offsets
	}
	if g.st != nil {
		return g.validateStreamsCommitLocked(req), false
	}
	return g.validateClassicCommitLocked(req), false
}

// validateClassicCommitLocked is Kafka's ClassicGroup check: an Empty group
// accepts generation -1 whatever member id it names.
func (g *group) validateClassicCommitLocked(req *kmsg.OffsetCommitRequest) int16 {
	if req.Generation < 0 && g.state == stateEmpty {
		return 0
	}
	instance := deref(req.InstanceID)
	if req.Generation < 0 && req.MemberID == "" && instance == "" {
		return kerr.UnknownMemberID.Code
	}
	if code := g.validateMemberLocked(req.MemberID, instance); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	if g.state == stateCompletingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// fetchTopic is one topic of an OffsetFetch request.
type fetchTopic struct {
	topic      string
	partitions []int32
}

// fetchedPartition is one answer of an OffsetFetch.
type fetchedPartition struct {
	topic  string
	commit offsetCommit
	part   int32
	found  bool
}

// OffsetFetch serves OffsetFetch v1-v9: v8+ asks for several groups at once. A
// partition without a commit has offset -1; null topics (v2+) ask for every commit.
// v7+ RequireStable: a partition with a transactional commit pending answers
// UNSTABLE_OFFSET_COMMIT (KIP-447).
// v9 members of a KIP-848 group name themselves and their epoch (validateFetchMember).
func (c *Coordinator) OffsetFetch(_ context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	defer c.markUnstable(req, resp) // v7+ RequireStable (txn_offsets.go)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			var topics []fetchTopic
			for _, t := range rg.Topics {
				topics = append(topics, fetchTopic{t.Topic, t.Partitions})
			}
			code, parts := c.fetch(rg.Group, topics, rg.Topics == nil)
			if req.Version >= 9 && code == 0 {
				if code = c.validateFetchMember(rg.Group, rg.MemberID, rg.MemberEpoch); code != 0 {
					parts = nil
				}
			}
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group = rg.Group
			sg.ErrorCode = code
			for _, fp := range parts {
				if n := len(sg.Topics); n == 0 || sg.Topics[n-1].Topic != fp.topic {
					st := kmsg.NewOffsetFetchResponseGroupTopic()
					st.Topic = fp.topic
					sg.Topics = append(sg.Topics, st)
				}
				sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				sp.Partition = fp.part
				sp.Offset, sp.LeaderEpoch, sp.Metadata = fp.values()
				st := &sg.Topics[len(sg.Topics)-1]
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Groups = append(resp.Groups, sg)
		}
		return resp
	}

	var topics []fetchTopic
	for _, t := range req.Topics {
		topics = append(topics, fetchTopic{t.Topic, t.Partitions})
	}
	code, parts := c.fetch(req.Group, topics, req.Topics == nil && req.Version >= 2)
	if code != 0 {
		if req.Version >= 2 {
			resp.ErrorCode = code
			return resp
		}
		// v1 has no top-level error: every requested partition carries it.
		parts = parts[:0]
		for _, t := range topics {
			for _, p := range t.partitions {
				parts = append(parts, fetchedPartition{topic: t.topic, part: p})
			}
		}
	}
	for _, fp := range parts {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != fp.topic {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = fp.topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewOffsetFetchResponseTopicPartition()
		rp.Partition = fp.part
		rp.Offset, rp.LeaderEpoch, rp.Metadata = fp.values()
		rp.ErrorCode = code
		rt := &resp.Topics[len(resp.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return resp
}

// values returns offset, leader epoch and metadata as OffsetFetch reports them.
func (fp fetchedPartition) values() (int64, int32, *string) {
	if !fp.found {
		return -1, -1, ptr("")
	}
	return fp.commit.offset, fp.commit.leaderEpoch, ptr(fp.commit.metadata)
}

// fetch returns the committed offsets asked for (every one, sorted, when all is set),
// or a group-level error code.
func (c *Coordinator) fetch(groupID string, topics []fetchTopic, all bool) (int16, []fetchedPartition) {
	p, code := c.partitionOf(groupID)
	if code != 0 {
		return code, nil
	}
	var out []fetchedPartition
	g := p.lookup(c, groupID, false)
	if all {
		if g != nil {
			g.withLock(func() { out = g.fetchAllLocked() })
		}
		return 0, out
	}
	if g != nil {
		g.mu.Lock()
		defer g.mu.Unlock()
	}
	for _, t := range topics {
		for _, part := range t.partitions {
			fp := fetchedPartition{topic: t.topic, part: part}
			if g != nil && g.state != stateDead {
				fp.commit, fp.found = g.offsets[topicPartition{t.topic, part}]
			}
			out = append(out, fp)
		}
	}
	return 0, out
}

// fetchAllLocked is every committed offset of the group, sorted (none when it
// is dead).
func (g *group) fetchAllLocked() []fetchedPartition {
	if g.state == stateDead {
		return nil
	}
	var out []fetchedPartition
	for _, co := range g.committedLocked() {
		out = append(out, fetchedPartition{topic: co.Topic, part: co.Partition, found: true, commit: offsetCommit{
			offset: co.Offset, leaderEpoch: co.LeaderEpoch, metadata: co.Metadata,
		}})
	}
	return out
}

// OffsetDelete serves OffsetDelete v0: it deletes committed offsets of partitions no
// member consumes (GROUP_SUBSCRIBED_TO_TOPIC for the others; a streams group's
// members consume the topics its topology reads), writing tombstones. A classic
// group with members of another protocol type than consumer answers
// NON_EMPTY_GROUP. An Empty group left without offsets stays, Empty, until the
// retention check deletes it, as in Kafka 4's group coordinator.
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	resp.ErrorCode = c.offsetDelete(ctx, req, resp)
	if resp.ErrorCode != 0 {
		resp.Topics = nil
	}
	return resp
}

func (c *Coordinator) offsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest, resp *kmsg.OffsetDeleteResponse) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	p, code := c.partitionOf(req.Group)
	if code != 0 {
		return code
	}
	g := p.lookup(c, req.Group, false)
	if g == nil {
		return kerr.GroupIDNotFound.Code
	}
	done := make(chan error, 1)
	var queued bool
	g.withLock(func() { code, queued = g.offsetDeleteLocked(req, resp, done) })
	if code != 0 || !queued {
		return code
	}
	c.flush(g)
	select {
	case err := <-done:
		return AppendErrorCode(err)
	case <-ctx.Done():
		return kerr.RequestTimedOut.Code
	}
}

// removal is why offsets are removed, which decides whether the group goes too.
type removal int

const (
	// removeOffsets (OffsetDelete, a topic's deletion) removes offsets only: a
	// group left Empty without offsets waits for the retention check, as in
	// Kafka 4's group coordinator (its old one deleted the group at once).
	removeOffsets removal = iota
	// expireOffsets (the retention check) removes the group too when that
	// leaves it Empty without offsets or open transactions and it is not a
	// share group (Kafka's cleanupGroupMetadata).
	expireOffsets
	// removeGroup (DeleteGroups) removes the group with all its offsets.
	removeGroup
)

// removeOffsetsLocked queues tombstones for the committed offsets among tps and,
// as why says, for the group itself and its streams records, which is Dead until
// the write lands (and Empty again if it fails). A
// commit still in flight counts as committed, as in Kafka, where it applies at
// once: it precedes the tombstone in the log and its done runs first, so both the
// group and a replay end without the offset. So does a transactional commit still
// pending: as in Kafka, the tombstone deletes it too, and its transaction's marker
// brings nothing back. It reports whether anything was queued; done then runs
// after the append.
func (g *group) removeOffsetsLocked(tps []topicPartition, why removal, done func(error)) bool {
	var recs, stRecs []Record
	var gone []topicPartition
	add := func(tp topicPartition) {
		if !slices.Contains(gone, tp) {
			gone = append(gone, tp)
			recs = append(recs, Record{Key: offsetKey(g.id, tp)})
		}
	}
	txn, txnOpen := g.p.txnPending(g.id)
	for _, tp := range tps {
		if _, ok := g.offsets[tp]; ok || g.pendingCommits[tp] > 0 || txn[tp] {
			add(tp)
		}
	}
	// A share group never goes with its offsets (it has none; as Kafka's
	// ShareGroup.shouldExpire): only DeleteGroups deletes it, with its state.
	dies := why == removeGroup || (why == expireOffsets && g.sg == nil && g.state == stateEmpty &&
		len(g.pending) == 0 && len(g.pendingCommits) == 0 && !txnOpen && len(g.offsets) == len(gone))
	prevTime := g.stateTime
	if dies {
		for _, tp := range sortedKeys(g.offsets) {
			add(tp)
		}
		for _, tp := range sortedKeys(g.pendingCommits) {
			add(tp)
		}
		for _, tp := range sortedKeys(txn) {
			add(tp)
		}
		recs = append(recs, Record{Key: groupKey(g.id)})
		stRecs = g.recordTombstonesLocked()
		recs = append(recs, stRecs...)
		g.transitionLocked(stateDead)
	}
	if len(recs) == 0 {
		return false
	}
	g.queueLocked(recs, func(err error) {
		switch {
		case g.unloaded:
		case err != nil:
			if dies {
				g.state, g.stateTime = stateEmpty, prevTime
				g.forgetRecordsLocked(stRecs)
			}
		default:
			for _, tp := range gone {
				delete(g.offsets, tp)
			}
			g.p.dropTxnOffsets(g.id, gone)
			if dies {
				g.stopTimersLocked()
				g.p.remove(g)
			}
		}
		done(err)
	})
	return true
}

// sortedKeys returns a map's partitions sorted by topic and partition.
func sortedKeys[V any](m map[topicPartition]V) []topicPartition {
	out := make([]topicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	slices.SortFunc(out, compareTP)
	return out
}

func compareTP(a, b topicPartition) int {
	return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
}

// offsetDeleteLocked queues the tombstones of the offsets req deletes,
// answering the partitions it refuses in resp. It returns a group-level error
// code, or whether it queued anything; done receives the append's result.
func (g *group) offsetDeleteLocked(req *kmsg.OffsetDeleteRequest, resp *kmsg.OffsetDeleteResponse, done chan<- error) (int16, bool) {
	var subscribedOK bool
	switch g.state {
	case stateDead:
		return kerr.GroupIDNotFound.Code, false
	case stateEmpty:
		subscribedOK = true
	default:
		// A streams group, like a consumer one, knows the topics it reads
		// (Kafka's StreamsGroup accepts OffsetDelete in any state).
		if g.protocolType != consumerProtocolType && g.st == nil {
			return kerr.NonEmptyGroup.Code, false
		}
	}
	var remove []topicPartition
	for ti, t := range req.Topics {
		for pi, pt := range t.Partitions {
			if !subscribedOK && g.isSubscribedLocked(t.Topic) {
				resp.Topics[ti].Partitions[pi].ErrorCode = kerr.GroupSubscribedToTopic.Code
				continue
			}
			remove = append(remove, topicPartition{t.Topic, pt.Partition})
		}
	}
	return 0, g.removeOffsetsLocked(remove, removeOffsets, func(err error) { done <- err })
}

// TopicsDeleted drops every group's committed offsets of the deleted topics, writing
// tombstones (Kafka's handleDeletedPartitions), so a topic created again under the
// same name does not resume at stale offsets. An Empty group left without offsets
// stays until the retention check deletes it, as in Kafka 4 (onPartitionsDeleted
// writes only tombstones). The broker calls it when its metadata image loses topics; it returns once
// the tombstones are queued, and failed appends are retried by the next call or
// expire with retention.
func (c *Coordinator) TopicsDeleted(topics ...string) {
	if len(topics) == 0 {
		return
	}
	parts, _ := c.loadedPartitions()
	for _, p := range parts {
		for _, g := range p.snapshot() {
			var queued bool
			g.withLock(func() { queued = g.removeTopicsLocked(topics) })
			if queued {
				c.flush(g)
			}
		}
	}
}

// removeTopicsLocked queues tombstones for the group's offsets of topics,
// commits in flight and transactional ones pending included (as Kafka's
// onPartitionsDeleted); it reports whether it queued any.
func (g *group) removeTopicsLocked(topics []string) bool {
	var gone []topicPartition
	txn, _ := g.p.txnPending(g.id)
	for _, tp := range slices.Concat(sortedKeys(g.offsets), sortedKeys(g.pendingCommits), sortedKeys(txn)) {
		if slices.Contains(topics, tp.topic) {
			gone = append(gone, tp)
		}
	}
	return len(gone) > 0 && g.state != stateDead && g.removeOffsetsLocked(gone, removeOffsets, func(error) {})
}

// runExpiry is the periodic offsets retention check.
func (c *Coordinator) runExpiry() {
	c.expireOffsets()
	c.mu.RLock()
	if !c.mu.closed {
		c.expiry.Reset(c.cfg.OffsetsRetentionCheckInterval)
	}
	c.mu.RUnlock()
}

// expireOffsets applies the retention rules to every loaded group.
func (c *Coordinator) expireOffsets() {
	parts, _ := c.loadedPartitions()
	now := c.now()
	for _, p := range parts {
		for _, g := range p.snapshot() {
			var queued bool
			g.withLock(func() { queued = g.removeOffsetsLocked(g.expiredLocked(now), expireOffsets, func(error) {}) })
			if queued {
				c.flush(g)
			}
		}
	}
}

// expiredLocked returns the offsets whose retention passed, following Kafka (KIP-211):
// offsets of an Empty classic group expire OffsetsRetention after it became Empty
// (after their commit when that time is unknown); offsets of a group that never had
// members expire OffsetsRetention after their commit; a Stable classic consumer
// group's offsets of topics it no longer subscribes to, and a KIP-848 consumer group's
// of topics no member subscribes to (every topic once it is Empty), and a streams
// group's of topics its topology does not read (every topic once it is Empty),
// expire OffsetsRetention after their commit; an offset committed with an explicit
// retention time (v2-v4) expires at that time. Offsets with a commit in flight, or a
// transactional one pending, never expire.
func (g *group) expiredLocked(now time.Time) []topicPartition {
	retention := g.c.cfg.OffsetsRetention
	var base func(o offsetCommit) time.Time
	skipSubscribed := false
	switch {
	case g.cg != nil:
		base = func(o offsetCommit) time.Time { return o.commitTime }
		skipSubscribed = true
	case g.st != nil:
		// As Kafka's StreamsGroup: an Empty group reads no topic.
		base = func(o offsetCommit) time.Time { return o.commitTime }
		skipSubscribed = g.state != stateEmpty
	case g.protocolType != "" && g.state == stateEmpty:
		base = func(o offsetCommit) time.Time {
			if !g.stateTime.IsZero() {
				return g.stateTime
			}
			return o.commitTime
		}
	case g.protocolType == "" && g.state == stateEmpty:
		base = func(o offsetCommit) time.Time { return o.commitTime }
	case g.protocolType == consumerProtocolType && g.subsKnown && g.state == stateStable:
		base = func(o offsetCommit) time.Time { return o.commitTime }
		skipSubscribed = true
	default:
		return nil
	}
	txn, _ := g.p.txnPending(g.id)
	var out []topicPartition
	for tp, o := range g.offsets {
		if g.pendingCommits[tp] > 0 || txn[tp] || (skipSubscribed && g.isSubscribedLocked(tp.topic)) {
			continue
		}
		expired := now.Sub(base(o)) >= retention
		if !o.expireTime.IsZero() {
			expired = !now.Before(o.expireTime)
		}
		if expired {
			out = append(out, tp)
		}
	}
	slices.SortFunc(out, compareTP)
	return out
}

// CommittedOffset is one committed offset of a group.
type CommittedOffset struct {
	Topic       string
	Partition   int32
	Offset      int64 // the next offset the group will read
	LeaderEpoch int32 // -1 when the committer did not say
	Metadata    string
	CommitTime  time.Time
}

// CommittedOffsets returns the group's committed offsets sorted by topic and
// partition. Errors: ErrNotCoordinator, ErrLoadInProgress, ErrClosed,
// ErrGroupNotFound.
func (c *Coordinator) CommittedOffsets(groupID string) ([]CommittedOffset, error) {
	p, err := c.partitionErr(groupID)
	if err != nil {
		return nil, err
	}
	g := p.lookup(c, groupID, false)
	if g == nil {
		return nil, ErrGroupNotFound
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == stateDead {
		return nil, ErrGroupNotFound
	}
	return g.committedLocked(), nil
}

func (g *group) committedLocked() []CommittedOffset {
	out := make([]CommittedOffset, 0, len(g.offsets))
	for tp, o := range g.offsets {
		out = append(out, CommittedOffset{
			Topic: tp.topic, Partition: tp.partition, Offset: o.offset,
			LeaderEpoch: o.leaderEpoch, Metadata: o.metadata, CommitTime: o.commitTime,
		})
	}
	slices.SortFunc(out, func(a, b CommittedOffset) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// partitionErr is partitionOf with Go errors for the non-Kafka API.
func (c *Coordinator) partitionErr(groupID string) (*partition, error) {
	p, code := c.partitionOf(groupID)
	switch code {
	case 0:
		return p, nil
	case kerr.CoordinatorLoadInProgress.Code:
		return nil, ErrLoadInProgress
	case kerr.CoordinatorNotAvailable.Code:
		return nil, ErrClosed
	}
	return nil, ErrNotCoordinator
}

// PartitionLag is a group's position in one partition.
type PartitionLag struct {
	Group         string
	Topic         string
	Partition     int32
	Committed     int64 // next offset the group will read
	HighWatermark int64 // -1 when the caller does not know the partition
	Lag           int64 // HighWatermark - Committed, at least 0; -1 when unknown
}

// HighWatermarkFunc returns a partition's high watermark, false when the partition is
// unknown (e.g. the topic was deleted).
type HighWatermarkFunc func(topic string, partition int32) (int64, bool)

// Lag reports the lag of every committed offset of the named groups, or of every group
// this node coordinates when none is named, sorted by group, topic and partition.
// Errors (named groups only): as CommittedOffsets.
func (c *Coordinator) Lag(hwm HighWatermarkFunc, groups ...string) ([]PartitionLag, error) {
	if len(groups) == 0 {
		parts, _ := c.loadedPartitions()
		for _, p := range parts {
			for _, g := range p.snapshot() {
				groups = append(groups, g.id)
			}
		}
		slices.Sort(groups)
		var out []PartitionLag
		for _, id := range groups {
			offs, err := c.CommittedOffsets(id)
			if err != nil {
				continue // gone or unloaded since the listing
			}
			out = appendLag(out, id, offs, hwm)
		}
		return out, nil
	}
	var out []PartitionLag
	for _, id := range slices.Sorted(slices.Values(groups)) {
		offs, err := c.CommittedOffsets(id)
		if err != nil {
			return nil, err
		}
		out = appendLag(out, id, offs, hwm)
	}
	return out, nil
}

func appendLag(out []PartitionLag, groupID string, offs []CommittedOffset, hwm HighWatermarkFunc) []PartitionLag {
	for _, o := range offs {
		l := PartitionLag{Group: groupID, Topic: o.Topic, Partition: o.Partition, Committed: o.Offset, HighWatermark: -1, Lag: -1}
		if h, ok := hwm(o.Topic, o.Partition); ok {
			l.HighWatermark = h
			l.Lag = max(h-o.Offset, 0)
		}
		out = append(out, l)
	}
	return out
}
