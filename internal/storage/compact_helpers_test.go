package storage

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
)

// kv is one record as compaction tests write and read it; nil is null.
type kv struct {
	offset     int64
	key, value []byte
}

func put(k, v string) kv       { return kv{key: []byte(k), value: []byte(v)} }
func tombstone(k string) kv    { return kv{key: []byte(k)} }
func keyless(v string) kv      { return kv{value: []byte(v)} }
func (r kv) isTombstone() bool { return r.key != nil && r.value == nil }

func (r kv) String() string {
	show := func(b []byte) string {
		if b == nil {
			return "null"
		}
		return string(b)
	}
	return fmt.Sprintf("%d:%s=%s", r.offset, show(r.key), show(r.value))
}

func (r kv) equal(o kv) bool {
	return r.offset == o.offset && bytes.Equal(r.key, o.key) && bytes.Equal(r.value, o.value) &&
		(r.key == nil) == (o.key == nil) && (r.value == nil) == (o.value == nil)
}

// compactCfg is a log config for compaction tests: small segments, dense indexes,
// and a roll once a segment's records span more than a minute.
func compactCfg(clk *clock) Config {
	return Config{SegmentBytes: 4096, IndexIntervalBytes: 100, SegmentAge: time.Minute, RetentionAge: -1, Now: clk.Now}
}

// kvBatch builds one batch of recs with the clock's time and codec.
func kvBatch(clk *clock, codec int8, recs []kv) []byte {
	br := make([]batchtest.Record, len(recs))
	for i, r := range recs {
		br[i] = batchtest.Record{Key: r.key, Value: r.value, TimestampDelta: int64(i)}
	}
	return batchtest.Build(batchtest.Options{FirstTimestamp: clk.Now().UnixMilli(), Codec: codec, Records: br})
}

// appendKV appends recs as one batch, in the log's latest leader epoch, and
// returns them with their offsets.
func appendKV(t fataler, l *Log, clk *clock, codec int8, recs ...kv) []kv {
	t.Helper()
	info, err := l.Append(kvBatch(clk, codec, recs), max(l.LatestEpoch(), 0))
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	out := slices.Clone(recs)
	for i := range out {
		out[i].offset = info.FirstOffset + int64(i)
	}
	return out
}

// seal makes the next append roll the active segment (by age) and appends a
// record with a key of its own, so the records before it lie in sealed segments.
func seal(t fataler, l *Log, clk *clock) []kv {
	t.Helper()
	clk.Advance(2 * time.Minute)
	l.mu.RLock()
	n, empty := len(l.mu.segments), l.active().size == 0
	l.mu.RUnlock()
	out := appendKV(t, l, clk, 0, put(fmt.Sprintf("seal-%d", l.LogEndOffset()), "s"))
	if !empty && l.NumSegments() != n+1 {
		t.Fatalf("seal did not roll: %d segments", l.NumSegments())
	}
	return out
}

// logRecords returns every record the log serves, in offset order, checking that
// offsets strictly increase.
func logRecords(t fataler, l *Log) []kv {
	t.Helper()
	var out []kv
	for _, b := range readAll(t, l) {
		err := batch.Records(b, func(h batch.Header, r batch.Record) error {
			out = append(out, kv{offset: h.BaseOffset + int64(r.OffsetDelta), key: bytes.Clone(r.Key), value: bytes.Clone(r.Value)})
			return nil
		})
		if err != nil {
			t.Fatalf("decoding records: %v", err)
		}
	}
	for i := 1; i < len(out); i++ {
		if out[i].offset <= out[i-1].offset {
			t.Fatalf("offsets go from %d to %d", out[i-1].offset, out[i].offset)
		}
	}
	return out
}

// sameRecords fails unless got and want hold the same records.
func sameRecords(t fataler, got, want []kv) {
	t.Helper()
	if !slices.EqualFunc(got, want, kv.equal) {
		t.Fatalf("records differ:\n got %v\nwant %v", short(got), short(want))
	}
}

func short(recs []kv) string {
	var sb strings.Builder
	for i, r := range recs {
		if i == 40 {
			fmt.Fprintf(&sb, " ... (%d)", len(recs))
			break
		}
		sb.WriteString(" " + r.String())
	}
	return sb.String()
}

// compactedOnce is what a first pass whose offset map covers everything below end
// keeps of recs: records at or above end, and below it the latest record of each
// key (tombstones included: they are still dirty). Keyless records below end go.
func compactedOnce(recs []kv, end int64) []kv {
	latest := map[string]int64{}
	for _, r := range recs {
		if r.offset < end && r.key != nil {
			latest[string(r.key)] = r.offset
		}
	}
	var out []kv
	for _, r := range recs {
		if r.offset >= end || (r.key != nil && latest[string(r.key)] == r.offset) {
			out = append(out, r)
		}
	}
	return out
}

// withoutTombstones returns recs without the tombstones below end.
func withoutTombstones(recs []kv, end int64) []kv {
	return slices.DeleteFunc(slices.Clone(recs), func(r kv) bool { return r.offset < end && r.isTombstone() })
}

// compactOpts keeps tombstones an hour and cleans whatever the dirty ratio.
func compactOpts() CompactOptions { return CompactOptions{DeleteRetention: time.Hour} }

func mustCompact(t fataler, l *Log, hwm int64, opts CompactOptions) CompactStats {
	t.Helper()
	st, err := l.Compact(hwm, opts)
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	return st
}

// writeKeyed appends n batches of three records over a small key space, so most
// records are superseded later, and returns what it appended.
func writeKeyed(t testing.TB, l *Log, clk *clock, n int, codec int8) []kv {
	t.Helper()
	var all []kv
	for i := range n {
		all = append(all, appendKV(t, l, clk, codec,
			put(fmt.Sprintf("k%d", i%7), fmt.Sprintf("a%d", i)),
			put(fmt.Sprintf("k%d", (i*3)%11), fmt.Sprintf("b%d", i)),
			put(fmt.Sprintf("u%d", i), strings.Repeat("x", 20)))...)
		clk.Advance(time.Second)
	}
	return all
}
