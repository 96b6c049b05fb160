package httpapi

import (
	"context"
	"net/http"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/admin"
)

// seekJSON is the body of POST /groups/{group}/seek: a topic, optionally one
// partition, and exactly one target.
type seekJSON struct {
	Topic     string `json:"topic"`
	Partition *int32 `json:"partition"`
	To        string `json:"to"`
	Timestamp *int64 `json:"timestamp"`
	Offset    *int64 `json:"offset"`
}

// seekCall is a validated seek; partition -1 is every partition.
type seekCall struct {
	group     string
	topic     string
	partition int32
	target    admin.OffsetSpec
}

func parseSeek(group string, body []byte) (seekCall, *apiError) {
	var req seekJSON
	if err := decodeControl(body, &req); err != nil {
		return seekCall{}, err
	}
	if req.Topic == "" {
		return seekCall{}, invalid("topic is required")
	}
	call := seekCall{group: group, topic: req.Topic, partition: -1}
	if req.Partition != nil {
		if *req.Partition < 0 {
			return seekCall{}, invalid("partition: must not be negative")
		}
		call.partition = *req.Partition
	}
	targets := 0
	if req.To != "" {
		targets++
		switch req.To {
		case "earliest":
			call.target = admin.OffsetSpec{Kind: admin.OffsetEarliest}
		case "latest":
			call.target = admin.OffsetSpec{Kind: admin.OffsetLatest}
		default:
			return seekCall{}, invalid(`to: must be "earliest" or "latest", got %q`, req.To)
		}
	}
	if req.Timestamp != nil {
		targets++
		call.target = admin.OffsetSpec{Kind: admin.OffsetTime, Millis: *req.Timestamp}
		if *req.Timestamp < 0 {
			return seekCall{}, invalid("timestamp: must not be negative")
		}
	}
	if req.Offset != nil {
		targets++
		call.target = admin.OffsetSpec{Kind: admin.OffsetExact, Offset: *req.Offset}
		if *req.Offset < 0 {
			return seekCall{}, invalid("offset: must not be negative")
		}
	}
	if targets != 1 {
		return seekCall{}, invalid("give exactly one of to, timestamp and offset")
	}
	return call, nil
}

type seekAnswer struct {
	Group     string      `json:"group"`
	Committed bool        `json:"committed"`
	Offsets   []offsetOut `json:"offsets"`
}

// handleSeek moves a group to new offsets: it resolves the target per partition
// (an offset is clamped to the partition's log start and high-water mark; a
// timestamp with no record at or after it means the high-water mark), moves the
// fetch position of every consumer instance of the group here that consumes the
// topic, and commits the offsets so that every other member (an HTTP consumer on
// another node, a Kafka client) starts from them when it is next assigned the
// partition.
func (a *API) handleSeek(w http.ResponseWriter, r *http.Request) {
	body, aerr := readBody(w, r, a.cfg.MaxBodyBytes)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	call, aerr := parseSeek(r.PathValue("group"), body)
	if aerr == nil {
		aerr = authorize(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, call.topic)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	t := a.topic(r.Context(), call.topic)
	if t == nil {
		writeError(w, unknownTopic(call.topic))
		return
	}
	var parts []int32
	if call.partition >= 0 {
		if aerr := a.checkPartition(r.Context(), call.topic, call.partition); aerr != nil {
			writeError(w, aerr)
			return
		}
		parts = []int32{call.partition}
	} else {
		for i := range t.Partitions {
			parts = append(parts, int32(i))
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), defaultTimeout)
	defer cancel()
	offsets, aerr := a.resolveSeek(ctx, call, parts)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	set := map[string]map[int32]kgo.EpochOffset{call.topic: offsets}
	insts := a.consumers.ofGroup(call.group)
	defer func() {
		for _, inst := range insts {
			a.consumers.release(inst)
		}
	}()
	var committer *instance
	for _, inst := range insts {
		if inst.topic == call.topic {
			inst.cl.SetOffsets(set)
			committer = inst
		}
	}
	if committer == nil && len(insts) > 0 {
		committer = insts[0]
	}
	if aerr := a.commit(ctx, call.group, committer, set); aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, seekAnswer{Group: call.group, Committed: true, Offsets: flatten(set)})
}

// resolveSeek turns the seek's target into an offset per partition of parts.
func (a *API) resolveSeek(ctx context.Context, call seekCall, parts []int32) (map[int32]kgo.EpochOffset, *apiError) {
	bounds, err := admin.ListBounds(ctx, a.admin, call.topic, parts...)
	if err != nil {
		return nil, fromErr(err)
	}
	resolved, err := call.target.Resolve(ctx, a.admin, call.topic, bounds)
	if err != nil {
		return nil, fromErr(err)
	}
	out := make(map[int32]kgo.EpochOffset, len(resolved))
	for p, o := range resolved {
		out[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	return out, nil
}
