package txn

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/strata-stream/strata/internal/group"
)

// TestDecodeRecordVersions: the versions this build writes decode; a key or
// value of a newer version (a newer Strata or Kafka layout) is refused rather
// than read with this build's layout.
func TestDecodeRecordVersions(t *testing.T) {
	withVersion := func(b []byte, v int16) []byte {
		b = slices.Clone(b)
		binary.BigEndian.PutUint16(b, uint16(v))
		return b
	}
	v0 := encodeRecord("tx", Meta{ProducerID: 7, State: Ongoing, TimeoutMs: 1000, StartMs: 5})
	v1 := encodeRecord("tx", Meta{ProducerID: 7, State: Ongoing, TimeoutMs: 1000, StartMs: 5, TV2: true})
	for _, tc := range []struct {
		name       string
		key, value []byte
		ok         bool
	}{
		{"value version 0", v0.Key, v0.Value, true},
		{"value version 1", v1.Key, v1.Value, true},
		{"value version 2", v1.Key, withVersion(v1.Value, 2), false},
		{"key version 1", withVersion(v0.Key, 1), v0.Value, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, m, err := decodeRecord(group.Record{Key: tc.key, Value: tc.value})
			switch {
			case tc.ok && (err != nil || m.ProducerID != 7):
				t.Fatalf("decoding: %+v, %v", m, err)
			case !tc.ok && !errors.Is(err, ErrCorruptRecord):
				t.Fatalf("decoding a newer version: %+v, %v, want ErrCorruptRecord", m, err)
			}
		})
	}
}
