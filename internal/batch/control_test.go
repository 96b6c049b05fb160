package batch

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestBuildControlRoundTrip(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := BuildControl(Marker{ProducerID: 42, ProducerEpoch: 3, CoordinatorEpoch: 7, Commit: commit, Timestamp: 1234})
		h, err := Validate(b)
		if err != nil {
			t.Fatalf("control batch does not validate: %v", err)
		}
		if !h.Control() || !h.Transactional() || h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != -1 || h.NumRecords != 1 || h.MaxTimestamp != 1234 {
			t.Fatalf("header %+v", h)
		}
		typ, epoch, err := ParseMarker(b)
		want := ControlAbort
		if commit {
			want = ControlCommit
		}
		if err != nil || typ != want || epoch != 7 {
			t.Fatalf("ParseMarker = %v, %d, %v; want %v, 7", typ, epoch, err, want)
		}
		// The record decodes as Kafka's EndTransactionMarker with franz-go's schema.
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		err = Records(b, func(_ Header, r Record) error {
			var key kmsg.ControlRecordKey
			if err := key.ReadFrom(r.Key); err != nil {
				return err
			}
			if key.Type != kmsg.ControlRecordKeyType(want) {
				t.Fatalf("key type %v, want %v", key.Type, want)
			}
			var val kmsg.EndTxnMarker
			if err := val.ReadFrom(r.Value); err != nil {
				return err
			}
			if val.CoordinatorEpoch != 7 {
				t.Fatalf("coordinator epoch %d", val.CoordinatorEpoch)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseControlRejects(t *testing.T) {
	plain, _ := Build(BuildOptions{}, []Record{{Key: []byte("k"), Value: []byte("v")}})
	shortKey, _ := Build(BuildOptions{Control: true, Transactional: true}, []Record{{Key: []byte{0}}})
	nullKey, _ := Build(BuildOptions{Control: true, Transactional: true}, []Record{{Value: []byte{0, 0}}})
	for name, b := range map[string][]byte{"not control": plain, "short key": shortKey, "null key": nullKey, "truncated": plain[:20]} {
		if _, err := ParseControl(b); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: unclassed error %v", name, err)
		}
	}
}

// FuzzParseControl checks that no input panics ParseMarker and that an accepted
// marker's type and coordinator epoch are the ones its record holds.
func FuzzParseControl(f *testing.F) {
	f.Add(BuildControl(Marker{ProducerID: 1, Commit: true}))
	f.Add(BuildControl(Marker{ProducerID: 1}))
	f.Fuzz(func(t *testing.T, data []byte) {
		typ, epoch, err := ParseMarker(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("unclassed error %v", err)
			}
			return
		}
		h, _ := ParseHeader(data)
		if !h.Control() {
			t.Fatalf("accepted a batch without the control bit")
		}
		var got ControlType
		gotEpoch := int32(-1)
		_ = WalkRecords(data[HeaderSize:h.Size()], 1, func(r RawRecord) error {
			got = ControlType(binary.BigEndian.Uint16(r.Key[2:4]))
			if len(r.Value) >= 6 {
				gotEpoch = int32(binary.BigEndian.Uint32(r.Value[2:6]))
			}
			return nil
		})
		if got != typ || gotEpoch != epoch {
			t.Fatalf("type %v epoch %d, the record says %v and %d", typ, epoch, got, gotEpoch)
		}
	})
}
