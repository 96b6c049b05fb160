package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// rec describes one record of a test batch.
type rec struct {
	tsDelta int64
	value   string
}

// spec describes a test batch; zero values give a plain one-record batch. The max
// timestamp is firstTS plus the largest record delta.
type spec struct {
	baseOffset int64
	epoch      int32
	attrs      int16
	firstTS    int64
	producerID int64 // 0: none
	records    []rec
}

// build encodes a batch with Build, then stamps the leader epoch and extra
// attribute bits (as a broker or a test of odd inputs would).
func build(s spec) []byte {
	o := BuildOptions{BaseOffset: s.baseOffset, FirstTimestamp: s.firstTS}
	if s.producerID != 0 {
		o.Idempotent, o.ProducerID, o.ProducerEpoch, o.BaseSequence = true, s.producerID, -1, -1
	}
	var recs []Record
	for _, r := range s.records {
		recs = append(recs, Record{TimestampDelta: r.tsDelta, Value: []byte(r.value)})
	}
	if len(recs) == 0 {
		recs = []Record{{Value: []byte("v")}}
	}
	b, err := Build(o, recs)
	if err != nil {
		panic(err)
	}
	SetPartitionLeaderEpoch(b, s.epoch)
	if s.attrs != 0 {
		binary.BigEndian.PutUint16(b[offAttributes:], binary.BigEndian.Uint16(b[offAttributes:])|uint16(s.attrs))
		binary.BigEndian.PutUint32(b[offCRC:], Checksum(b))
	}
	return b
}

// mutate returns a copy of b changed by f, with the CRC recomputed if fixCRC.
func mutate(b []byte, fixCRC bool, f func(b []byte) []byte) []byte {
	c := f(bytes.Clone(b))
	if fixCRC && len(c) >= HeaderSize {
		binary.BigEndian.PutUint32(c[offCRC:], Checksum(c))
	}
	return c
}

func TestParseHeaderFields(t *testing.T) {
	b := build(spec{baseOffset: 42, epoch: 7, attrs: int16(CodecNone) | attrTransactional,
		firstTS: 1000, producerID: 99,
		records: []rec{{0, "a"}, {5, "b"}, {3, "c"}}})
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{BaseOffset: 42, Length: int32(len(b) - 12), PartitionLeaderEpoch: 7, Magic: 2,
		CRC: Checksum(b), Attributes: attrTransactional, LastOffsetDelta: 2, FirstTimestamp: 1000,
		MaxTimestamp: 1005, ProducerID: 99, ProducerEpoch: -1, BaseSequence: -1, NumRecords: 3}
	if h != want {
		t.Fatalf("header\n got %+v\nwant %+v", h, want)
	}
	if h.Size() != len(b) || h.LastOffset() != 44 || h.NextOffset() != 45 {
		t.Fatalf("size %d last %d next %d", h.Size(), h.LastOffset(), h.NextOffset())
	}
	if !h.Transactional() || h.Control() || h.LogAppendTime() || h.Codec() != CodecNone || !h.Idempotent() {
		t.Fatalf("attribute accessors wrong for %#x", h.Attributes)
	}
}

func TestValidate(t *testing.T) {
	good := build(spec{records: []rec{{0, "x"}, {1, "y"}}})
	tests := []struct {
		name  string
		b     []byte
		want  error
		class error
	}{
		{"valid", good, nil, nil},
		{"empty", nil, ErrTruncated, ErrCorrupt},
		{"short header", good[:HeaderSize-1], ErrTruncated, ErrCorrupt},
		{"short body", good[:len(good)-1], ErrTruncated, ErrCorrupt},
		{"extra byte", append(bytes.Clone(good), 0), ErrBadLength, ErrCorrupt},
		{"length below header", mutate(good, false, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLength:], 10)
			return b
		}), ErrBadLength, ErrCorrupt},
		{"negative length", mutate(good, false, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLength:], 0xffffffff)
			return b
		}), ErrBadLength, ErrCorrupt},
		{"huge length", mutate(good, false, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLength:], MaxBatchSize)
			return b
		}), ErrBadLength, ErrCorrupt},
		{"magic 1", mutate(good, true, func(b []byte) []byte { b[offMagic] = 1; return b }), ErrBadMagic, ErrInvalid},
		{"flipped record byte", mutate(good, false, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrBadCRC, ErrCorrupt},
		{"flipped attribute", mutate(good, false, func(b []byte) []byte { b[offAttributes+1] ^= 0x10; return b }), ErrBadCRC, ErrCorrupt},
		{"codec 5", mutate(good, true, func(b []byte) []byte { b[offAttributes+1] |= 5; return b }), ErrBadCodec, ErrInvalid},
		{"codec 7", mutate(good, true, func(b []byte) []byte { b[offAttributes+1] |= 7; return b }), ErrBadCodec, ErrInvalid},
		{"zero records", mutate(good, true, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offNumRecords:], 0)
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 0xffffffff)
			return b
		}), ErrBadRecordCount, ErrInvalid},
		{"delta mismatch", mutate(good, true, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 5)
			return b
		}), ErrBadRecordCount, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Validate(tt.b)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("Validate = %v, want %v", err, tt.want)
			}
			if tt.class != nil {
				if !errors.Is(err, tt.class) {
					t.Fatalf("%v is not in class %v", err, tt.class)
				}
				other := ErrCorrupt
				if tt.class == ErrCorrupt {
					other = ErrInvalid
				}
				if errors.Is(err, other) {
					t.Fatalf("%v is in both classes", err)
				}
			}
		})
	}
}

func TestIter(t *testing.T) {
	a := build(spec{baseOffset: 0, records: []rec{{0, "a"}}})
	b := build(spec{baseOffset: 1, records: []rec{{0, "b"}, {0, "c"}}})
	c := build(spec{baseOffset: 3, records: []rec{{0, "d"}}})
	all := bytes.Join([][]byte{a, b, c}, nil)
	tests := []struct {
		name    string
		in      []byte
		batches int
		pos     int // Pos after the last Next
		want    error
	}{
		{"empty", nil, 0, 0, nil},
		{"three", all, 3, len(all), nil},
		{"partial length prefix", append(bytes.Clone(all), 0, 0, 0), 3, len(all), ErrTruncated},
		{"partial batch", all[:len(all)-5], 2, len(a) + len(b), ErrTruncated},
		{"garbage tail", append(bytes.Clone(all), bytes.Repeat([]byte{0xff}, 70)...), 3, len(all), ErrBadLength},
		{"corrupt middle", mutate(all, false, func(x []byte) []byte { x[len(a)+HeaderSize] ^= 1; return x }), 1, len(a), ErrBadCRC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := NewIter(tt.in)
			n, total := 0, 0
			for it.Next() {
				h := it.Header()
				if h.Size() != len(it.Batch()) {
					t.Fatalf("batch %d: header size %d, bytes %d", n, h.Size(), len(it.Batch()))
				}
				n++
				total += len(it.Batch())
			}
			if n != tt.batches || it.Pos() != tt.pos || total != tt.pos {
				t.Fatalf("batches %d pos %d total %d, want %d %d", n, it.Pos(), total, tt.batches, tt.pos)
			}
			if !errors.Is(it.Err(), tt.want) || (tt.want == nil && it.Err() != nil) {
				t.Fatalf("Err = %v, want %v", it.Err(), tt.want)
			}
			if it.Next() {
				t.Fatal("Next after the end returned true")
			}
		})
	}
}

// TestValidatedIters: NewValidatedIter and NewValidatedStoredIter skip only the
// CRC (bytes a walk with it already checked); every other check of Validate, or
// of ValidateStored for the stored one (which takes a batch compaction
// thinned), still stops them.
func TestValidatedIters(t *testing.T) {
	a := build(spec{baseOffset: 0, records: []rec{{0, "a"}}})
	b := build(spec{baseOffset: 1, records: []rec{{0, "b"}, {0, "c"}}})
	all := bytes.Join([][]byte{a, b}, nil)
	setCount := func(n byte) []byte {
		return mutate(all, false, func(x []byte) []byte { x[len(a)+offNumRecords+3] = n; return x })
	}
	tests := []struct {
		name             string
		in               []byte
		batches, stored  int // batches walked by NewValidatedIter, NewValidatedStoredIter
		want, wantStored error
	}{
		{"clean", all, 2, 2, nil, nil},
		{"crc not checked", mutate(all, false, func(x []byte) []byte { x[len(a)+HeaderSize] ^= 1; return x }), 2, 2, nil, nil},
		{"bad magic", mutate(all, false, func(x []byte) []byte { x[len(a)+offMagic] = 1; return x }), 1, 1, ErrBadMagic, ErrBadMagic},
		{"thinned by compaction", setCount(1), 1, 2, ErrBadRecordCount, nil},
		{"more records than offsets", setCount(5), 1, 1, ErrBadRecordCount, ErrBadRecordCount},
		{"partial batch", all[:len(all)-5], 1, 1, ErrTruncated, ErrTruncated},
	}
	walk := func(it Iter) (int, error) {
		n := 0
		for it.Next() {
			n++
		}
		return n, it.Err()
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := walk(NewValidatedIter(tt.in))
			if n != tt.batches || !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("NewValidatedIter: batches %d, Err %v; want %d, %v", n, err, tt.batches, tt.want)
			}
			n, err = walk(NewValidatedStoredIter(tt.in))
			if n != tt.stored || !errors.Is(err, tt.wantStored) || (tt.wantStored == nil && err != nil) {
				t.Fatalf("NewValidatedStoredIter: batches %d, Err %v; want %d, %v", n, err, tt.stored, tt.wantStored)
			}
		})
	}
}

func TestSetters(t *testing.T) {
	b := build(spec{firstTS: 100, records: []rec{{0, "a"}, {10, "b"}}})
	SetBaseOffset(b, 1<<40)
	SetPartitionLeaderEpoch(b, 12)
	h, err := Validate(b)
	if err != nil {
		t.Fatalf("stamped batch invalid: %v", err)
	}
	if h.BaseOffset != 1<<40 || h.PartitionLeaderEpoch != 12 {
		t.Fatalf("stamped header %+v", h)
	}
	SetLogAppendTime(b, 5000)
	h, err = Validate(b)
	if err != nil {
		t.Fatalf("LogAppendTime batch invalid: %v", err)
	}
	if !h.LogAppendTime() || h.MaxTimestamp != 5000 || h.FirstTimestamp != 100 {
		t.Fatalf("LogAppendTime header %+v", h)
	}
}

func TestFindTimestamp(t *testing.T) {
	b := build(spec{baseOffset: 10, firstTS: 1000,
		records: []rec{{0, "a"}, {20, "b"}, {5, "c"}, {20, "d"}}})
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		ts, min   int64
		off, time int64
		ok        bool
	}{
		{"before all", 0, 0, 10, 1000, true},
		{"exact first", 1000, 0, 10, 1000, true},
		{"between", 1001, 0, 11, 1020, true},
		{"skips later smaller", 1006, 0, 11, 1020, true},
		{"max", 1020, 0, 11, 1020, true},
		{"after all", 1021, 0, 0, 0, false},
		{"min offset", 0, 12, 12, 1005, true},
		{"min offset and ts", 1010, 12, 13, 1020, true},
		{"min past batch", 0, 14, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			off, ts, ok, err := FindTimestamp(&h, b[HeaderSize:], tt.ts, tt.min, math.MaxInt32)
			if err != nil || ok != tt.ok || (ok && (off != tt.off || ts != tt.time)) {
				t.Fatalf("got %d %d %v %v, want %d %d %v", off, ts, ok, err, tt.off, tt.time, tt.ok)
			}
		})
	}
	t.Run("log append time", func(t *testing.T) {
		c := bytes.Clone(b)
		SetLogAppendTime(c, 9000)
		h, _ := Validate(c)
		off, ts, ok, err := FindTimestamp(&h, c[HeaderSize:], 8000, 11, math.MaxInt32)
		if err != nil || !ok || off != 11 || ts != 9000 {
			t.Fatalf("got %d %d %v %v", off, ts, ok, err)
		}
		// A batch compaction emptied holds no record to answer.
		empty := h
		empty.NumRecords = 0
		if _, _, ok, err := FindTimestamp(&empty, nil, 8000, 0, math.MaxInt32); ok || err != nil {
			t.Fatalf("an empty batch answered a record: %v %v", ok, err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		_, _, _, err := FindTimestamp(&h, b[HeaderSize:HeaderSize+3], 5000, 0, math.MaxInt32)
		if !errors.Is(err, ErrBadRecord) {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestFindTimestampRecordLimit: in a compressed batch, a record whose body
// is above the limit stops the lookup with ErrRecordTooLarge once it is
// reached, as Kafka's streaming iterator throws there; an answer before it
// is still found, and an uncompressed batch's records are not held to the
// limit (Kafka reads them without that iterator).
func TestFindTimestampRecordLimit(t *testing.T) {
	recs := []Record{{Value: []byte("a")}, {TimestampDelta: 10, Value: bytes.Repeat([]byte("b"), 100)}, {TimestampDelta: 20, Value: []byte("c")}}
	const small = 50 // above the bodies of the first and last records, below the second's
	buf := GetRecordsBuffer()
	defer buf.Release()
	for _, tt := range []struct {
		name      string
		codec     Codec
		ts        int64
		maxRecord int
		off       int64
		tooLarge  bool
	}{
		{"answer before the large record", CodecGzip, 0, small, 0, false},
		{"large record reached", CodecGzip, 5, small, 0, true},
		{"large record read before the answer", CodecGzip, 15, small, 0, true},
		{"within the limit", CodecGzip, 15, 1000, 2, false},
		{"uncompressed not held", CodecNone, 15, small, 2, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Build(BuildOptions{FirstTimestamp: 1000, Codec: tt.codec}, recs)
			if err != nil {
				t.Fatal(err)
			}
			h, _ := Validate(b)
			records, err := buf.Section(h, b)
			if err != nil {
				t.Fatal(err)
			}
			off, _, ok, err := FindTimestamp(&h, records, 1000+tt.ts, 0, tt.maxRecord)
			switch {
			case tt.tooLarge && !errors.Is(err, ErrRecordTooLarge):
				t.Fatalf("err = %v, want %v", err, ErrRecordTooLarge)
			case !tt.tooLarge && (err != nil || !ok || off != tt.off):
				t.Fatalf("got offset %d, %v, %v; want %d", off, ok, err, tt.off)
			}
		})
	}
}

func TestZeroAllocs(t *testing.T) {
	var all []byte
	for i := range 4 {
		all = append(all, build(spec{baseOffset: int64(i), records: []rec{{0, "value"}, {1, "value"}}})...)
	}
	one := build(spec{})
	allocs := testing.AllocsPerRun(200, func() {
		it := NewIter(all)
		for it.Next() {
			SetBaseOffset(it.Batch(), 7)
			SetPartitionLeaderEpoch(it.Batch(), 3)
		}
		if it.Err() != nil {
			panic(it.Err())
		}
		if _, err := Validate(one); err != nil {
			panic(err)
		}
		SetLogAppendTime(one, 1)
	})
	if allocs != 0 {
		t.Fatalf("hot path allocates %.1f times per run", allocs)
	}
}
