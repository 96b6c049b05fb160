package batch

import (
	"encoding/binary"
	"fmt"
)

// ControlType is the kind of a transaction marker: the type field of the key of the
// single record of a control batch.
//
// A control record (Kafka's ControlRecordType and EndTransactionMarker):
//
//	key    version i16 (0) | type i16 (0 abort, 1 commit)
//	value  version i16 (0) | coordinator epoch i32
type ControlType int16

// The marker types Kafka writes for transactions.
const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

// ErrBadControl: a control batch whose record is not a transaction marker.
var ErrBadControl = classed(ErrInvalid, "batch: malformed control record")

// Marker describes a transaction marker to build.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	Timestamp        int64 // ms, the batch's first and max timestamp
}

// BuildControl encodes a transaction marker as a valid v2 control batch (offset 0,
// to be stamped on append): transactional and control attribute bits, the
// producer's id and epoch, base sequence -1 and one record whose key names the type.
func BuildControl(m Marker) []byte {
	typ := ControlAbort
	if m.Commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(m.CoordinatorEpoch))
	b, err := Build(BuildOptions{
		FirstTimestamp: m.Timestamp,
		Idempotent:     true,
		ProducerID:     m.ProducerID,
		ProducerEpoch:  m.ProducerEpoch,
		BaseSequence:   -1,
		Transactional:  true,
		Control:        true,
	}, []Record{{Key: key, Value: value}})
	if err != nil { // one uncompressed record cannot fail
		panic(fmt.Sprintf("batch: building a control batch: %v", err))
	}
	return b
}

// ParseControl returns the marker type of a validated control batch b (see
// ParseMarker).
func ParseControl(b []byte) (ControlType, error) {
	typ, _, err := ParseMarker(b)
	return typ, err
}

// ParseMarker returns the marker type of a validated control batch b and the
// coordinator epoch its value holds (-1 when the value is too short to hold
// one). Control batches are never compressed; a batch that is not a control
// batch, holds no record or whose first record's key is not a marker key gives
// ErrBadControl.
func ParseMarker(b []byte) (ControlType, int32, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return 0, 0, err
	}
	if !h.Control() || h.Codec() != CodecNone || h.NumRecords < 1 || h.Size() < HeaderSize || len(b) < h.Size() {
		return 0, 0, ErrBadControl
	}
	var typ ControlType
	epoch := int32(-1)
	found := false
	err = WalkRecords(b[HeaderSize:h.Size()], 1, func(r RawRecord) error {
		if len(r.Key) < 4 {
			return ErrBadControl
		}
		typ, found = ControlType(binary.BigEndian.Uint16(r.Key[2:4])), true
		if len(r.Value) >= 6 {
			epoch = int32(binary.BigEndian.Uint32(r.Value[2:6]))
		}
		return nil
	})
	if err != nil || !found {
		return 0, 0, ErrBadControl
	}
	return typ, epoch, nil
}
