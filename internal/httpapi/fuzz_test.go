package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/admin"
	"github.com/strata-stream/strata/internal/metadata"
)

// emptyCluster is a cluster with no topics: every request that gets past its
// validation stops at "unknown topic" before reaching a broker.
type emptyCluster struct{}

func (emptyCluster) Image() *metadata.Image { return metadata.NewImage() }

// fuzzTargets are the JSON endpoints the fuzzer drives, by index.
var fuzzTargets = []struct{ method, path string }{
	{"POST", "/produce"},
	{"POST", "/topics/t/records"},
	{"POST", "/poll"},
	{"GET", "/poll"}, // the fuzzed bytes are the query string, a newline, the body
	{"POST", "/commit"},
	{"POST", "/groups/g/seek"},
	{"POST", "/topics"}, // the parser only: a valid request would reach a broker
}

// FuzzHandlers sends arbitrary bodies to the JSON handlers: none may panic or
// answer 500, every refusal is a 4xx with a well-formed error body, and whatever a
// parser accepts satisfies its invariants.
func FuzzHandlers(f *testing.F) {
	seeds := map[int][]string{
		0: {`{"topic":"t","key":"k","value":{"a":[1,2]},"headers":[{"key":"h","value":"v"}],"partition":0,"acks":"all"}`,
			`{"topic":"t","value_b64":"AAE=","acks":0,"timeout_ms":10}`, `{"topic":"t","key":"a","key_b64":"YQ=="}`,
			`{"topic":5}`, `{"topic":"t","acks":2}`, `{"topic":"t"} x`, `[`, ``},
		1: {`{"records":[{"value":1},{"key":"k","partition":2,"timestamp":5}]}`, `{"records":[]}`, `{"records":[{"headers":[{"key":1}]}]}`},
		2: {`{"group":"g","topic":"t","max_records":10,"timeout_ms":0,"reset":"latest","consumer":"c"}`, `{"group":"g"}`, `{"group":"g","topic":"t","session_timeout_ms":-1}`},
		3: {`group=g&topic=t&max_records=5`, `group=g&topic=t&timeout_ms=x`, `group=g&group=h&topic=t`, `%zz`, `group=g&topic=t&bogus=1`,
			"group=g\n{\"topic\":\"t\",\"max_records\":5}", "group=g&topic=t\n{\"group\":\"h\"}", "\n{\"group\":\"g\",\"topic\":\"t\"}"},
		4: {`{"group":"g"}`, `{"group":"g","topic":"t","partition":0,"offset":5}`, `{"group":"g","offset":1}`, `{"group":"g","topic":"t","partition":0}`},
		5: {`{"topic":"t","to":"earliest"}`, `{"topic":"t","timestamp":1,"offset":2}`, `{"topic":"t","partition":1,"offset":3}`, `{"to":"latest"}`},
		6: {`{"topic":"t","partitions":3,"replication_factor":1,"retention":"7d"}`, `{"topic":"t","retention":"500MB","configs":{"a":"b"}}`,
			`{"topic":"t","retention":"7d","configs":{"retention.ms":"1"}}`, `{"topic":"t","partitions":0}`, `{"topic":"t","retention":"9999999999999999TiB"}`},
	}
	for op, bodies := range seeds {
		for _, b := range bodies {
			f.Add(uint8(op), []byte(b))
		}
	}
	a, err := New(Config{KafkaAddr: "127.0.0.1:1", Cluster: emptyCluster{}, MaxBodyBytes: 1 << 16, TopicWait: time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { a.Close(context.Background()) })
	mux := http.NewServeMux()
	a.Register(mux)

	f.Fuzz(func(t *testing.T, op uint8, body []byte) {
		target := fuzzTargets[int(op)%len(fuzzTargets)]
		if target.path == "/topics" {
			checkCreateTopic(t, body)
			return
		}
		var req *http.Request
		if target.method == "GET" {
			query, rest := splitQueryBody(body)
			req = httptest.NewRequest("GET", "/poll", bytes.NewReader(rest))
			req.URL.RawQuery = query
		} else {
			req = httptest.NewRequest(target.method, target.path, bytes.NewReader(body))
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("%s %s %q: status %d: %s", target.method, target.path, body, rec.Code, rec.Body)
		}
		var e errorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Fatalf("%s %s %q: error body %q (%v)", target.method, target.path, body, rec.Body, err)
		}
		if target.method == "GET" {
			checkParsed(t, "GET /poll", body)
		} else {
			checkParsed(t, target.path, body)
		}
	})
}

// splitQueryBody reads a fuzzed GET /poll: the query string up to the first
// newline, the body after it.
func splitQueryBody(b []byte) (string, []byte) {
	q, body, _ := bytes.Cut(b, []byte("\n"))
	return string(q), body
}

// checkParsed holds a parser's accepted output to its invariants.
func checkParsed(t *testing.T, path string, body []byte) {
	switch path {
	case "/produce", "/topics/t/records":
		var call produceCall
		var err *apiError
		if path == "/produce" {
			call, err = parseProduce(body)
		} else {
			call, err = parseRecords("t", body)
		}
		if err != nil {
			return
		}
		if call.topic == "" || len(call.records) == 0 || call.acks < -1 || call.acks > 1 || call.timeout <= 0 || call.timeout > maxTimeout {
			t.Fatalf("%q: accepted %+v", body, call)
		}
		for _, r := range call.records {
			if r.partition < -1 || r.timestamp < -1 {
				t.Fatalf("%q: accepted record %+v", body, r)
			}
		}
	case "/poll", "GET /poll":
		var q url.Values
		if path == "GET /poll" {
			query, rest := splitQueryBody(body)
			var err error
			if q, err = url.ParseQuery(query); err != nil {
				return
			}
			body = rest
		}
		call, err := parsePoll(q, body)
		if err != nil {
			return
		}
		if call.key.group == "" || call.key.consumer == "" || call.opts.topic == "" || call.maxRecords < 1 || call.maxRecords > maxMaxRecords ||
			call.timeout < 0 || call.timeout > maxTimeout || call.opts.sessionTimeout < 0 {
			t.Fatalf("%q: accepted %+v", body, call)
		}
	case "/commit":
		call, err := parseCommit(body)
		if err != nil {
			return
		}
		if call.key.group == "" || (call.partition < 0) != (call.offset < 0) || (call.partition >= 0 && call.topic == "") {
			t.Fatalf("%q: accepted %+v", body, call)
		}
	case "/groups/g/seek":
		call, err := parseSeek("g", body)
		if err != nil {
			return
		}
		if call.topic == "" || call.partition < -1 || call.target.Offset < 0 || call.target.Millis < 0 || call.target.Kind > admin.OffsetTime {
			t.Fatalf("%q: accepted %+v", body, call)
		}
	}
}

func checkCreateTopic(t *testing.T, body []byte) {
	call, err := parseCreateTopic(body)
	if err != nil {
		if err.status != http.StatusBadRequest || err.code == "" || err.message == "" {
			t.Fatalf("%q: refused with %+v", body, err)
		}
		return
	}
	if call.topic == "" || call.partitions == 0 || call.partitions < -1 || call.replicationFactor == 0 || call.replicationFactor < -1 {
		t.Fatalf("%q: accepted %+v", body, call)
	}
	for _, key := range []string{"retention.ms", "retention.bytes"} {
		v, ok := call.configs[key]
		if !ok || !strings.Contains(string(body), "retention\"") {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < -1 {
			t.Fatalf("%q: %s=%q", body, key, v)
		}
	}
}
