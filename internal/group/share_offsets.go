package group

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the share-group offset admin side of KIP-932:
// DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets. As
// in Kafka, the group's coordinator answers them and reads or writes the
// share-partition state through a persister (ShareState), wherever that state lives.
// A share partition's "offset" is its start offset (SPSO): the first offset whose
// delivery is not complete. Altering one replaces its state with nothing in flight
// from the new start offset; deleting one removes its state, so the partition
// starts again at share.auto.offset.reset. Both need an empty group.

// ShareState is the durable share-partition state as the coordinator reaches it.
// Errors that are Kafka errors (kerr) are answered as such.
type ShareState interface {
	// Summary returns a share partition's start offset, leader epoch and lag (-1
	// when unknown); false when it has no state.
	Summary(ctx context.Context, sp SharePartition) (ShareSummary, bool, error)
	// Reset replaces a share partition's state with nothing in flight from start.
	Reset(ctx context.Context, sp SharePartition, start int64) error
	// Delete removes a share partition's state.
	Delete(ctx context.Context, sp SharePartition) error
	// Partitions lists the share partitions of group that have state.
	Partitions(ctx context.Context, group string) ([]SharePartition, error)
}

// SharePartition names one share partition: a group's view of a topic partition.
type SharePartition struct {
	Group     string
	Topic     string // empty when ShareState.Partitions lists it; the coordinator fills it
	TopicID   [16]byte
	Partition int32
}

// ShareSummary is what DescribeShareGroupOffsets shows of a share partition.
type ShareSummary struct {
	StartOffset int64
	LeaderEpoch int32
	Lag         int64
}

// uninitializedStartOffset is the start offset answered for a share partition
// without state (Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET).
const uninitializedStartOffset = -1

// DescribeShareGroupOffsets serves DescribeShareGroupOffsets v0-v1 (v1: lag): the
// start offset of each named share partition, or of every share partition of the
// group with state when a group names no topics. As in Kafka, a partition without
// state (or of an unknown topic) has start offset -1 rather than an error.
func (c *Coordinator) DescribeShareGroupOffsets(ctx context.Context, req *kmsg.DescribeShareGroupOffsetsRequest) *kmsg.DescribeShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		if code := c.shareAdminCode(rg.GroupID); code != 0 {
			g.ErrorCode, g.ErrorMessage = code, errMessage(code)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		var err error
		if rg.Topics == nil {
			g.Topics, err = c.describeAllShareOffsets(ctx, rg.GroupID)
		} else {
			g.Topics, err = c.describeShareOffsets(ctx, rg.GroupID, rg.Topics)
		}
		if err != nil {
			code := shareStateCode(err)
			g.Topics = nil
			g.ErrorCode, g.ErrorMessage = code, ptr(err.Error())
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// shareAdminCode is the group-level error before a share-group offset request is
// served: the coordinator's (NOT_COORDINATOR, ...), or INVALID_GROUP_ID.
func (c *Coordinator) shareAdminCode(group string) int16 {
	if group == "" {
		return kerr.InvalidGroupID.Code
	}
	if c.cfg.ShareState == nil {
		return kerr.CoordinatorNotAvailable.Code
	}
	_, code := c.partitionOf(group)
	return code
}

func (c *Coordinator) describeShareOffsets(ctx context.Context, group string, topics []kmsg.DescribeShareGroupOffsetsRequestGroupTopic) ([]kmsg.DescribeShareGroupOffsetsResponseGroupTopic, error) {
	cat := c.cfg.Topics
	var out []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	for _, t := range topics {
		rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		rt.Topic = t.Topic
		id, n, ok := cat.Topic(t.Topic)
		if ok {
			rt.TopicID = id
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			rp.Partition, rp.StartOffset = p, uninitializedStartOffset
			if ok && p >= 0 && p < n {
				if err := c.summarize(ctx, SharePartition{group, t.Topic, id, p}, &rp); err != nil {
					return nil, err
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out, nil
}

// describeAllShareOffsets describes every share partition of group with state and,
// as Kafka 4.4 (whose group coordinator initializes every partition of a topic
// its members subscribe to), every partition of the topics the group's members
// subscribe to now, start offset -1 where there is no state yet.
func (c *Coordinator) describeAllShareOffsets(ctx context.Context, group string) ([]kmsg.DescribeShareGroupOffsetsResponseGroupTopic, error) {
	sps, err := c.sharePartitionsOf(ctx, group)
	if err != nil {
		return nil, err
	}
	withState := map[SharePartition]bool{}
	for _, sp := range sps {
		withState[sp] = true
	}
	for name, tm := range c.shareTopicsOf(group) {
		for p := range tm.partitions {
			if sp := (SharePartition{group, name, tm.id, p}); !withState[sp] {
				sps = append(sps, sp)
			}
		}
	}
	slices.SortFunc(sps, func(a, b SharePartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	var out []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	for _, sp := range sps {
		if k := len(out); k == 0 || out[k-1].TopicID != sp.TopicID {
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic, rt.TopicID = sp.Topic, sp.TopicID
			out = append(out, rt)
		}
		rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
		rp.Partition, rp.StartOffset = sp.Partition, uninitializedStartOffset
		if withState[sp] {
			if err := c.summarize(ctx, sp, &rp); err != nil {
				return nil, err
			}
		}
		rt := &out[len(out)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return out, nil
}

// shareTopicsOf returns the topics the members of share group subscribe to.
func (c *Coordinator) shareTopicsOf(group string) map[string]topicMeta {
	p, code := c.partitionOf(group)
	if code != 0 {
		return nil
	}
	g := p.lookup(c, group, false)
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sg == nil {
		return nil
	}
	return maps.Clone(g.sg.topics)
}

// sharePartitionsOf lists the share partitions of group with state whose topics
// still exist, with their names, by topic and partition.
func (c *Coordinator) sharePartitionsOf(ctx context.Context, group string) ([]SharePartition, error) {
	sps, err := c.cfg.ShareState.Partitions(ctx, group)
	if err != nil {
		return nil, err
	}
	cat := c.cfg.Topics
	out := sps[:0]
	for _, sp := range sps {
		name, ok := cat.TopicName(sp.TopicID)
		if !ok {
			continue
		}
		sp.Topic = name
		out = append(out, sp)
	}
	slices.SortFunc(out, func(a, b SharePartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, nil
}

// summarize fills a partition's start offset, leader epoch and lag from its state.
func (c *Coordinator) summarize(ctx context.Context, sp SharePartition, rp *kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition) error {
	sum, ok, err := c.cfg.ShareState.Summary(ctx, sp)
	if err != nil {
		return err
	}
	if ok {
		rp.StartOffset, rp.LeaderEpoch, rp.Lag = sum.StartOffset, sum.LeaderEpoch, sum.Lag
	}
	return nil
}

// shareStateCode is the Kafka error for a failed state read or write.
func shareStateCode(err error) int16 {
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return ke.Code
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	}
	return kerr.UnknownServerError.Code
}

// AlterShareGroupOffsets serves AlterShareGroupOffsets v0: each named share
// partition starts again at the given offset with nothing in flight. As in Kafka
// 4.4, a group that does not exist, or a simple classic group (isSimpleLocked), is
// made an empty share group; another group that is not a share group answers
// GROUP_ID_NOT_FOUND, one with members NON_EMPTY_GROUP;
// an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION for that partition. A
// negative offset removes the state instead (the partition starts at
// share.auto.offset.reset).
func (c *Coordinator) AlterShareGroupOffsets(ctx context.Context, req *kmsg.AlterShareGroupOffsetsRequest) *kmsg.AlterShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if code, msg := c.checkEmptyShareGroup(req.GroupID, true); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, ptr(msg)
		return resp
	}
	cat := c.cfg.Topics
	for _, t := range req.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		id, n, ok := cat.Topic(t.Topic)
		if ok {
			rt.TopicID = id
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			var err error
			switch sp := (SharePartition{req.GroupID, t.Topic, id, p.Partition}); {
			case !ok || p.Partition < 0 || p.Partition >= n:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p.StartOffset < 0:
				err = c.cfg.ShareState.Delete(ctx, sp)
			default:
				err = c.cfg.ShareState.Reset(ctx, sp, p.StartOffset)
			}
			if err != nil {
				c.log.Warn("altering share-group offset", "group", req.GroupID, "topic", t.Topic, "partition", p.Partition, "err", err)
				rp.ErrorCode = shareStateCode(err)
			}
			rp.ErrorMessage = errMessage(rp.ErrorCode)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// errMessage is the message Kafka 4.4's share-group offset APIs answer with code,
// nil for none.
func errMessage(code int16) *string {
	if code == 0 {
		return nil
	}
	return ptr(kafkaMessage(code))
}

// kafkaMessages are Kafka's messages where they are not kerr's description (taken
// from a Kafka 4.4 broker's answers, as the error tables of package handlers).
var kafkaMessages = map[int16]string{
	kerr.InvalidGroupID.Code:           "The group id is invalid.",
	kerr.GroupAuthorizationFailed.Code: "Group authorization failed.",
	kerr.TopicAuthorizationFailed.Code: "Topic authorization failed.",
}

// kafkaMessage is the text Kafka answers with code: kafkaMessages, else kerr's
// description of it.
func kafkaMessage(code int16) string {
	if m, ok := kafkaMessages[code]; ok {
		return m
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Description
	}
	return kerr.ErrorForCode(code).Error()
}

// checkEmptyShareGroup checks that group is a share group without members (creating
// it when create and it does not exist); it returns the error code and message
// when not.
func (c *Coordinator) checkEmptyShareGroup(id string, create bool) (int16, string) {
	if code := c.shareAdminCode(id); code != 0 {
		return code, kafkaMessage(code)
	}
	p, code := c.partitionOf(id)
	if code != 0 {
		return code, kafkaMessage(code)
	}
	g := p.lookup(c, id, create)
	if g == nil {
		return kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s not found.", id)
	}
	defer c.flush(g) // the new group's records, after the unlock
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sg == nil && create && g.isSimpleLocked() {
		g.becomeShareGroupLocked()
		g.syncShareViewLocked()
		g.persistRecordsLocked(nil)
	}
	switch {
	case g.state == stateDead || g.sg == nil:
		return kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a share group.", id)
	case len(g.sg.members) > 0:
		return kerr.NonEmptyGroup.Code, "The group is not empty."
	}
	return 0, ""
}

// isSimpleLocked reports whether g is what Kafka calls a simple group: a classic
// group that never had members (no protocol type), only committed offsets, if
// any, none of them still being written. As in Kafka 4.4, a share group may take
// its place (and its committed offsets go).
func (g *group) isSimpleLocked() bool {
	return g.cg == nil && g.sg == nil && g.st == nil && g.protocolType == "" && len(g.members) == 0 && len(g.pending) == 0 &&
		g.state == stateEmpty && len(g.pendingCommits) == 0
}

// becomeShareGroupLocked turns a simple group (isSimpleLocked) into an empty share
// group. Its committed offsets' tombstones are queued (the caller persists the
// share group's records and flushes); the offsets leave memory once the
// tombstones are appended, so a failed write, only logged, leaves memory holding
// what the log does, as Kafka's runtime reverts a failed write.
func (g *group) becomeShareGroupLocked() {
	g.becomingModernLocked()
	if len(g.offsets) > 0 {
		tps := sortedKeys(g.offsets)
		recs := make([]Record, 0, len(tps))
		for _, tp := range tps {
			recs = append(recs, Record{Key: offsetKey(g.id, tp)})
		}
		g.queueLocked(recs, func(err error) {
			if err != nil {
				g.c.log.Warn("deleting the committed offsets of a group that became a share group", "group", g.id, "err", err)
				return
			}
			for _, tp := range tps {
				delete(g.offsets, tp)
			}
		})
	}
	g.sg = newShareGroup()
	g.protocolType = shareProtocolType
	g.changes = recordChanges{} // all its records are new
}

// DeleteShareGroupOffsets serves DeleteShareGroupOffsets v0: the state of every
// partition of each named topic goes. The group must be an empty share group
// (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP); a topic that does not exist, or of which
// the group has no state, answers UNKNOWN_TOPIC_OR_PARTITION.
func (c *Coordinator) DeleteShareGroupOffsets(ctx context.Context, req *kmsg.DeleteShareGroupOffsetsRequest) *kmsg.DeleteShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if code, msg := c.checkEmptyShareGroup(req.GroupID, false); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, ptr(msg)
		return resp
	}
	sps, err := c.sharePartitionsOf(ctx, req.GroupID)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = shareStateCode(err), ptr(err.Error())
		return resp
	}
	cat := c.cfg.Topics
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		id, _, ok := cat.Topic(t.Topic)
		if !ok {
			rt.ErrorCode, rt.ErrorMessage = kerr.UnknownTopicOrPartition.Code, errMessage(kerr.UnknownTopicOrPartition.Code)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt.TopicID = id
		found := false
		for _, sp := range sps {
			if sp.TopicID != id {
				continue
			}
			found = true
			if err := c.cfg.ShareState.Delete(ctx, sp); err != nil {
				c.log.Warn("deleting share-group offset", "group", req.GroupID, "topic", t.Topic, "partition", sp.Partition, "err", err)
				rt.ErrorCode, rt.ErrorMessage = shareStateCode(err), ptr(err.Error())
				break
			}
		}
		if !found {
			rt.ErrorCode, rt.ErrorMessage = kerr.UnknownTopicOrPartition.Code, ptr("There is no offset information to delete.")
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// deleteShareState removes every share partition's state of a deleted share group.
func (c *Coordinator) deleteShareState(ctx context.Context, group string) error {
	if c.cfg.ShareState == nil {
		return nil
	}
	sps, err := c.cfg.ShareState.Partitions(ctx, group)
	if err != nil {
		return err
	}
	for _, sp := range sps {
		if err := c.cfg.ShareState.Delete(ctx, sp); err != nil {
			return err
		}
	}
	return nil
}
