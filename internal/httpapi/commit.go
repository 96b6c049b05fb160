package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitJSON is the body of POST /commit.
type commitJSON struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition *int32 `json:"partition"`
	Offset    *int64 `json:"offset"`
	// Processed is the last offset processed: it commits Processed+1, the
	// design's "processed up to 84510" reading of a commit.
	Processed *int64 `json:"processed"`
	Consumer  string `json:"consumer"`
}

// commitCall is a validated commit: one offset (partition >= 0) or the positions
// of the instance key (partition -1).
type commitCall struct {
	key       instanceKey
	topic     string
	partition int32
	offset    int64
}

func parseCommit(body []byte) (commitCall, *apiError) {
	var req commitJSON
	if err := decodeControl(body, &req); err != nil {
		return commitCall{}, err
	}
	if req.Group == "" {
		return commitCall{}, invalid("group is required")
	}
	call := commitCall{key: instanceKey{req.Group, req.Consumer}, topic: req.Topic, partition: -1, offset: -1}
	if call.key.consumer == "" {
		call.key.consumer = defaultConsumer
	}
	switch {
	case req.Offset != nil && req.Processed != nil:
		return commitCall{}, invalid("offset (the next offset to read) and processed (the last offset processed) are exclusive")
	case req.Processed != nil && *req.Processed < 0:
		return commitCall{}, invalid("processed: must not be negative")
	case req.Processed != nil && *req.Processed == math.MaxInt64:
		return commitCall{}, invalid("processed: too large")
	case req.Processed != nil:
		next := *req.Processed + 1
		req.Offset = &next
	}
	switch {
	case req.Partition == nil && req.Offset != nil:
		return commitCall{}, invalid("offset or processed needs a partition (without both, the consumer's positions are committed)")
	case req.Partition == nil:
		return call, nil
	case req.Topic == "":
		return commitCall{}, invalid("topic is required with a partition")
	case *req.Partition < 0:
		return commitCall{}, invalid("partition: must not be negative")
	case req.Offset == nil:
		return commitCall{}, invalid("offset or processed is required with a partition")
	case *req.Offset < 0:
		return commitCall{}, invalid("offset: must not be negative")
	}
	call.partition, call.offset = *req.Partition, *req.Offset
	return call, nil
}

// offsetOut is one committed or sought offset.
type offsetOut struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

type commitAnswer struct {
	Committed bool        `json:"committed"`
	Offsets   []offsetOut `json:"offsets"`
}

func (a *API) handleCommit(w http.ResponseWriter, r *http.Request) {
	body, aerr := readBody(w, r, a.cfg.MaxBodyBytes)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	call, aerr := parseCommit(body)
	if aerr == nil {
		aerr = authorize(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, call.key.group)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var offsets map[string]map[int32]kgo.EpochOffset
	inst := a.consumers.lookup(call.key)
	if inst != nil {
		defer a.consumers.release(inst)
		a.markConsumerNode(w)
	} else if a.forwarded(w, r, body, call.key, false) {
		return
	}
	if call.partition < 0 {
		switch {
		case inst == nil:
			aerr = unknownConsumer(call.key)
		case call.topic != "" && call.topic != inst.topic:
			aerr = errorf(http.StatusConflict, codeConsumerTopic, "consumer %q of group %q consumes topic %q, not %q", call.key.consumer, call.key.group, inst.topic, call.topic)
		default:
			// A poll under way answers first: its records count once delivered
			// (see poll).
			inst.pollMu.Lock()
			offsets = inst.cl.UncommittedOffsets()
			inst.pollMu.Unlock()
		}
	} else {
		aerr = a.checkPartition(r.Context(), call.topic, call.partition)
		offsets = map[string]map[int32]kgo.EpochOffset{call.topic: {call.partition: {Epoch: -1, Offset: call.offset}}}
	}
	for topic := range offsets {
		if aerr == nil {
			aerr = authorize(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, topic)
		}
	}
	if aerr == nil {
		ctx, cancel := context.WithTimeout(r.Context(), defaultTimeout)
		aerr = a.commit(ctx, call.key.group, inst, offsets)
		cancel()
		if inst == nil && aerr != nil && aerr.code == kerr.UnknownMemberID.Message {
			// No node holds the consumer, or forwarded would have sent it there.
			aerr.message = fmt.Sprintf("group %q has members and consumer %q is not one of them: while a group has members only they can commit (a poll as %q makes it one)",
				call.key.group, call.key.consumer, call.key.consumer)
		}
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, commitAnswer{Committed: true, Offsets: flatten(offsets)})
}

// checkPartition answers 404 for a partition the image does not have.
func (a *API) checkPartition(ctx context.Context, topic string, partition int32) *apiError {
	t := a.topic(ctx, topic)
	switch {
	case t == nil:
		return unknownTopic(topic)
	case partition >= int32(len(t.Partitions)):
		return unknownPartition(topic, partition)
	}
	return nil
}

// commit commits offsets for group: as the member inst when there is one (the
// coordinator accepts commits of a group with members only from its members),
// else as an admin, which the coordinator accepts while the group has no members.
func (a *API) commit(ctx context.Context, group string, inst *instance, offsets map[string]map[int32]kgo.EpochOffset) *apiError {
	if len(offsets) == 0 {
		return nil
	}
	if inst != nil {
		var first error
		inst.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				first = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if first == nil {
						first = kerr.ErrorForCode(p.ErrorCode)
					}
				}
			}
		})
		if first != nil {
			return fromErr(first)
		}
		return nil
	}
	adm := make(kadm.Offsets)
	for t, ps := range offsets {
		for p, eo := range ps {
			adm.Add(kadm.Offset{Topic: t, Partition: p, At: eo.Offset, LeaderEpoch: -1})
		}
	}
	if err := a.admin.CommitAllOffsets(ctx, group, adm); err != nil {
		ae := fromErr(err)
		if ae.code == kerr.UnknownMemberID.Message {
			ae.message = "group " + group + " has members that are not HTTP consumers of this node: only they can commit while it is active (" + ae.message + ")"
		}
		return ae
	}
	return nil
}

// flatten lists offsets sorted by topic and partition.
func flatten(offsets map[string]map[int32]kgo.EpochOffset) []offsetOut {
	out := []offsetOut{}
	for t, ps := range offsets {
		for p, eo := range ps {
			out = append(out, offsetOut{t, p, eo.Offset})
		}
	}
	slices.SortFunc(out, func(a, b offsetOut) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}
