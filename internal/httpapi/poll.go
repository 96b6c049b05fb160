package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Poll limits and defaults.
const (
	defaultMaxRecords = 500
	maxMaxRecords     = 10000
)

// pollJSON is the body of POST /poll; GET /poll takes the same names as query
// parameters.
type pollJSON struct {
	Group            string `json:"group"`
	Topic            string `json:"topic"`
	Consumer         string `json:"consumer"`
	MaxRecords       *int64 `json:"max_records"`
	TimeoutMs        *int64 `json:"timeout_ms"`
	Reset            string `json:"reset"`
	SessionTimeoutMs *int64 `json:"session_timeout_ms"`
	Isolation        string `json:"isolation"`
}

// pollCall is a validated poll.
type pollCall struct {
	key        instanceKey
	opts       instanceOptions
	maxRecords int
	timeout    time.Duration
}

func parsePoll(body []byte) (pollCall, *apiError) {
	var req pollJSON
	if err := decodeJSON(body, &req); err != nil {
		return pollCall{}, err
	}
	return req.validate()
}

// parsePollQuery reads GET /poll's query parameters.
func parsePollQuery(q url.Values) (pollCall, *apiError) {
	var req pollJSON
	for name, vals := range q {
		if len(vals) != 1 {
			return pollCall{}, invalid("query parameter %s: given %d times", name, len(vals))
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
		case "max_records":
			dst = &req.MaxRecords
		case "timeout_ms":
			dst = &req.TimeoutMs
		case "session_timeout_ms":
			dst = &req.SessionTimeoutMs
		default:
			return pollCall{}, invalid("unknown query parameter %s", name)
		}
		if dst != nil {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return pollCall{}, invalid("query parameter %s: not an integer: %q", name, v)
			}
			*dst = &n
		}
	}
	return req.validate()
}

func (req pollJSON) validate() (pollCall, *apiError) {
	if req.Group == "" {
		return pollCall{}, invalid("group is required")
	}
	if req.Topic == "" {
		return pollCall{}, invalid("topic is required")
	}
	call := pollCall{
		key:        instanceKey{req.Group, req.Consumer},
		opts:       instanceOptions{topic: req.Topic},
		maxRecords: defaultMaxRecords,
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
	if call.timeout, err = parseTimeout("timeout_ms", req.TimeoutMs, 0, true); err != nil {
		return pollCall{}, err
	}
	if req.SessionTimeoutMs != nil {
		if call.opts.sessionTimeout, err = parseTimeout("session_timeout_ms", req.SessionTimeoutMs, 0, false); err != nil {
			return pollCall{}, err
		}
	}
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
	var call pollCall
	var aerr *apiError
	if r.Method == http.MethodGet {
		call, aerr = parsePollQuery(r.URL.Query())
	} else {
		var body []byte
		if body, aerr = readBody(w, r, a.cfg.MaxBodyBytes); aerr == nil {
			call, aerr = parsePoll(body)
		}
	}
	if aerr == nil && a.cfg.Cluster.Image().Topic(call.opts.topic) == nil {
		aerr = unknownTopic(call.opts.topic)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	inst, aerr := a.consumers.acquire(call.key, call.opts)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	recs, err := inst.poll(r.Context(), call.maxRecords, call.timeout)
	a.consumers.release(inst)
	if err != nil {
		aerr := fromErr(err)
		if aerr.status == http.StatusBadRequest {
			// The group refused the member (say, a session timeout out of the
			// broker's range): drop it so a corrected poll starts afresh.
			a.consumers.remove(r.Context(), call.key)
		}
		writeError(w, aerr)
		return
	}
	ans := pollAnswer{Records: make([]recordOut, len(recs))}
	for i, rec := range recs {
		ans.Records[i] = toRecordOut(rec)
	}
	writeJSON(w, http.StatusOK, ans)
}

// poll returns up to max records from the instance's positions, waiting up to
// timeout for the first. Group errors (the member was refused, say) come back as
// errors when no records do.
func (inst *instance) poll(ctx context.Context, max int, timeout time.Duration) ([]*kgo.Record, error) {
	inst.pollMu.Lock()
	defer inst.pollMu.Unlock()
	var fs kgo.Fetches
	if timeout == 0 {
		// A nil context makes the client hand over what it has buffered and return.
		var noWait context.Context
		fs = inst.cl.PollRecords(noWait, max)
	} else {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		fs = inst.cl.PollRecords(ctx, max)
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
		return nil, first
	}
	return recs, nil
}

type closedAnswer struct {
	Group    string `json:"group"`
	Consumer string `json:"consumer"`
	Closed   bool   `json:"closed"`
}

func (a *API) handleCloseConsumer(w http.ResponseWriter, r *http.Request) {
	key := instanceKey{r.PathValue("group"), r.PathValue("consumer")}
	if !a.consumers.remove(r.Context(), key) {
		writeError(w, unknownConsumer(key))
		return
	}
	writeJSON(w, http.StatusOK, closedAnswer{key.group, key.consumer, true})
}

func unknownConsumer(key instanceKey) *apiError {
	return errorf(http.StatusNotFound, codeUnknownConsumer, "no consumer %q of group %q on this node (poll creates it)", key.consumer, key.group)
}
