package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/keyhash"
	"github.com/strata-stream/strata/internal/metadata"
)

// Request limits and defaults.
const (
	// defaultTimeout bounds produce acks (unless timeout_ms says otherwise), commits
	// and seeks.
	defaultTimeout = 30 * time.Second
	maxTimeout     = 5 * time.Minute
)

// recordJSON is one record of a produce request.
type recordJSON struct {
	Key       *string         `json:"key"`
	KeyB64    []byte          `json:"key_b64"`
	Value     json.RawMessage `json:"value"`
	ValueB64  []byte          `json:"value_b64"`
	Headers   []headerJSON    `json:"headers"`
	Partition *int32          `json:"partition"`
	Timestamp *int64          `json:"timestamp"`
}

// headerJSON is a record header, in requests and in poll answers.
type headerJSON struct {
	Key      string  `json:"key"`
	Value    *string `json:"value,omitempty"`
	ValueB64 []byte  `json:"value_b64,omitempty"`
}

// produceJSON is the body of POST /produce: one record and where it goes.
type produceJSON struct {
	Topic string `json:"topic"`
	recordJSON
	Acks      json.RawMessage `json:"acks"`
	TimeoutMs *int64          `json:"timeout_ms"`
}

// recordsJSON is the body of POST /topics/{topic}/records.
type recordsJSON struct {
	Records   []recordJSON    `json:"records"`
	Acks      json.RawMessage `json:"acks"`
	TimeoutMs *int64          `json:"timeout_ms"`
}

// produceRecord is a validated record. Partition is -1 until one is picked.
type produceRecord struct {
	key, value []byte // nil is null
	headers    []kmsg.Header
	partition  int32
	timestamp  int64 // ms; -1 until stamped
}

// produceCall is a validated produce request.
type produceCall struct {
	topic   string
	meta    *metadata.Topic // set by prepare
	acks    int16
	timeout time.Duration
	records []produceRecord
}

// produceResult is one record's outcome.
type produceResult struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Error     *apiError `json:"-"`
}

// parseProduce validates the body of POST /produce.
func parseProduce(body []byte) (produceCall, *apiError) {
	var req produceJSON
	if err := decodeJSON(body, &req); err != nil {
		return produceCall{}, err
	}
	if req.Topic == "" {
		return produceCall{}, invalid("topic is required")
	}
	call := produceCall{topic: req.Topic}
	var err *apiError
	if call.acks, call.timeout, err = parseAcksTimeout(req.Acks, req.TimeoutMs); err != nil {
		return produceCall{}, err
	}
	rec, err := parseRecord(req.recordJSON, "")
	if err != nil {
		return produceCall{}, err
	}
	call.records = []produceRecord{rec}
	return call, nil
}

// parseRecords validates the body of POST /topics/{topic}/records.
func parseRecords(topic string, body []byte) (produceCall, *apiError) {
	var req recordsJSON
	if err := decodeJSON(body, &req); err != nil {
		return produceCall{}, err
	}
	if len(req.Records) == 0 {
		return produceCall{}, invalid("records: at least one record is required")
	}
	call := produceCall{topic: topic, records: make([]produceRecord, len(req.Records))}
	var err *apiError
	if call.acks, call.timeout, err = parseAcksTimeout(req.Acks, req.TimeoutMs); err != nil {
		return produceCall{}, err
	}
	for i, r := range req.Records {
		if call.records[i], err = parseRecord(r, recordField(i)); err != nil {
			return produceCall{}, err
		}
	}
	return call, nil
}

func recordField(i int) string { return fmt.Sprintf("records[%d].", i) }

// parseAcksTimeout reads acks (0, 1, -1 or "all", as a number or a string;
// default all) and timeout_ms.
func parseAcksTimeout(raw json.RawMessage, timeoutMs *int64) (int16, time.Duration, *apiError) {
	acks := int16(-1)
	switch s := string(bytes.TrimSpace(raw)); s {
	case "", "null", `"all"`, "-1", `"-1"`:
	case "0", `"0"`:
		acks = 0
	case "1", `"1"`:
		acks = 1
	default:
		return 0, 0, invalid(`acks: must be 0, 1, -1 or "all", got %s`, s)
	}
	timeout, err := parseTimeout("timeout_ms", timeoutMs, defaultTimeout, false)
	return acks, timeout, err
}

// parseTimeout reads a millisecond field into a duration bounded by maxTimeout.
func parseTimeout(field string, ms *int64, def time.Duration, zeroOK bool) (time.Duration, *apiError) {
	if ms == nil {
		return def, nil
	}
	if *ms < 0 || (*ms == 0 && !zeroOK) || *ms > maxTimeout.Milliseconds() { // compared in ms: the product overflows
		low := "1"
		if zeroOK {
			low = "0"
		}
		return 0, invalid("%s: must be between %s and %d", field, low, maxTimeout.Milliseconds())
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

// parseRecord validates one record; prefix names it in errors.
func parseRecord(r recordJSON, prefix string) (produceRecord, *apiError) {
	rec := produceRecord{partition: -1, timestamp: -1}
	switch {
	case r.Key != nil && r.KeyB64 != nil:
		return rec, invalid("%skey and %skey_b64 are exclusive", prefix, prefix)
	case r.Key != nil:
		rec.key = []byte(*r.Key)
	case r.KeyB64 != nil:
		rec.key = r.KeyB64
	}
	hasValue := len(r.Value) > 0 && string(r.Value) != "null"
	switch {
	case hasValue && r.ValueB64 != nil:
		return rec, invalid("%svalue and %svalue_b64 are exclusive", prefix, prefix)
	case hasValue:
		var buf bytes.Buffer
		if err := json.Compact(&buf, r.Value); err != nil {
			return rec, invalid("%svalue: %v", prefix, err)
		}
		rec.value = buf.Bytes()
	case r.ValueB64 != nil:
		rec.value = r.ValueB64
	}
	for i, h := range r.Headers {
		if h.Value != nil && h.ValueB64 != nil {
			return rec, invalid("%sheaders[%d]: value and value_b64 are exclusive", prefix, i)
		}
		kh := kmsg.Header{Key: h.Key, Value: h.ValueB64}
		if h.Value != nil {
			kh.Value = []byte(*h.Value)
		}
		rec.headers = append(rec.headers, kh)
	}
	if r.Partition != nil {
		if *r.Partition < 0 {
			return rec, invalid("%spartition: must not be negative", prefix)
		}
		rec.partition = *r.Partition
	}
	if r.Timestamp != nil {
		if *r.Timestamp < 0 {
			return rec, invalid("%stimestamp: must not be negative", prefix)
		}
		rec.timestamp = *r.Timestamp
	}
	return rec, nil
}

// place picks each record's partition (the key's murmur2 partition, as Kafka's
// clients do; round robin without a key) and stamps missing timestamps.
func (a *API) place(t *metadata.Topic, recs []produceRecord) *apiError {
	n := int32(len(t.Partitions))
	now := time.Now().UnixMilli()
	for i := range recs {
		r := &recs[i]
		switch {
		case r.partition >= n:
			return unknownPartition(t.Name, r.partition)
		case r.partition >= 0:
		case r.key != nil:
			r.partition = keyhash.Partition(r.key, n)
		default:
			r.partition = int32(a.spread.Add(1) % uint32(n))
		}
		if r.timestamp < 0 {
			r.timestamp = now
		}
	}
	return nil
}

// prepare checks the topic and places the records.
func (a *API) prepare(ctx context.Context, call *produceCall) *apiError {
	t := a.topic(ctx, call.topic)
	if t == nil || len(t.Partitions) == 0 {
		return unknownTopic(call.topic)
	}
	call.meta = t
	return a.place(t, call.records)
}

func (a *API) handleProduce(w http.ResponseWriter, r *http.Request) {
	body, aerr := readBody(w, r, a.cfg.MaxBodyBytes)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	call, aerr := parseProduce(body)
	if aerr == nil {
		aerr = authorize(r, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, call.topic)
	}
	if aerr == nil {
		aerr = a.prepare(r.Context(), &call)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	res := a.produce(r.Context(), call)[0]
	if res.Error != nil {
		writeError(w, res.Error)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// recordResult is one entry of the batch answer: an offset or an error.
type recordResult struct {
	Partition int32        `json:"partition"`
	Offset    *int64       `json:"offset,omitempty"`
	Error     *errorDetail `json:"error,omitempty"`
}

type recordsAnswer struct {
	Results []recordResult `json:"results"`
}

func (a *API) handleProduceBatch(w http.ResponseWriter, r *http.Request) {
	body, aerr := readBody(w, r, a.cfg.MaxBodyBytes)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	call, aerr := parseRecords(r.PathValue("topic"), body)
	if aerr == nil {
		aerr = a.prepare(r.Context(), &call)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	results := a.produce(r.Context(), call)
	ans := recordsAnswer{Results: make([]recordResult, len(results))}
	for i, res := range results {
		rr := recordResult{Partition: res.Partition}
		if res.Error != nil {
			rr.Error = &errorDetail{res.Error.code, res.Error.message}
		} else {
			off := res.Offset
			rr.Offset = &off
		}
		ans.Results[i] = rr
	}
	writeJSON(w, http.StatusOK, ans)
}
