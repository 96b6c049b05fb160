package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Poll limits and defaults.
const (
	defaultMaxRecords = 500
	maxMaxRecords     = 10000
	// defaultPollWait is how long a poll without timeout_ms waits for its first
	// record: long enough that a poll loop does not spin on an idle topic.
	defaultPollWait = time.Second
	// defaultAssignmentWait is how long the first poll of a new member without
	// timeout_ms waits for the group to assign it partitions: a new group waits
	// group.initial.rebalance.delay.ms (3 s) for more members before it assigns.
	defaultAssignmentWait = 10 * time.Second
)

// pollJSON is the body of GET and POST /poll; GET /poll also takes the same names
// as query parameters.
type pollJSON struct {
	Group            string `json:"group"`
	Topic            string `json:"topic"`
	Consumer         string `json:"consumer"`
	MaxRecords       *int64 `json:"max_records"`
	TimeoutMs        *int64 `json:"timeout_ms"`
	Reset            string `json:"reset"`
	SessionTimeoutMs *int64 `json:"session_timeout_ms"`
	Isolation        string `json:"isolation"`
	// Share polls as a share-group member (share.go).
	Share *bool `json:"share"`
}

// pollCall is a validated poll.
type pollCall struct {
	key        instanceKey
	opts       instanceOptions
	maxRecords int
	// timeout bounds the wait for the first record; assignmentWait bounds the
	// wait of a new member's first poll for its assignment. With timeout_ms both
	// fit in it; without, each has its default.
	timeout        time.Duration
	assignmentWait time.Duration
	// given says which of opts the poll set itself: an existing instance must
	// have those (optionsConflict).
	given struct{ reset, isolation, sessionTimeout bool }
}

// parsePoll reads a poll from its query parameters and its JSON body, either of
// which may be empty; a field given in both must have one value.
func parsePoll(q url.Values, body []byte) (pollCall, *apiError) {
	fromQuery, err := parsePollQuery(q)
	if err != nil {
		return pollCall{}, err
	}
	var fromBody pollJSON
	if err := decodeControl(body, &fromBody); err != nil {
		return pollCall{}, err
	}
	req, err := mergePoll(fromQuery, fromBody)
	if err != nil {
		return pollCall{}, err
	}
	return req.validate()
}

// parsePollQuery reads a poll's query parameters.
func parsePollQuery(q url.Values) (pollJSON, *apiError) {
	var req pollJSON
	for name, vals := range q {
		if len(vals) != 1 {
			return pollJSON{}, invalid("query parameter %s: given %d times", name, len(vals))
		}
		v := vals[0]
		var dst **int64
		switch name {
		case "group":
			req.Group = v
		case "topic":
			req.Topic = v
		case "consumer":
			req.Consumer = v
		case "reset":
			req.Reset = v
		case "isolation":
			req.Isolation = v
		case "share":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return pollJSON{}, invalid("query parameter share: not a boolean: %q", v)
			}
			req.Share = &b
		case "max_records":
			dst = &req.MaxRecords
		case "timeout_ms":
			dst = &req.TimeoutMs
		case "session_timeout_ms":
			dst = &req.SessionTimeoutMs
		default:
			return pollJSON{}, invalid("unknown query parameter %s", name)
		}
		if dst != nil {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return pollJSON{}, invalid("query parameter %s: not an integer: %q", name, v)
			}
			*dst = &n
		}
	}
	return req, nil
}

// mergePoll joins a poll's query parameters and body: each field from whichever
// gives it, and a 400 when both give it with different values.
func mergePoll(q, b pollJSON) (pollJSON, *apiError) {
	var err *apiError
	str := func(name string, qv, bv string) string {
		if qv != "" && bv != "" && qv != bv && err == nil {
			err = invalid("%s: the query says %q, the body says %q", name, qv, bv)
		}
		return cmp.Or(qv, bv)
	}
	num := func(name string, qv, bv *int64) *int64 {
		if qv != nil && bv != nil && *qv != *bv && err == nil {
			err = invalid("%s: the query says %d, the body says %d", name, *qv, *bv)
		}
		return cmp.Or(qv, bv)
	}
	m := pollJSON{
		Group:            str("group", q.Group, b.Group),
		Topic:            str("topic", q.Topic, b.Topic),
		Consumer:         str("consumer", q.Consumer, b.Consumer),
		Reset:            str("reset", q.Reset, b.Reset),
		Isolation:        str("isolation", q.Isolation, b.Isolation),
		MaxRecords:       num("max_records", q.MaxRecords, b.MaxRecords),
		TimeoutMs:        num("timeout_ms", q.TimeoutMs, b.TimeoutMs),
		SessionTimeoutMs: num("session_timeout_ms", q.SessionTimeoutMs, b.SessionTimeoutMs),
		Share:            cmp.Or(q.Share, b.Share),
	}
	if q.Share != nil && b.Share != nil && *q.Share != *b.Share && err == nil {
		err = invalid("share: the query says %t, the body says %t", *q.Share, *b.Share)
	}
	return m, err
}

func (req pollJSON) validate() (pollCall, *apiError) {
	if req.Group == "" {
		return pollCall{}, invalid("group is required")
	}
	if req.Topic == "" {
		return pollCall{}, invalid("topic is required")
	}
	call := pollCall{
		key:            instanceKey{req.Group, req.Consumer},
		opts:           instanceOptions{topic: req.Topic},
		maxRecords:     defaultMaxRecords,
		timeout:        defaultPollWait,
		assignmentWait: defaultAssignmentWait,
	}
	if call.key.consumer == "" {
		call.key.consumer = defaultConsumer
	}
	if req.MaxRecords != nil {
		if *req.MaxRecords < 1 || *req.MaxRecords > maxMaxRecords {
			return pollCall{}, invalid("max_records: must be between 1 and %d", maxMaxRecords)
		}
		call.maxRecords = int(*req.MaxRecords)
	}
	var err *apiError
	if req.TimeoutMs != nil {
		if call.timeout, err = parseTimeout("timeout_ms", req.TimeoutMs, 0, true); err != nil {
			return pollCall{}, err
		}
		call.assignmentWait = call.timeout
	}
	if req.SessionTimeoutMs != nil {
		if call.opts.sessionTimeout, err = parseTimeout("session_timeout_ms", req.SessionTimeoutMs, 0, false); err != nil {
			return pollCall{}, err
		}
	}
	call.opts.share = req.Share != nil && *req.Share
	call.given.reset, call.given.isolation, call.given.sessionTimeout = req.Reset != "", req.Isolation != "", req.SessionTimeoutMs != nil
	switch req.Reset {
	case "", "earliest":
	case "latest":
		call.opts.resetLatest = true
	default:
		return pollCall{}, invalid(`reset: must be "earliest" or "latest", got %q`, req.Reset)
	}
	switch req.Isolation {
	case "", "read_committed":
	case "read_uncommitted":
		call.opts.readUncommitted = true
	default:
		return pollCall{}, invalid(`isolation: must be "read_committed" or "read_uncommitted", got %q`, req.Isolation)
	}
	return call, nil
}

// recordOut is one record of a poll answer.
type recordOut struct {
	Partition int32           `json:"partition"`
	Offset    int64           `json:"offset"`
	Key       *string         `json:"key"`
	KeyB64    []byte          `json:"key_b64,omitempty"`
	Value     json.RawMessage `json:"value"`
	ValueB64  []byte          `json:"value_b64,omitempty"`
	Headers   []headerJSON    `json:"headers"`
	Timestamp int64           `json:"timestamp"`
}

// toRecordOut shows a record: a value that is JSON as that JSON, any other value
// in value_b64; a key or header value that is UTF-8 as a string, else base64.
func toRecordOut(r *kgo.Record) recordOut {
	out := recordOut{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Headers: []headerJSON{}}
	if r.Key != nil {
		if utf8.Valid(r.Key) {
			s := string(r.Key)
			out.Key = &s
		} else {
			out.KeyB64 = r.Key
		}
	}
	if r.Value != nil {
		if json.Valid(r.Value) {
			out.Value = r.Value
		} else {
			out.ValueB64 = r.Value
		}
	}
	for _, h := range r.Headers {
		hj := headerJSON{Key: h.Key}
		switch {
		case h.Value == nil:
		case utf8.Valid(h.Value):
			s := string(h.Value)
			hj.Value = &s
		default:
			hj.ValueB64 = h.Value
		}
		out.Headers = append(out.Headers, hj)
	}
	return out
}

type pollAnswer struct {
	Records []recordOut `json:"records"`
}

func (a *API) handlePoll(w http.ResponseWriter, r *http.Request) {
	body, aerr := readBody(w, r, a.cfg.MaxBodyBytes)
	var call pollCall
	if aerr == nil {
		call, aerr = parsePoll(r.URL.Query(), body)
	}
	if aerr == nil {
		aerr = authorize(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, call.opts.topic)
	}
	if aerr == nil {
		aerr = authorize(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, call.key.group)
	}
	if aerr == nil && a.topic(r.Context(), call.opts.topic) == nil {
		aerr = unknownTopic(call.opts.topic)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if call.opts.share {
		a.handleSharePoll(w, r, body, call)
		return
	}
	inst := a.consumers.lookup(call.key)
	if inst == nil {
		if a.forwarded(w, r, body, call.key, false) {
			return
		}
		if inst, aerr = a.consumers.acquire(call.key, call.opts); aerr != nil {
			writeError(w, aerr)
			return
		}
	} else if inst.topic != call.opts.topic {
		a.consumers.release(inst)
		writeError(w, consumerTopicConflict(call.key, inst.topic, call.opts.topic))
		return
	} else if inst.share != nil {
		a.consumers.release(inst)
		writeError(w, consumerKindConflict(call.key, "a share-group member", "a consumer-group poll"))
		return
	} else if aerr := optionsConflict(inst, call); aerr != nil {
		a.consumers.release(inst)
		writeError(w, aerr)
		return
	}
	err := inst.poll(r.Context(), call, func(recs []*kgo.Record) bool {
		a.markConsumerNode(w)
		return answerPoll(w, r, recs)
	})
	a.consumers.release(inst)
	if err != nil {
		aerr := fromErr(err)
		var session *kgo.ErrGroupSession
		if aerr.status == http.StatusBadRequest && errors.As(err, &session) {
			// The group refused the member (say, a session timeout outside the
			// coordinator's group.min/max.session.timeout.ms): drop it so a
			// corrected poll starts afresh.
			a.consumers.remove(r.Context(), call.key)
			aerr.message = fmt.Sprintf("the group coordinator refused consumer %q of group %q (session_timeout_ms %d): %s",
				call.key.consumer, call.key.group, inst.idleFor.Milliseconds(), aerr.message)
		}
		writeError(w, aerr)
	}
}

// answerPoll writes a poll's answer and reports whether the client was there to
// take it: the whole answer went into the connection, and the client had not gone
// away (closed the connection) before that.
func answerPoll(w http.ResponseWriter, r *http.Request, recs []*kgo.Record) bool {
	ans := pollAnswer{Records: make([]recordOut, len(recs))}
	for i, rec := range recs {
		ans.Records[i] = toRecordOut(rec)
	}
	err := writeJSON(w, http.StatusOK, ans)
	if err == nil {
		err = http.NewResponseController(w).Flush()
	}
	return err == nil && r.Context().Err() == nil
}

// optionsConflict is the 409 for a poll that asks an existing consumer-group
// instance for a reset, isolation or session timeout other than the one it was
// created with. They are fixed at creation (the member's client is built with
// them), and a poll asking for read_uncommitted must not be served committed
// records as if it had been heard.
func optionsConflict(inst *instance, call pollCall) *apiError {
	var what, has, asked string
	switch {
	case call.given.reset && call.opts.resetLatest != inst.opts.resetLatest:
		what, has, asked = "reset", resetName(inst.opts.resetLatest), resetName(call.opts.resetLatest)
	case call.given.isolation && call.opts.readUncommitted != inst.opts.readUncommitted:
		what, has, asked = "isolation", isolationName(inst.opts.readUncommitted), isolationName(call.opts.readUncommitted)
	case call.given.sessionTimeout && call.opts.sessionTimeout != inst.idleFor:
		what, has, asked = "session_timeout_ms", fmt.Sprint(inst.idleFor.Milliseconds()), fmt.Sprint(call.opts.sessionTimeout.Milliseconds())
	default:
		return nil
	}
	return errorf(http.StatusConflict, codeConsumerOptions,
		"consumer %q of group %q was created with %s %s, not %s: close it (DELETE /groups/%s/consumers/%s) or use another consumer name",
		inst.key.consumer, inst.key.group, what, has, asked, inst.key.group, inst.key.consumer)
}

func resetName(latest bool) string {
	if latest {
		return "latest"
	}
	return "earliest"
}

func isolationName(uncommitted bool) string {
	if uncommitted {
		return "read_uncommitted"
	}
	return "read_committed"
}

// poll hands answer up to call.maxRecords records from the instance's positions,
// waiting up to call.timeout for the first. When answer reports that the client
// did not get them, the positions go back to the first of them (rewind), so the
// next poll returns them again and a commit of the positions does not pass them. The first poll of a member also waits,
// up to call.assignmentWait, for the group to assign it partitions, so a new
// group's first poll returns the records there are; the group refusing the
// member ends that wait with the refusal. Later group errors come back as errors
// when no records do; answer is not called then.
//
// Once assigned, a new member still has to read its group's committed offsets
// (or list its reset offsets) before its first fetch, which on a busy machine
// can take longer than the poll's timeout. So the first poll resolves where the
// member starts itself (startsWithRecords): when its partitions hold records
// past that, it waits for the first of them as long as it waited for the
// assignment (call.assignmentWait, or what is left of timeout_ms); when they do
// not, it answers within the poll's own timeout.
func (inst *instance) poll(ctx context.Context, call pollCall, answer func([]*kgo.Record) bool) error {
	inst.pollMu.Lock()
	defer inst.pollMu.Unlock()
	wait := call.timeout
	if !inst.awaitedAssignment && call.assignmentWait > 0 {
		inst.awaitedAssignment = true
		start := time.Now()
		timer := time.NewTimer(call.assignmentWait)
		defer timer.Stop()
		assigned := false
		select {
		case <-inst.assigned:
			assigned = true
		case <-inst.groupFailed:
			return inst.groupErr
		case <-timer.C:
		case <-ctx.Done():
		}
		if call.assignmentWait == call.timeout {
			// One timeout_ms bounds the whole poll.
			wait = max(call.timeout-time.Since(start), 0)
		}
		if assigned && wait > 0 {
			if records, err := inst.startsWithRecords(ctx, max(call.assignmentWait-time.Since(start), 0)); err == nil && records {
				wait = max(wait, call.assignmentWait-time.Since(start))
			}
		}
	}
	var fs kgo.Fetches
	if wait == 0 {
		// A nil context makes the client hand over what it has buffered and return.
		var noWait context.Context
		fs = inst.cl.PollRecords(noWait, call.maxRecords)
	} else {
		ctx, cancel := context.WithTimeout(ctx, wait)
		fs = inst.cl.PollRecords(ctx, call.maxRecords)
		cancel()
	}
	recs := fs.Records()
	var first error
	fs.EachError(func(_ string, _ int32, err error) {
		if first == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			first = err
		}
	})
	if len(recs) == 0 && first != nil {
		return first
	}
	if !answer(recs) {
		inst.rewind(recs)
	}
	return nil
}

// rewind moves the instance's position in each partition of recs back to its
// first record there, unless something (a seek) has moved it since the poll that
// returned them. It runs under pollMu, before the next poll.
func (inst *instance) rewind(recs []*kgo.Record) {
	if len(recs) == 0 {
		return
	}
	first := map[int32]*kgo.Record{}
	last := map[int32]int64{}
	for _, rec := range recs {
		if first[rec.Partition] == nil {
			first[rec.Partition] = rec
		}
		last[rec.Partition] = rec.Offset
	}
	pos := inst.cl.UncommittedOffsets()[inst.topic]
	back := map[int32]kgo.EpochOffset{}
	for p, rec := range first {
		if pos[p].Offset == last[p]+1 {
			back[p] = kgo.EpochOffset{Epoch: rec.LeaderEpoch, Offset: rec.Offset}
		}
	}
	inst.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{inst.topic: back})
}

// startsWithRecords reports whether the member's first assigned partitions
// hold records past where it starts reading: its group's committed offset, or
// without one its reset offset (the log start, or the end with reset latest).
// The end is the last stable offset when reading committed data, else the
// high-water mark. It asks the cluster with the member's own client, within
// limit.
func (inst *instance) startsWithRecords(ctx context.Context, limit time.Duration) (bool, error) {
	if len(inst.partitions) == 0 {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	adm := kadm.NewClient(inst.cl)
	committed, err := adm.FetchOffsets(ctx, inst.key.group)
	if err != nil {
		return false, err
	}
	list := adm.ListCommittedOffsets
	if inst.opts.readUncommitted {
		list = adm.ListEndOffsets
	}
	ends, err := list(ctx, inst.topic)
	if err != nil {
		return false, err
	}
	var starts kadm.ListedOffsets
	if !inst.opts.resetLatest {
		if starts, err = adm.ListStartOffsets(ctx, inst.topic); err != nil {
			return false, err
		}
	}
	for _, p := range inst.partitions {
		end, ok := ends.Lookup(inst.topic, p)
		if !ok || end.Err != nil {
			return false, cmp.Or(end.Err, fmt.Errorf("no end offset for %s/%d", inst.topic, p))
		}
		from := end.Offset // reset latest: nothing before the end
		if c, ok := committed.Lookup(inst.topic, p); ok && c.Err == nil && c.At >= 0 {
			from = c.At
		} else if !inst.opts.resetLatest {
			s, ok := starts.Lookup(inst.topic, p)
			if !ok || s.Err != nil {
				return false, cmp.Or(s.Err, fmt.Errorf("no start offset for %s/%d", inst.topic, p))
			}
			from = s.Offset
		}
		if from < end.Offset {
			return true, nil
		}
	}
	return false, nil
}

// markConsumerNode names this node as the one holding the consumer instance the
// answer is about (see forward.go).
func (a *API) markConsumerNode(w http.ResponseWriter) {
	if a.cfg.AdvertisedAddr != "" {
		w.Header().Set(consumerNodeHeader, a.cfg.AdvertisedAddr)
	}
}

type closedAnswer struct {
	Group    string `json:"group"`
	Consumer string `json:"consumer"`
	Closed   bool   `json:"closed"`
}

func (a *API) handleCloseConsumer(w http.ResponseWriter, r *http.Request) {
	key := instanceKey{r.PathValue("group"), r.PathValue("consumer")}
	if !a.consumers.remove(r.Context(), key) {
		if a.forwarded(w, r, nil, key, false) {
			return
		}
		writeError(w, unknownConsumer(key))
		return
	}
	writeJSON(w, http.StatusOK, closedAnswer{key.group, key.consumer, true})
}

func unknownConsumer(key instanceKey) *apiError {
	return errorf(http.StatusNotFound, codeUnknownConsumer, "no consumer %q of group %q on this node (poll creates it)", key.consumer, key.group)
}
