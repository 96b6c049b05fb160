package httpapi

import (
	"context"
	"net/http"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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

// seekTarget is where a seek goes.
type seekTarget int8

const (
	seekEarliest seekTarget = iota
	seekLatest
	seekTimestamp
	seekOffset
)

// seekCall is a validated seek; partition -1 is every partition.
type seekCall struct {
	group     string
	topic     string
	partition int32
	target    seekTarget
	value     int64 // the timestamp or offset
}

func parseSeek(group string, body []byte) (seekCall, *apiError) {
	var req seekJSON
	if err := decodeJSON(body, &req); err != nil {
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
			call.target = seekEarliest
		case "latest":
			call.target = seekLatest
		default:
			return seekCall{}, invalid(`to: must be "earliest" or "latest", got %q`, req.To)
		}
	}
	if req.Timestamp != nil {
		targets++
		call.target, call.value = seekTimestamp, *req.Timestamp
		if call.value < 0 {
			return seekCall{}, invalid("timestamp: must not be negative")
		}
	}
	if req.Offset != nil {
		targets++
		call.target, call.value = seekOffset, *req.Offset
		if call.value < 0 {
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
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	t := a.cfg.Cluster.Image().Topic(call.topic)
	if t == nil {
		writeError(w, unknownTopic(call.topic))
		return
	}
	var parts []int32
	if call.partition >= 0 {
		if aerr := a.checkPartition(call.topic, call.partition); aerr != nil {
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

// resolveSeek turns the seek's target into an offset per partition.
func (a *API) resolveSeek(ctx context.Context, call seekCall, parts []int32) (map[int32]kgo.EpochOffset, *apiError) {
	starts, err := a.admin.ListStartOffsets(ctx, call.topic)
	if err != nil {
		return nil, fromErr(err)
	}
	ends, err := a.admin.ListEndOffsets(ctx, call.topic)
	if err != nil {
		return nil, fromErr(err)
	}
	var byTime kadm.ListedOffsets
	if call.target == seekTimestamp {
		if byTime, err = a.admin.ListOffsetsAfterMilli(ctx, call.value, call.topic); err != nil {
			return nil, fromErr(err)
		}
	}
	out := make(map[int32]kgo.EpochOffset, len(parts))
	for _, p := range parts {
		start, aerr := listed(starts, call.topic, p)
		if aerr != nil {
			return nil, aerr
		}
		end, aerr := listed(ends, call.topic, p)
		if aerr != nil {
			return nil, aerr
		}
		var off int64
		switch call.target {
		case seekEarliest:
			off = start
		case seekLatest:
			off = end
		case seekOffset:
			off = min(max(call.value, start), end)
		case seekTimestamp:
			if off, aerr = listed(byTime, call.topic, p); aerr != nil {
				return nil, aerr
			}
			if off < 0 {
				off = end
			}
		}
		out[p] = kgo.EpochOffset{Epoch: -1, Offset: off}
	}
	return out, nil
}

// listed is one partition's listed offset, or why there is none.
func listed(l kadm.ListedOffsets, topic string, partition int32) (int64, *apiError) {
	o, ok := l.Lookup(topic, partition)
	switch {
	case !ok:
		return 0, errorf(http.StatusServiceUnavailable, kerr.LeaderNotAvailable.Message, "partition %d of %q has no leader to answer", partition, topic)
	case o.Err != nil:
		return 0, fromErr(o.Err)
	}
	return o.Offset, nil
}
