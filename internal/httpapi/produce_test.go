package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/keyhash"
)

// readAll reads every record of topic through a franz-go consumer: the bytes the
// log holds.
func (n *testNode) readAll(topic string, want int) []*kgo.Record {
	n.t.Helper()
	cl, _ := n.kafka(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var recs []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(recs) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			n.t.Fatalf("read %d of %d records of %s", len(recs), want, topic)
		}
		recs = append(recs, fs.Records()...)
	}
	slices.SortFunc(recs, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return recs
}

// TestProduceStoresJSON: what each form of key, value and header is stored as,
// and how a poll shows it again.
func TestProduceStoresJSON(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("encodings", 1)
	cases := []struct {
		name      string
		record    map[string]any
		key, val  []byte // stored bytes; nil is null
		headers   []kgo.RecordHeader
		polled    string // the poll's record, without partition, offset and timestamp
		polledRaw string // set when the stored value is not JSON
	}{
		{"string value keeps its quotes", map[string]any{"value": "abc"}, nil, []byte(`"abc"`), nil,
			`{"key":null,"value":"abc","headers":[]}`, ""},
		{"object value is compact JSON", map[string]any{"key": "k1", "value": json.RawMessage(`{ "a" : [1, 2.50, true] }`)}, []byte("k1"), []byte(`{"a":[1,2.50,true]}`), nil,
			`{"key":"k1","value":{"a":[1,2.50,true]},"headers":[]}`, ""},
		{"number value", map[string]any{"value": 42}, nil, []byte(`42`), nil,
			`{"key":null,"value":42,"headers":[]}`, ""},
		{"null value is a tombstone", map[string]any{"key": "gone", "value": nil}, []byte("gone"), nil, nil,
			`{"key":"gone","value":null,"headers":[]}`, ""},
		{"binary value and key", map[string]any{"key_b64": base64.StdEncoding.EncodeToString([]byte{0xff, 0}), "value_b64": base64.StdEncoding.EncodeToString([]byte("not json"))},
			[]byte{0xff, 0}, []byte("not json"), nil,
			`{"key":null,"key_b64":"/wA=","value":null,"value_b64":"` + base64.StdEncoding.EncodeToString([]byte("not json")) + `","headers":[]}`, ""},
		{"headers", map[string]any{"value": true, "headers": []map[string]any{{"key": "trace", "value": "t-1"}, {"key": "bin", "value_b64": "/wA="}, {"key": "nil"}}},
			nil, []byte("true"), []kgo.RecordHeader{{Key: "trace", Value: []byte("t-1")}, {Key: "bin", Value: []byte{0xff, 0}}, {Key: "nil"}},
			`{"key":null,"value":true,"headers":[{"key":"trace","value":"t-1"},{"key":"bin","value_b64":"/wA="},{"key":"nil"}]}`, ""},
	}
	for i, tc := range cases {
		rec := map[string]any{"topic": "encodings"}
		for k, v := range tc.record {
			rec[k] = v
		}
		var res struct{ Partition, Offset int64 }
		n.must(http.StatusOK, "POST", "/produce", rec).json(t, &res)
		if res.Partition != 0 || res.Offset != int64(i) {
			t.Fatalf("%s: produced at %+v, want offset %d", tc.name, res, i)
		}
	}
	stored := n.readAll("encodings", len(cases))
	var polled struct{ Records []map[string]json.RawMessage }
	n.must(http.StatusOK, "GET", "/poll?group=encodings&topic=encodings&timeout_ms=10000", nil).json(t, &polled)
	for len(polled.Records) < len(cases) {
		var more struct{ Records []map[string]json.RawMessage }
		n.must(http.StatusOK, "GET", "/poll?group=encodings&topic=encodings&timeout_ms=10000", nil).json(t, &more)
		polled.Records = append(polled.Records, more.Records...)
	}
	for i, tc := range cases {
		r := stored[i]
		if !bytes.Equal(r.Key, tc.key) || (r.Key == nil) != (tc.key == nil) {
			t.Errorf("%s: stored key %q, want %q", tc.name, r.Key, tc.key)
		}
		if !bytes.Equal(r.Value, tc.val) || (r.Value == nil) != (tc.val == nil) {
			t.Errorf("%s: stored value %q, want %q", tc.name, r.Value, tc.val)
		}
		if len(r.Headers) != len(tc.headers) {
			t.Errorf("%s: stored headers %v, want %v", tc.name, r.Headers, tc.headers)
		}
		for j := range tc.headers {
			if j < len(r.Headers) && (r.Headers[j].Key != tc.headers[j].Key || !bytes.Equal(r.Headers[j].Value, tc.headers[j].Value)) {
				t.Errorf("%s: stored header %d %v, want %v", tc.name, j, r.Headers[j], tc.headers[j])
			}
		}
		got := polled.Records[i]
		for _, k := range []string{"partition", "offset", "timestamp"} {
			if _, ok := got[k]; !ok {
				t.Errorf("%s: poll answer lacks %s", tc.name, k)
			}
			delete(got, k)
		}
		if b, _ := json.Marshal(got); !sameJSONText(t, string(b), tc.polled) {
			t.Errorf("%s: polled %s, want %s", tc.name, b, tc.polled)
		}
	}
}

// sameJSONText compares two JSON texts, ignoring key order and spacing.
func sameJSONText(t testing.TB, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}

// TestProducePartitioning: a key goes where Kafka's clients put it (checked
// against franz-go's default partitioner), records without a key go round robin,
// and an explicit partition wins.
func TestProducePartitioning(t *testing.T) {
	n := sharedNode(t)
	n.createTopic("placement", 4)
	cl, _ := n.kafka(kgo.DefaultProduceTopic("placement"))
	for _, key := range []string{"user-1", "user-2", "order-17", "", "ключ"} {
		var res struct{ Partition int32 }
		n.must(http.StatusOK, "POST", "/produce", map[string]any{"topic": "placement", "key": key, "value": 1}).json(t, &res)
		if want := keyhash.Partition([]byte(key), 4); res.Partition != want {
			t.Errorf("key %q: partition %d, keyhash says %d", key, res.Partition, want)
		}
		kr, err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte(key), Value: []byte("1")}).First()
		if err != nil {
			t.Fatal(err)
		}
		if kr.Partition != res.Partition {
			t.Errorf("key %q: HTTP picked partition %d, franz-go %d", key, res.Partition, kr.Partition)
		}
	}

	counts := map[int32]int{}
	for range 8 {
		var res struct{ Partition int32 }
		n.must(http.StatusOK, "POST", "/produce", map[string]any{"topic": "placement", "value": 1}).json(t, &res)
		counts[res.Partition]++
	}
	for p := range int32(4) {
		if counts[p] != 2 {
			t.Fatalf("8 records without a key spread %v, want 2 per partition", counts)
		}
	}

	var res struct{ Partition int32 }
	n.must(http.StatusOK, "POST", "/produce", map[string]any{"topic": "placement", "key": "user-1", "partition": 3, "value": 1}).json(t, &res)
	if res.Partition != 3 {
		t.Fatalf("explicit partition 3 produced to %d", res.Partition)
	}
}

// TestProduceAcks: every acks level appends; acks=0 reports no offset.
func TestProduceAcks(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("acks", 1)
	for i, tc := range []struct {
		acks   any
		offset int64
	}{{"all", 0}, {-1, 1}, {1, 2}, {0, -1}, {nil, 4}} {
		var res struct{ Offset int64 }
		n.must(http.StatusOK, "POST", "/produce", map[string]any{"topic": "acks", "value": i, "acks": tc.acks}).json(t, &res)
		if res.Offset != tc.offset {
			t.Errorf("acks %v: offset %d, want %d", tc.acks, res.Offset, tc.offset)
		}
	}
	if recs := n.readAll("acks", 5); recs[3].Offset != 3 || string(recs[3].Value) != "3" {
		t.Fatalf("the acks=0 record is not at offset 3: %v", recs[3])
	}
}

// TestProduceBatch: one result per record in request order; a partition's failure
// fails only its records.
func TestProduceBatch(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.must(http.StatusCreated, "POST", "/topics", map[string]any{"topic": "batch", "partitions": 2, "configs": map[string]string{"max.message.bytes": "2000"}})
	big := strings.Repeat("x", 3000)
	var ans struct {
		Results []struct {
			Partition int32
			Offset    *int64
			Error     *struct{ Code, Message string }
		}
	}
	n.must(http.StatusOK, "POST", "/topics/batch/records", map[string]any{"records": []map[string]any{
		{"partition": 0, "value": "a"},
		{"partition": 1, "value": big},
		{"partition": 0, "value": "b"},
		{"partition": 0, "key": "k", "value": "c", "timestamp": 1700000000000},
	}}).json(t, &ans)
	if len(ans.Results) != 4 {
		t.Fatalf("%d results for 4 records", len(ans.Results))
	}
	for i, want := range []int64{0, -1, 1, 2} {
		r := ans.Results[i]
		switch {
		case want < 0 && (r.Error == nil || r.Error.Code != "MESSAGE_TOO_LARGE" || r.Offset != nil):
			t.Errorf("record %d: %+v, want a MESSAGE_TOO_LARGE error", i, r)
		case want >= 0 && (r.Error != nil || r.Offset == nil || *r.Offset != want):
			t.Errorf("record %d: %+v, want offset %d", i, r, want)
		}
	}
	recs := n.readAll("batch", 3)
	if got := recs[2].Timestamp.UnixMilli(); got != 1700000000000 {
		t.Errorf("record timestamp %d, want the one given", got)
	}
}

// TestProduceErrors: every kind of bad produce gets its status and code, never a
// 500, and nothing is appended.
func TestProduceErrors(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("errs", 2)
	n.must(http.StatusCreated, "POST", "/topics", map[string]any{"topic": "errs-small", "partitions": 1, "configs": map[string]string{"max.message.bytes": "1000"}})
	n.must(http.StatusCreated, "POST", "/topics", map[string]any{"topic": "errs-isr", "partitions": 1, "configs": map[string]string{"min.insync.replicas": "2"}})
	n.must(http.StatusCreated, "POST", "/topics", map[string]any{"topic": "errs-old", "partitions": 1, "configs": map[string]string{"message.timestamp.before.max.ms": "3600000"}})
	huge := `{"topic":"errs","value":"` + strings.Repeat("x", 17<<20) + `"}`
	twoHoursAhead := time.Now().Add(2 * time.Hour).UnixMilli()
	for _, tc := range []struct {
		name   string
		path   string
		body   any
		status int
		code   string
	}{
		{"malformed JSON", "/produce", `{"topic":"errs",`, 400, "MALFORMED_JSON"},
		{"not an object", "/produce", `[1,2]`, 400, "INVALID_REQUEST"},
		{"trailing data", "/produce", `{"topic":"errs"} {}`, 400, "MALFORMED_JSON"},
		{"topic of the wrong type", "/produce", `{"topic":5}`, 400, "INVALID_REQUEST"},
		{"missing topic", "/produce", `{"value":1}`, 400, "INVALID_REQUEST"},
		{"unknown field", "/produce", `{"topic":"errs","valeu":1}`, 400, "INVALID_REQUEST"},
		{"bad acks", "/produce", `{"topic":"errs","acks":2}`, 400, "INVALID_REQUEST"},
		{"acks as a word", "/produce", `{"topic":"errs","acks":"some"}`, 400, "INVALID_REQUEST"},
		{"key and key_b64", "/produce", `{"topic":"errs","key":"a","key_b64":"YQ=="}`, 400, "INVALID_REQUEST"},
		{"value and value_b64", "/produce", `{"topic":"errs","value":1,"value_b64":"YQ=="}`, 400, "INVALID_REQUEST"},
		{"bad base64", "/produce", `{"topic":"errs","value_b64":"%%%"}`, 400, "INVALID_REQUEST"},
		{"negative partition", "/produce", `{"topic":"errs","partition":-1}`, 400, "INVALID_REQUEST"},
		{"fractional partition", "/produce", `{"topic":"errs","partition":0.5}`, 400, "INVALID_REQUEST"},
		{"huge partition", "/produce", `{"topic":"errs","partition":99999999999}`, 400, "INVALID_REQUEST"},
		{"zero timeout", "/produce", `{"topic":"errs","timeout_ms":0}`, 400, "INVALID_REQUEST"},
		// Once accepted (its nanoseconds overflowed): appended, then answered 504.
		{"timeout of the largest int64", "/produce", `{"topic":"errs","value":1,"timeout_ms":9223372036854775807}`, 400, "INVALID_REQUEST"},
		{"negative timestamp", "/produce", `{"topic":"errs","timestamp":-5}`, 400, "INVALID_REQUEST"},
		{"header without a string key", "/produce", `{"topic":"errs","headers":[{"key":1}]}`, 400, "INVALID_REQUEST"},
		{"unknown topic", "/produce", `{"topic":"nope","value":1}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"unknown partition", "/produce", `{"topic":"errs","partition":2,"value":1}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"record above max.message.bytes", "/produce", map[string]any{"topic": "errs-small", "value": strings.Repeat("y", 2000)}, 413, "MESSAGE_TOO_LARGE"},
		{"body above the limit", "/produce", huge, 413, "REQUEST_TOO_LARGE"},
		{"timestamp two hours ahead", "/produce", map[string]any{"topic": "errs", "partition": 0, "value": 1, "timestamp": twoHoursAhead}, 400, "INVALID_TIMESTAMP"},
		{"timestamp before before.max.ms", "/produce", `{"topic":"errs-old","value":1,"timestamp":1000}`, 400, "INVALID_TIMESTAMP"},
		{"batch: no records", "/topics/errs/records", `{"records":[]}`, 400, "INVALID_REQUEST"},
		{"batch: bad record", "/topics/errs/records", `{"records":[{"value":1},{"partition":"x"}]}`, 400, "INVALID_REQUEST"},
		{"batch: unknown topic", "/topics/nope/records", `{"records":[{"value":1}]}`, 404, "UNKNOWN_TOPIC_OR_PARTITION"},
	} {
		r := n.do("POST", tc.path, tc.body)
		if r.status != tc.status || r.errorCode(t) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	// A refused timestamp's answer says why, as Kafka's record error does.
	if r := n.do("POST", "/produce", `{"topic":"errs-old","value":1,"timestamp":1000}`); !bytes.Contains(r.body, []byte("Timestamp 1000 of message with offset 0 is out of range")) {
		t.Errorf("timestamp refusal: %s", r.body)
	}
	// min.insync.replicas above the replication factor (one here) asks for
	// every replica, not more, as Kafka caps it: acks=all is accepted.
	n.must(http.StatusOK, "POST", "/produce", map[string]any{"topic": "errs-isr", "value": 1})
	n.must(http.StatusOK, "POST", "/produce", map[string]any{"topic": "errs-isr", "value": 1, "acks": 1})
	var topic struct {
		Partitions []struct {
			HighWatermark int64 `json:"high_watermark"`
		}
	}
	n.must(http.StatusOK, "GET", "/topics/errs", nil).json(t, &topic)
	for _, p := range topic.Partitions {
		if p.HighWatermark != 0 {
			t.Fatalf("rejected produces appended records: %+v", topic)
		}
	}
}

// TestProduceConcurrent: concurrent produces to one partition get distinct,
// dense offsets.
func TestProduceConcurrent(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	n.createTopic("concurrent", 1)
	const writers, each = 4, 25
	offsets := make(chan int64, writers*each)
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range each {
				body := fmt.Sprintf(`{"topic":"concurrent","value":%d}`, w*each+i)
				resp, err := http.Post(n.base+"/produce", "application/json", strings.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				var res struct{ Offset int64 }
				err = json.NewDecoder(resp.Body).Decode(&res)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("status %d, %v", resp.StatusCode, err)
					return
				}
				offsets <- res.Offset
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(offsets)
	var got []int64
	for o := range offsets {
		got = append(got, o)
	}
	slices.Sort(got)
	for i, o := range got {
		if o != int64(i) {
			t.Fatalf("offsets %v are not 0..%d", got, writers*each-1)
		}
	}
}
