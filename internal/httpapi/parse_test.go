package httpapi

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParsePollQueryAndBody(t *testing.T) {
	tests := []struct {
		name, query, body string
		want              pollCall // compared when wantErr is empty
		wantErr           string
	}{
		{name: "body only (the design's GET /poll)", body: `{"group":"billing","topic":"orders","max_records":500}`,
			want: pollCall{key: instanceKey{"billing", "default"}, opts: instanceOptions{topic: "orders"}, maxRecords: 500,
				timeout: defaultPollWait, assignmentWait: defaultAssignmentWait}},
		{name: "query only", query: "group=g&topic=t&timeout_ms=250",
			want: pollCall{key: instanceKey{"g", "default"}, opts: instanceOptions{topic: "t"}, maxRecords: defaultMaxRecords,
				timeout: 250 * time.Millisecond, assignmentWait: 250 * time.Millisecond}},
		{name: "split over both", query: "group=g&consumer=c", body: `{"topic":"t","max_records":7}`,
			want: pollCall{key: instanceKey{"g", "c"}, opts: instanceOptions{topic: "t"}, maxRecords: 7,
				timeout: defaultPollWait, assignmentWait: defaultAssignmentWait}},
		{name: "same value in both", query: "group=g&topic=t&max_records=3", body: `{"group":"g","max_records":3}`,
			want: pollCall{key: instanceKey{"g", "default"}, opts: instanceOptions{topic: "t"}, maxRecords: 3,
				timeout: defaultPollWait, assignmentWait: defaultAssignmentWait}},
		{name: "timeout 0 answers at once", body: `{"group":"g","topic":"t","timeout_ms":0}`,
			want: pollCall{key: instanceKey{"g", "default"}, opts: instanceOptions{topic: "t"}, maxRecords: defaultMaxRecords}},
		{name: "group disagrees", query: "group=a&topic=t", body: `{"group":"b"}`, wantErr: `group: the query says "a", the body says "b"`},
		{name: "number disagrees", query: "group=g&topic=t&max_records=3", body: `{"max_records":4}`, wantErr: "max_records: the query says 3, the body says 4"},
		{name: "group in neither", body: `{"topic":"t"}`, wantErr: "group is required"},
		{name: "wrong type in the body", body: `{"group":"g","topic":"t","max_records":"5"}`, wantErr: "max_records"},
		{name: "unknown field in the body", body: `{"group":"g","topic":"t","maxRecords":5}`, wantErr: "maxRecords"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, aerr := parsePoll(q, []byte(tc.body))
			if tc.wantErr != "" {
				if aerr == nil || aerr.status != 400 || !strings.Contains(aerr.message, tc.wantErr) {
					t.Fatalf("got %+v, %v; want a 400 saying %q", got, aerr, tc.wantErr)
				}
				return
			}
			if aerr != nil {
				t.Fatal(aerr)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseAcks(t *testing.T) {
	for raw, want := range map[string]int16{``: -1, `null`: -1, `"all"`: -1, `-1`: -1, `"-1"`: -1, `0`: 0, `"0"`: 0, `1`: 1, `"1"`: 1} {
		got, _, err := parseAcksTimeout([]byte(raw), nil)
		if err != nil || got != want {
			t.Errorf("acks %s: got %d, %v; want %d", raw, got, err, want)
		}
	}
	for _, raw := range []string{`2`, `"2"`, `"ALL"`, `true`, `"one"`, `1.0`} {
		if _, _, err := parseAcksTimeout([]byte(raw), nil); err == nil || err.status != 400 {
			t.Errorf("acks %s: accepted", raw)
		}
	}
}

func TestParseCommitProcessed(t *testing.T) {
	tests := []struct {
		body       string
		wantOffset int64
		wantErr    string
	}{
		{`{"group":"g","topic":"t","partition":2,"offset":84511}`, 84511, ""},
		{`{"group":"g","topic":"t","partition":2,"processed":84510}`, 84511, ""},
		{`{"group":"g","topic":"t","partition":2,"processed":0}`, 1, ""},
		{`{"group":"g","topic":"t","partition":2,"offset":84511,"processed":84510}`, 0, "exclusive"},
		{`{"group":"g","topic":"t","partition":2,"processed":-1}`, 0, "processed: must not be negative"},
		{`{"group":"g","topic":"t","partition":2,"processed":9223372036854775807}`, 0, "processed: too large"},
		{`{"group":"g","processed":5}`, 0, "needs a partition"},
	}
	for _, tc := range tests {
		call, err := parseCommit([]byte(tc.body))
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.message, tc.wantErr)):
			t.Errorf("%s: got %+v, %v; want an error saying %q", tc.body, call, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || call.offset != tc.wantOffset):
			t.Errorf("%s: got %+v, %v; want offset %d", tc.body, call, err, tc.wantOffset)
		}
	}
}

func TestMemberClientID(t *testing.T) {
	for _, c := range []struct{ consumer, addr string }{{"default", "127.0.0.1:8080"}, {"a@b", "[::1]:80"}, {"", "h:1"}} {
		id := memberClientID(instanceKey{"g", c.consumer}, c.addr)
		consumer, addr, ok := parseMemberClientID(id)
		if !ok || consumer != c.consumer || addr != c.addr {
			t.Errorf("%q: parsed %q %q %v", id, consumer, addr, ok)
		}
	}
	for _, id := range []string{"strata-http-admin", "strata-http/noaddr", "kgo"} {
		if _, _, ok := parseMemberClientID(id); ok {
			t.Errorf("%q parsed as an HTTP member", id)
		}
	}
}

// TestTypeErrorMessages: a value of the wrong JSON type is answered in the API's
// terms (the field as the client wrote it, the JSON type wanted), not with Go's
// (recordJSON.partition, int32, []httpapi.headerJSON).
func TestTypeErrorMessages(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"topic":"t","partition":"1"}`, `partition: expected an integer from -2147483648 to 2147483647, got JSON string`},
		{`{"topic":"t","partition":99999999999}`, `partition: expected an integer from -2147483648 to 2147483647, got JSON number 99999999999`},
		{`{"topic":"t","key":42}`, `key: expected a string, got JSON number`},
		{`{"topic":"t","headers":{"a":"b"}}`, `headers: expected an array, got JSON object`},
		{`{"topic":"t","headers":[{"key":1}]}`, `headers.key: expected a string, got JSON number`},
		{`{"topic":"t","value_b64":7}`, `value_b64: expected a base64 string, got JSON number`},
		{`{"topic":"t","timeout_ms":1.5}`, `timeout_ms: expected an integer, got JSON number 1.5`},
		{`[]`, `the body: expected an object, got JSON array`},
		{`"x"`, `the body: expected an object, got JSON string`},
	} {
		_, err := parseProduce([]byte(tc.body))
		if err == nil || err.code != codeInvalidRequest || err.message != tc.want {
			t.Errorf("%s: got %v, want INVALID_REQUEST %q", tc.body, err, tc.want)
		}
	}
	_, err := parsePoll(nil, []byte(`{"group":"g","topic":"t","share":"true"}`))
	if want := `share: expected true or false, got JSON string`; err == nil || err.message != want {
		t.Errorf("share as a string: got %v, want %q", err, want)
	}
	_, err = parseRecords("t", []byte(`{"records":[{"partition":"x"}]}`))
	if want := `records.partition: expected an integer from -2147483648 to 2147483647, got JSON string`; err == nil || err.message != want {
		t.Errorf("records[].partition as a string: got %v, want %q", err, want)
	}
}

// TestDuplicateKeysRefused: a control body (every route's but produce's) that
// gives a key twice in one object is a 400 naming the key, not served with the
// last value; produce bodies are decoded in one pass, so their last value wins,
// and a duplicate inside a record's value is the record's data.
func TestDuplicateKeysRefused(t *testing.T) {
	var v struct {
		Topic   string            `json:"topic"`
		Group   string            `json:"group"`
		Configs map[string]string `json:"configs"`
		Offsets []struct {
			Partition int32 `json:"partition"`
		} `json:"offsets"`
	}
	for _, tc := range []struct{ body, key string }{
		{`{"topic":"a","topic":"b"}`, `"topic"`},
		{`{"group":"g","configs":{"x":"1","x":"2"}}`, `"configs.x"`},
		{`{"offsets":[{"partition":1},{"partition":1,"partition":2}]}`, `"offsets[1].partition"`},
	} {
		aerr := decodeControl([]byte(tc.body), &v)
		if aerr == nil || aerr.status != 400 || aerr.code != codeInvalidRequest || !strings.Contains(aerr.message, tc.key) {
			t.Errorf("%s: %v, want a 400 INVALID_REQUEST naming %s", tc.body, aerr, tc.key)
		}
	}
	for _, body := range []string{`{"topic":"a","group":"g"}`, `{"offsets":[{"partition":1},{"partition":2}]}`, `{"configs":{"x":"1","y":"1"}}`, ``} {
		if aerr := decodeControl([]byte(body), &v); aerr != nil {
			t.Errorf("%s: %v", body, aerr)
		}
	}
	if _, aerr := parsePoll(url.Values{}, []byte(`{"group":"g","topic":"a","topic":"b"}`)); aerr == nil || !strings.Contains(aerr.message, `"topic"`) {
		t.Errorf("poll with topic twice: %v, want a 400 naming topic", aerr)
	}
	call, aerr := parseProduce([]byte(`{"topic":"a","value":{"k":1,"k":2}}`))
	if aerr != nil || string(call.records[0].value) != `{"k":1,"k":2}` {
		t.Errorf("produce with a duplicate inside its value: %+v, %v; want the value as written", call, aerr)
	}
}
