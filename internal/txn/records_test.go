package txn

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
)

// TestLastProducerEpochRecord: Meta.LastProducerEpoch round-trips through
// its tagged field, on states of either transaction version (a state of
// version 1 with one is written as TxnMetadataValue v1); a record without
// the tag, as Kafka and earlier builds wrote them, loads with the epoch
// unknown (lastEpochUnknown); damaged values are corrupt records.
func TestLastProducerEpochRecord(t *testing.T) {
	for _, m := range []Meta{
		{ProducerID: 7, ProducerEpoch: 5, State: Empty, StartMs: -1, LastProducerEpoch: 4},
		{ProducerID: 7, ProducerEpoch: 5, State: CompleteCommit, StartMs: -1, LastProducerEpoch: 4, TV2: true},
		{ProducerID: 99, PrevProducerID: 7, State: Empty, StartMs: -1, LastProducerEpoch: math.MaxInt16 - 1},
		{ProducerID: 7, ProducerEpoch: 5, State: Empty, StartMs: -1, LastProducerEpoch: -1},
	} {
		_, back, err := decodeRecord(encodeRecord("tx", m))
		if err != nil || back.LastProducerEpoch != m.LastProducerEpoch || back.PrevProducerID != m.PrevProducerID || back.TV2 != m.TV2 {
			t.Errorf("round trip of %+v: %+v, %v", m, back, err)
		}
	}

	key := kmsg.NewTxnMetadataKey()
	key.TransactionalID = "tx"
	for _, version := range []int16{0, 1} {
		v := kmsg.NewTxnMetadataValue()
		v.Version, v.ProducerID, v.ProducerEpoch, v.State, v.StartTimestamp = version, 7, 5, Empty, -1
		if version == 1 {
			v.ClientTransactionVersion = 2
		}
		_, m, err := decodeRecord(group.Record{Key: key.AppendTo(nil), Value: v.AppendTo(nil)})
		if err != nil || m.ProducerID != 7 || m.ProducerEpoch != 5 || m.LastProducerEpoch != lastEpochUnknown {
			t.Errorf("value version %d without the tag: %+v, %v, want producer 7 epoch 5, last epoch unknown", version, m, err)
		}
	}
	damagedTagsRefused(t, lastEpochTag, []byte{lastEpochVersion, 0, 4}, Empty)
	damagedTagsRefused(t, lastEpochTag, []byte{lastEpochVersion, 0xff, 0xfe}, Empty) // epoch -2 written
}

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
