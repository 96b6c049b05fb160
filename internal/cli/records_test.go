package cli

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func testRecord() *kgo.Record {
	return &kgo.Record{
		Topic: "orders", Partition: 3, Offset: 42,
		Timestamp: time.Date(2024, 5, 1, 12, 0, 0, 250e6, time.UTC),
		Key:       []byte("user1"), Value: []byte("clicked"),
		Headers: []kgo.RecordHeader{{Key: "src", Value: []byte("web")}, {Key: "v", Value: []byte("2")}},
	}
}

func TestRecordFormat(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{"%v", "clicked"},
		{"%k %v %p %o %t %h", "user1 clicked 3 42 1714564800250 src=web,v=2"},
		{"%T/%p@%o", "orders/3@42"},
		{"%d", "2024-05-01T12:00:00.25Z"},
		{`%k\t%v\n`, "user1\tclicked\n"},
		{`100%% \\ %v`, `100% \ clicked`},
		{"plain", "plain"},
		{"", ""},
	} {
		f, err := ParseRecordFormat(tc.format)
		if err != nil {
			t.Errorf("%q: %v", tc.format, err)
			continue
		}
		if got := string(f.Append(nil, testRecord())); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.format, got, tc.want)
		}
	}
	for _, bad := range []string{"%", "%x", `\`, `\q`, "%v %"} {
		if _, err := ParseRecordFormat(bad); ExitCode(err) != 2 {
			t.Errorf("%q: %v, want a usage error", bad, err)
		}
	}
	f, _ := ParseRecordFormat("[%k][%v][%h]")
	if got := string(f.Append(nil, &kgo.Record{})); got != "[][][]" {
		t.Errorf("null key and value: %q", got)
	}
}

func TestRecordJSON(t *testing.T) {
	r := testRecord()
	r.Key = nil
	r.Value = []byte{0xff, 0x00}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: "bin", Value: []byte{0xfe}}, kgo.RecordHeader{Key: "nil"})
	b, err := json.Marshal(NewRecordJSON(r))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"topic":"orders","partition":3,"offset":42,"timestamp":"2024-05-01T12:00:00.25Z","key":null,` +
		`"value":"/wA=","value_encoding":"base64","headers":[{"key":"src","value":"web"},{"key":"v","value":"2"},` +
		`{"key":"bin","value":"/g==","value_encoding":"base64"},{"key":"nil","value":null}]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	b, _ = json.Marshal(NewRecordJSON(&kgo.Record{Value: []byte{}}))
	var back RecordJSON
	if err := json.Unmarshal(b, &back); err != nil || back.Value == nil || *back.Value != "" || back.Headers == nil {
		t.Fatalf("empty value: %s -> %+v, %v", b, back, err)
	}
}
