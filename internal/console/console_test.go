package console

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
)

type sample struct {
	after  time.Duration
	offset int64
}

func TestRateSampler(t *testing.T) {
	t0 := time.Unix(1000, 0)
	k := partitionKey{"t", 0}
	s2 := 2 * time.Second
	tests := []struct {
		name    string
		samples []sample
		want    rate
	}{
		{name: "one sample", samples: []sample{{0, 10}}, want: rate{}},
		{name: "two samples", samples: []sample{{0, 10}, {s2, 30}}, want: rate{PerSecond: 10, Known: true}},
		{name: "too close keeps the window", samples: []sample{{0, 10}, {s2, 30}, {s2 + 100*time.Millisecond, 35}}, want: rate{PerSecond: 10, Known: true}},
		{name: "window slides", samples: []sample{{0, 10}, {s2, 30}, {2 * s2, 30}}, want: rate{PerSecond: 0, Known: true}},
		{name: "offset went down restarts", samples: []sample{{0, 10}, {s2, 30}, {2 * s2, 5}}, want: rate{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newRateSampler(time.Second)
			var got rate
			for _, st := range tt.samples {
				got = s.observe(k, t0.Add(st.after), st.offset)
			}
			if got != tt.want {
				t.Fatalf("rate = %+v, want %+v", got, tt.want)
			}
		})
	}
	s := newRateSampler(time.Second)
	s.observe(k, t0, 1)
	s.observe(partitionKey{"gone", 0}, t0, 1)
	s.forget(func(k partitionKey) bool { return k.topic != "gone" })
	if len(s.samples) != 1 {
		t.Fatalf("forget kept %d partitions, want 1", len(s.samples))
	}
}

func TestTopicFormParse(t *testing.T) {
	tests := []struct {
		name    string
		form    topicForm
		wantErr string
		check   func(t *testing.T, name string, parts int32, rf int16, cfg map[string]string)
	}{
		{name: "defaults", form: topicForm{Name: " orders ", Partitions: "-1", ReplicationFactor: "-1"},
			check: func(t *testing.T, name string, parts int32, rf int16, cfg map[string]string) {
				if name != "orders" || parts != -1 || rf != -1 || len(cfg) != 0 {
					t.Fatalf("got %q %d %d %v", name, parts, rf, cfg)
				}
			}},
		{name: "configs", form: topicForm{Name: "a", Partitions: "3", ReplicationFactor: "1", Configs: "retention.ms = 1000\n\n# comment\ncleanup.policy=delete\r\n"},
			check: func(t *testing.T, name string, parts int32, rf int16, cfg map[string]string) {
				if parts != 3 || rf != 1 || cfg["retention.ms"] != "1000" || cfg["cleanup.policy"] != "delete" || len(cfg) != 2 {
					t.Fatalf("got %d %d %v", parts, rf, cfg)
				}
			}},
		{name: "no name", form: topicForm{Partitions: "1", ReplicationFactor: "1"}, wantErr: "needs a name"},
		{name: "zero partitions", form: topicForm{Name: "a", Partitions: "0", ReplicationFactor: "1"}, wantErr: "partitions must be"},
		{name: "words", form: topicForm{Name: "a", Partitions: "many", ReplicationFactor: "1"}, wantErr: "partitions must be"},
		{name: "bad rf", form: topicForm{Name: "a", Partitions: "1", ReplicationFactor: "99999"}, wantErr: "replication factor"},
		{name: "bad config", form: topicForm{Name: "a", Partitions: "1", ReplicationFactor: "1", Configs: "retention.ms"}, wantErr: "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct, err := tt.form.parse()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errBadInput) {
					t.Fatalf("err = %v, want errBadInput with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, ct.Name, ct.NumPartitions, ct.ReplicationFactor, ct.Configs)
		})
	}
}

func TestShow(t *testing.T) {
	long := strings.Repeat("é", shownBytes) // 2 bytes each: the cut must not split one
	tests := []struct {
		name string
		in   []byte
		null bool
		want shown
	}{
		{name: "null", null: true, want: shown{Null: true}},
		{name: "empty", in: []byte{}, want: shown{}},
		{name: "text", in: []byte("héllo\tworld"), want: shown{Text: "héllo\tworld", Size: 12}},
		{name: "binary", in: []byte{0, 1, 0xff}, want: shown{Text: "0001ff", Binary: true, Size: 3}},
		{name: "invalid utf8", in: []byte{'a', 0xc3}, want: shown{Text: "61c3", Binary: true, Size: 2}},
		{name: "truncated", in: []byte(long), want: shown{Text: strings.Repeat("é", shownBytes/2), Truncated: true, Size: 2 * shownBytes}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := show(tt.in, tt.null); got != tt.want {
				t.Fatalf("show = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAppendRecords(t *testing.T) {
	recs := []batchtest.Record{
		{Key: []byte("k0"), Value: []byte("v0")},
		{TimestampDelta: 5, Key: nil, Value: []byte{0x00, 0xff}},
		{TimestampDelta: 9, Key: []byte("k2"), Value: nil},
	}
	plain := batchtest.Build(batchtest.Options{BaseOffset: 10, FirstTimestamp: 1700000000000, Records: recs})
	zstd := batchtest.Build(batchtest.Options{BaseOffset: 13, FirstTimestamp: 1700000000000, Codec: 4, Records: recs})
	control := batchtest.Build(batchtest.Options{BaseOffset: 16, Attributes: 0x20})
	all := append(append(append([]byte{}, plain...), zstd...), control...)

	got, next, err := appendRecords(nil, all, 11, 100)
	if err != nil || next != 17 {
		t.Fatalf("next offset %d, %v; want 17, after the control batch", next, err)
	}
	var offsets []int64
	for _, r := range got {
		offsets = append(offsets, r.Offset)
	}
	if want := []int64{11, 12, 13, 14, 15}; !equal(offsets, want) {
		t.Fatalf("offsets %v, want %v (from 11, control batch skipped)", offsets, want)
	}
	if r := got[0]; !r.Key.Null || r.Value.Text != "00ff" || !r.Value.Binary || r.Timestamp != 1700000000005 {
		t.Fatalf("record 11 = %+v", r)
	}
	if r := got[1]; r.Key.Text != "k2" || !r.Value.Null {
		t.Fatalf("record 12 = %+v", r)
	}
	if r := got[2]; r.Key.Text != "k0" || r.Value.Text != "v0" {
		t.Fatalf("record 13 (zstd) = %+v", r)
	}
	if got, _, _ := appendRecords(nil, all, 0, 2); len(got) != 2 || got[1].Offset != 11 {
		t.Fatalf("limit 2 gave %d records", len(got))
	}
	bad := append([]byte{}, plain...)
	binary.BigEndian.PutUint32(bad[57:], 4) // NumRecords: one more than the batch holds
	if _, _, err := appendRecords(nil, bad, 0, 100); err == nil {
		t.Fatal("a mangled record decoded without error")
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHumanFormats(t *testing.T) {
	tests := []struct{ got, want string }{
		{humanBytes(-1), "—"},
		{humanBytes(512), "512 B"},
		{humanBytes(1536), "1.5 KiB"},
		{humanBytes(5 << 30), "5.0 GiB"},
		{groupDigits(0), "0"},
		{groupDigits(1234567), "1,234,567"},
		{groupDigits(-1000), "-1,000"},
		{offsetText(-1), "—"},
		{rateText(rate{}), "—"},
		{rateText(rate{PerSecond: 12.345, Known: true}), "12.3"},
		{idList([]int32{1, 2, 3}), "1, 2, 3"},
		{millisText(0), "1970-01-01 00:00:00.000"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("case %d: got %q, want %q", i, tt.got, tt.want)
		}
	}
}

// TestAppendRecordsBoundsHeaders: a record's headers are shown as its key and
// value are, at most shownHeaders of them, and their keys cut and hex-encoded
// when binary. A record of many headers with huge keys made a page of
// unbounded size.
func TestAppendRecordsBoundsHeaders(t *testing.T) {
	hs := []kmsg.Header{{Key: strings.Repeat("\xff", 4*shownBytes), Value: []byte("v")}}
	for i := range 1000 {
		hs = append(hs, kmsg.Header{Key: "h" + strconv.Itoa(i)})
	}
	b, err := batch.Build(batch.BuildOptions{}, []batch.Record{{Value: []byte("x"), Headers: hs}})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := appendRecords(nil, b, 0, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("%d records, %v", len(got), err)
	}
	r := got[0]
	if len(r.Headers) != shownHeaders || r.MoreHeaders != len(hs)-shownHeaders {
		t.Fatalf("%d headers shown and %d more, want %d and %d", len(r.Headers), r.MoreHeaders, shownHeaders, len(hs)-shownHeaders)
	}
	if k := r.Headers[0].Key; !k.Binary || !k.Truncated || len(k.Text) != 2*shownBytes || k.Size != 4*shownBytes {
		t.Fatalf("the binary header key is shown as %+v", k)
	}
	if k := r.Headers[1].Key; k.Text != "h0" || k.Binary {
		t.Fatalf("header key h0 is shown as %+v", k)
	}
}
