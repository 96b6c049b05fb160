package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestValidateStored(t *testing.T) {
	three := build(spec{records: []rec{{0, "a"}, {1, "b"}, {2, "c"}}})
	setCounts := func(lastOffsetDelta, numRecords int32) []byte {
		return mutate(three, true, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(lastOffsetDelta))
			binary.BigEndian.PutUint32(b[offNumRecords:], uint32(numRecords))
			return b
		})
	}
	tests := []struct {
		name        string
		b           []byte
		strict      error // Validate
		stored      error // ValidateStored
		numRecords  int32
		lastDeltaOK bool
	}{
		{"dense", three, nil, nil, 3, true},
		{"thinned", setCounts(5, 3), ErrBadRecordCount, nil, 3, true},
		{"empty", setCounts(5, 0), ErrBadRecordCount, nil, 0, true},
		{"more records than offsets", setCounts(1, 3), ErrBadRecordCount, ErrBadRecordCount, 3, false},
		{"negative count", setCounts(5, -1), ErrBadRecordCount, ErrBadRecordCount, -1, false},
		{"negative last delta", setCounts(-1, 0), ErrBadRecordCount, ErrBadRecordCount, 0, false},
		{"bad crc still caught", mutate(setCounts(5, 3), false, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrBadCRC, ErrBadCRC, 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Validate(tt.b); !errors.Is(err, tt.strict) {
				t.Errorf("Validate: %v, want %v", err, tt.strict)
			}
			h, err := ValidateStored(tt.b)
			if !errors.Is(err, tt.stored) {
				t.Fatalf("ValidateStored: %v, want %v", err, tt.stored)
			}
			if err == nil && h.NumRecords != tt.numRecords {
				t.Fatalf("numRecords %d", h.NumRecords)
			}
			it := NewStoredIter(append(bytes.Clone(tt.b), three...))
			n := 0
			for it.Next() {
				n++
			}
			if !errors.Is(it.Err(), tt.stored) || (tt.stored == nil && n != 2) {
				t.Fatalf("stored iter: %d batches, err %v", n, it.Err())
			}
		})
	}
}

func TestWalkRecords(t *testing.T) {
	recs := []Record{
		{Key: []byte("k1"), Value: []byte("v1"), TimestampDelta: 0},
		{Key: nil, Value: []byte("keyless"), TimestampDelta: 7},
		{Key: []byte("k2"), Value: nil, TimestampDelta: -3}, // tombstone
		{Key: []byte(""), Value: []byte(""), TimestampDelta: 1 << 40},
	}
	b, err := Build(BuildOptions{}, recs)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := ParseHeader(b)
	var got []RawRecord
	var rebuilt []byte
	err = WalkRecords(b[HeaderSize:], h.NumRecords, func(r RawRecord) error {
		got = append(got, r)
		rebuilt = append(rebuilt, r.Bytes...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("%d records", len(got))
	}
	for i, r := range got {
		w := recs[i]
		if r.OffsetDelta != int32(i) || r.TimestampDelta != w.TimestampDelta || !bytes.Equal(r.Key, w.Key) ||
			(r.Key == nil) != (w.Key == nil) || r.NullValue != (w.Value == nil) {
			t.Errorf("record %d: %+v, want %+v", i, r, w)
		}
	}
	if !bytes.Equal(rebuilt, b[HeaderSize:]) {
		t.Fatal("record bytes do not cover the record section")
	}

	stop := errors.New("stop")
	calls := 0
	if err := WalkRecords(b[HeaderSize:], h.NumRecords, func(RawRecord) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("fn error: %v after %d calls", err, calls)
	}
	body := b[HeaderSize:]
	for _, bad := range []struct {
		name string
		b    []byte
		n    int32
	}{
		{"cut short", body[:len(body)-1], h.NumRecords},
		{"more records than bytes", body, h.NumRecords + 1},
		{"zero length", []byte{0}, 1},
		{"key longer than record", []byte{8, 0, 0, 0, 40, 'k', 'k', 'k', 'k'}, 1},
		{"negative offset delta", []byte{6, 0, 0, 1, 1, 1, 0}, 1},
	} {
		if err := WalkRecords(bad.b, bad.n, func(RawRecord) error { return nil }); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: %v", bad.name, err)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		_ = WalkRecords(body, h.NumRecords, func(RawRecord) error { return nil })
	})
	if allocs != 0 {
		t.Errorf("WalkRecords allocates %.1f times", allocs)
	}
}
