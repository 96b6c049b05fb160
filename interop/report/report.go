// Package report owns the JSON summary that every interop client prints (Java, Python,
// Node, and the kcat driver) and the checks the interop suite runs on it.
//
// A summary is one JSON object on the client's stdout:
//
//	field       type                 meaning
//	---------   ------------------   ------------------------------------------------
//	client      string               runtime: java, python, node, kcat
//	library     string               client library and version, for the log
//	topic       string               topic written and/or read
//	produce_ms  int (optional)       wall time of the produce phase
//	consume_ms  int (optional)       wall time of the consume phase
//	produced    [record + position]  every acknowledged send, in send order
//	failed      [record + error]     sends that failed (optional; stream mode)
//	consumed    [position + record]  every record read, in the order it was read
//	group       string (optional)    the consumer group the reads were made in
//	assignments [[partition]]        the member's successive assignments (optional)
//
// A record is {"key", "value", "headers": [{"key", "value"}]}; key, value and header
// values are base64 strings, or null for a null (absent) one, so an empty value and a
// null value stay distinct. A position is {"partition", "offset"}: as acknowledged by
// the broker for produced, as fetched for consumed. A failed send carries "error", the
// client's message, instead of a position.
//
// The checks are Jepsen-style anomaly classes over one topic written by one producer,
// for three kinds of readers:
//
//	Check             one reader without a group: every record read exactly once
//	CheckGroup        members of one group that never lose a partition uncommitted:
//	                  every record read exactly once by exactly one member
//	CheckAtLeastOnce  readers that may read again after a rebalance or failover:
//	                  every record read at least once, never at two offsets
//
// Everything here is pure and safe for concurrent use.
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/strata-stream/strata/internal/keyhash"
)

// Header is one record header; a nil Value is a null header value.
type Header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// Produced is one acknowledged send: what was sent and where the broker put it.
type Produced struct {
	Key       []byte   `json:"key"`
	Value     []byte   `json:"value"`
	Headers   []Header `json:"headers"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
}

// Consumed is one record read back.
type Consumed struct {
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Key       []byte   `json:"key"`
	Value     []byte   `json:"value"`
	Headers   []Header `json:"headers"`
}

// Failed is one send the client gave up on, with the client's error message.
type Failed struct {
	Key     []byte   `json:"key"`
	Value   []byte   `json:"value"`
	Headers []Header `json:"headers"`
	Error   string   `json:"error"`
}

// Summary is what one client run printed.
type Summary struct {
	Client      string     `json:"client"`
	Library     string     `json:"library"`
	Topic       string     `json:"topic"`
	ProduceMS   int64      `json:"produce_ms,omitempty"`
	ConsumeMS   int64      `json:"consume_ms,omitempty"`
	Produced    []Produced `json:"produced"`
	Failed      []Failed   `json:"failed,omitempty"`
	Consumed    []Consumed `json:"consumed,omitempty"`
	Group       string     `json:"group,omitempty"`
	Assignments [][]int32  `json:"assignments,omitempty"`
	Deliveries  []Delivery `json:"deliveries,omitempty"`
}

// Delivery is one record a share-group member received and how it acknowledged it:
// "accept", "release" or "reject", or "failed:<error>" when the broker refused the
// acknowledgement.
type Delivery struct {
	Partition     int32  `json:"partition"`
	Offset        int64  `json:"offset"`
	Key           []byte `json:"key"`
	Value         []byte `json:"value"`
	DeliveryCount int16  `json:"delivery_count"`
	Ack           string `json:"ack"`
}

// Decode reads exactly one summary object from r; anything after it but white space
// is an error, so that stray client output cannot hide in a passing run.
func Decode(r io.Reader) (*Summary, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var s Summary
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("report: decoding summary: %w", err)
	}
	if err := dec.Decode(&json.RawMessage{}); err != io.EOF {
		return nil, fmt.Errorf("report: output continues after the summary")
	}
	return &s, nil
}

// maxAnomalies bounds Check's answer; the first few anomalies are what a reader needs.
const maxAnomalies = 20

// Check compares what one producer had acknowledged on a topic of n partitions with what
// one reader read back from the start of that topic to its end, and returns every
// anomaly found (at most maxAnomalies; nil means none):
//
//   - inconsistent-offsets: two acknowledged sends at one partition and offset;
//   - nonmonotonic-send: one key's successive sends got non-increasing offsets, or
//     landed on different partitions;
//   - wrong-partition: a keyed record sits elsewhere than keyhash.Partition(key, n),
//     the Java client's default, whether as acknowledged or as read;
//   - lost-write: an acknowledged send that was never read;
//   - duplicate: a position read twice;
//   - phantom: a record read that no acknowledged send put there;
//   - corrupt: a record read whose key, value or headers differ from what was sent;
//   - poll-skip / nonmonotonic-poll: a partition's offsets as read are not dense and
//     increasing from its first read offset;
//   - key-order: one key's records were read in another order than they were sent,
//     telling records apart by value (the interop clients send unique values).
func Check(n int32, produced []Produced, consumed []Consumed) []error {
	var a anomalies
	a.check(n, produced, consumed)
	return a.errs
}

// anomalies collects what the checks find, up to maxAnomalies.
type anomalies struct{ errs []error }

func (a *anomalies) add(class, format string, args ...any) {
	if len(a.errs) < maxAnomalies {
		a.errs = append(a.errs, fmt.Errorf("%s: %s", class, fmt.Sprintf(format, args...)))
	}
}

// pos is a record's place in the topic.
type pos struct {
	p int32
	o int64
}

func (a *anomalies) check(n int32, produced []Produced, consumed []Consumed) {
	add := a.add

	sent := make(map[pos]int, len(produced))         // position -> index in produced
	sentValue := make(map[string]int, len(produced)) // value -> index in produced
	lastByKey := make(map[string]pos)
	for i, r := range produced {
		at := pos{r.Partition, r.Offset}
		if j, dup := sent[at]; dup {
			add("inconsistent-offsets", "sends %d and %d both acknowledged at %d/%d", j, i, at.p, at.o)
		}
		sent[at] = i
		sentValue[string(r.Value)] = i
		if r.Key == nil {
			continue
		}
		if want := keyhash.Partition(r.Key, n); r.Partition != want {
			add("wrong-partition", "send %d key %q acknowledged on partition %d, Java's partitioner says %d", i, r.Key, r.Partition, want)
		}
		if last, ok := lastByKey[string(r.Key)]; ok && (last.p != at.p || last.o >= at.o) {
			add("nonmonotonic-send", "key %q sent to %d/%d after %d/%d", r.Key, at.p, at.o, last.p, last.o)
		}
		lastByKey[string(r.Key)] = at
	}

	seen := make(map[pos]bool, len(consumed))
	next := make(map[int32]int64) // partition -> offset expected next
	readOrder := make(map[string][]int)
	for _, c := range consumed {
		at := pos{c.Partition, c.Offset}
		if want, ok := next[c.Partition]; ok && c.Offset != want {
			class := "poll-skip"
			if c.Offset < want {
				class = "nonmonotonic-poll"
			}
			add(class, "partition %d read offset %d after %d", c.Partition, c.Offset, want-1)
		}
		next[c.Partition] = c.Offset + 1
		if seen[at] {
			add("duplicate", "%d/%d read twice", at.p, at.o)
			continue
		}
		seen[at] = true
		if c.Key != nil {
			if want := keyhash.Partition(c.Key, n); c.Partition != want {
				add("wrong-partition", "key %q read from partition %d, Java's partitioner says %d", c.Key, c.Partition, want)
			}
		}
		i, ok := sent[at]
		if !ok {
			add("phantom", "%d/%d read (key %q value %q) but no acknowledged send is there", at.p, at.o, c.Key, c.Value)
			continue
		}
		if diff := recordDiff(produced[i], c); diff != "" {
			add("corrupt", "%d/%d differs from send %d: %s", at.p, at.o, i, diff)
		}
		if j, ok := sentValue[string(c.Value)]; ok {
			readOrder[string(c.Key)] = append(readOrder[string(c.Key)], j)
		}
	}

	for i, r := range produced {
		if !seen[pos{r.Partition, r.Offset}] {
			add("lost-write", "send %d (key %q value %q) acknowledged at %d/%d was never read", i, r.Key, r.Value, r.Partition, r.Offset)
		}
	}
	keys := make([]string, 0, len(readOrder))
	for k := range readOrder {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if order := readOrder[k]; !slices.IsSorted(order) {
			add("key-order", "key %q read in send order %v", k, order)
		}
	}
}

// recordDiff describes how a record read differs from the one sent, or returns "".
func recordDiff(p Produced, c Consumed) string {
	return diffAgainst("sent", p.Key, p.Value, p.Headers, c)
}

// diffAgainst describes how c differs from the record (key, value, headers), which
// the description calls was, or returns "".
func diffAgainst(was string, key, value []byte, headers []Header, c Consumed) string {
	var d []string
	if !sameBytes(key, c.Key) {
		d = append(d, fmt.Sprintf("key %s, %s %s", show(c.Key), was, show(key)))
	}
	if !sameBytes(value, c.Value) {
		d = append(d, fmt.Sprintf("value %s, %s %s", show(c.Value), was, show(value)))
	}
	if !slices.EqualFunc(headers, c.Headers, func(a, b Header) bool {
		return a.Key == b.Key && sameBytes(a.Value, b.Value)
	}) {
		d = append(d, fmt.Sprintf("headers %s, %s %s", showHeaders(c.Headers), was, showHeaders(headers)))
	}
	return strings.Join(d, "; ")
}

// sameBytes tells null from empty, which bytes.Equal does not.
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

func show(b []byte) string {
	if b == nil {
		return "null"
	}
	return fmt.Sprintf("%q", b)
}

func showHeaders(hs []Header) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.Key + "=" + show(h.Value)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
