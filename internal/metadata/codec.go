package metadata

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// Batch framing; see the package documentation for the layout.
const (
	batchMagic   = 0xA7
	batchVersion = 1
	// recordVersion is the only body version of every record type so far.
	recordVersion = 0
	// minRecordLen is a record's smallest encoding: type and version bytes.
	minRecordLen = 2
)

// AppendRecord appends the encoding of rec (length, type, version, body) to b.
func AppendRecord(b []byte, rec Record) []byte {
	body := rec.appendBody([]byte{byte(rec.Type()), recordVersion})
	b = binary.AppendUvarint(b, uint64(len(body)))
	return append(b, body...)
}

// EncodeBatch encodes records as one batch: the payload of one Raft log entry,
// applied all or nothing.
func EncodeBatch(recs []Record) []byte {
	b := []byte{batchMagic, batchVersion}
	b = binary.AppendUvarint(b, uint64(len(recs)))
	for _, r := range recs {
		b = AppendRecord(b, r)
	}
	return b
}

// DecodeBatch decodes a batch produced by EncodeBatch. Any deviation from the
// canonical encoding is an error wrapping ErrCorrupt or ErrUnsupportedVersion.
func DecodeBatch(b []byte) ([]Record, error) {
	r := reader{b: b}
	if magic := r.uint8(); r.err == nil && magic != batchMagic {
		return nil, fmt.Errorf("%w: batch magic %#x", ErrCorrupt, magic)
	}
	if v := r.uint8(); r.err == nil && v != batchVersion {
		return nil, fmt.Errorf("%w: batch version %d", ErrUnsupportedVersion, v)
	}
	n := r.count(minRecordLen + 1)
	recs := make([]Record, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		recs = append(recs, r.record())
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return recs, nil
}

// DecodeRecord decodes one record produced by AppendRecord, which must fill b.
func DecodeRecord(b []byte) (Record, error) {
	r := reader{b: b}
	rec := r.record()
	if r.err == nil && len(r.b) > 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return rec, nil
}

func appendInt32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }
func appendInt64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendInt32s(b []byte, vs []int32) []byte {
	b = binary.AppendUvarint(b, uint64(len(vs)))
	for _, v := range vs {
		b = appendInt32(b, v)
	}
	return b
}

// appendStringMap writes the pairs in ascending key order, so equal maps encode
// to equal bytes.
func appendStringMap(b []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(appendString(b, k), m[k])
	}
	return b
}

// reader decodes with a sticky error: after the first failure every read
// returns a zero value and err keeps the first cause.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
	r.b = nil
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("need %d bytes, have %d", n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) uint8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) int32() int32 {
	if v := r.take(4); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (r *reader) int64() int64 {
	if v := r.take(8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func (r *reader) bool() bool {
	switch v := r.uint8(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		r.fail("bool byte %d", v)
		return false
	}
}

func (r *reader) uuid() UUID {
	var u UUID
	copy(u[:], r.take(len(u)))
	return u
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	// Canonical: the shortest encoding only, so equal values have equal bytes.
	if n != len(binary.AppendUvarint(nil, v)) {
		r.fail("non-minimal uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads an element count and checks that count elements of at least
// minSize bytes each fit in what is left, so garbage cannot force a huge
// allocation.
func (r *reader) count(minSize int) int {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)/minSize) {
		r.fail("count %d does not fit in %d bytes", n, len(r.b))
		return 0
	}
	return int(n)
}

func (r *reader) string() string {
	n := r.count(1)
	return string(r.take(n))
}

func (r *reader) int32s() []int32 {
	n := r.count(4)
	if n == 0 {
		return nil
	}
	vs := make([]int32, n)
	for i := range vs {
		vs[i] = r.int32()
	}
	return vs
}

func (r *reader) stringMap() map[string]string {
	n := r.count(2)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	prev := ""
	for i := 0; i < n && r.err == nil; i++ {
		k, v := r.string(), r.string()
		if i > 0 && k <= prev {
			r.fail("map keys not strictly ascending: %q after %q", k, prev)
		}
		m[k], prev = v, k
	}
	return m
}

// record reads one length-prefixed record.
func (r *reader) record() Record {
	n := r.count(1)
	body := reader{b: r.take(n)}
	if r.err != nil {
		return nil
	}
	if n < minRecordLen {
		r.fail("record of %d bytes", n)
		return nil
	}
	t, v := RecordType(body.uint8()), body.uint8()
	rec := newRecord(t)
	if rec == nil || v != recordVersion {
		r.err = fmt.Errorf("%w: record type %d version %d", ErrUnsupportedVersion, t, v)
		r.b = nil
		return nil
	}
	rec.readBody(&body)
	if body.err == nil && len(body.b) > 0 {
		body.fail("record type %d: %d trailing bytes", t, len(body.b))
	}
	if body.err != nil {
		r.err, r.b = body.err, nil
		return nil
	}
	return rec
}
