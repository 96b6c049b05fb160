package batch

import "encoding/binary"

// RawRecord is one record of a batch as it is encoded, with the fields a log
// compactor judges it by. Bytes is the whole record, length varint included, so a
// kept record can be copied into a rewritten batch unchanged: its offset and
// timestamp deltas stay valid as long as the batch keeps its base offset and first
// timestamp.
type RawRecord struct {
	Bytes          []byte
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte // nil when the key is null
	Value          []byte // nil when the value is null
	NullValue      bool   // a tombstone
}

// WalkRecords calls fn for each of the n records encoded at the start of records (a
// batch's record section, decompressed) and stops at the first error fn returns.
// Each record is varint length, int8 attributes, varlong timestampDelta, varint
// offsetDelta, varint key length (-1: null) and key, varint value length (-1: null)
// and value, then headers, which are not parsed. A record that does not parse gives
// ErrBadRecord. The slices in RawRecord alias records. WalkRecords does not
// allocate.
func WalkRecords(records []byte, n int32, fn func(r RawRecord) error) error {
	for range n {
		length, k := binary.Varint(records)
		if k <= 0 || length < 1 || length > int64(len(records)-k) {
			return ErrBadRecord
		}
		whole := records[:k+int(length)]
		rest := whole[k+1:] // skip the attributes byte
		records = records[len(whole):]

		var r RawRecord
		r.Bytes = whole
		var ok bool
		if r.TimestampDelta, rest, ok = varint(rest); !ok {
			return ErrBadRecord
		}
		offDelta, rest, ok := varint(rest)
		if !ok || offDelta < 0 || offDelta > 1<<31-1 {
			return ErrBadRecord
		}
		r.OffsetDelta = int32(offDelta)
		var null bool
		if r.Key, null, rest, ok = lengthPrefixed(rest); !ok {
			return ErrBadRecord
		}
		if null {
			r.Key = nil
		}
		if r.Value, r.NullValue, _, ok = lengthPrefixed(rest); !ok {
			return ErrBadRecord
		}
		if r.NullValue {
			r.Value = nil
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func varint(b []byte) (int64, []byte, bool) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return v, b[n:], true
}

// lengthPrefixed reads a varint length (-1 for null) and that many bytes.
func lengthPrefixed(b []byte) (v []byte, null bool, rest []byte, ok bool) {
	n, b, ok := varint(b)
	switch {
	case !ok || n < -1 || n > int64(len(b)):
		return nil, false, nil, false
	case n == -1:
		return nil, true, b, true
	}
	return b[:n], false, b[n:], true
}
