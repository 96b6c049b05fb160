package metadata

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// richImage exercises every part of an image: fenced broker, broker configs,
// topic overrides, changed partitions, a reassignment in progress, a removed
// topic, producer ids.
func richImage(t *testing.T) *Image {
	img := mustApply(t, baseImage(t),
		&ConfigRecord{ResourceType: ResourceBroker, Key: "log.retention.ms", Value: "5000"},
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "2", Key: "message.max.bytes", Value: "99"},
		&FenceBrokerRecord{BrokerID: 3, Epoch: 1},
		&BrokerFeaturesRecord{BrokerID: 2, Epoch: 1, Features: map[string]int32{FeatureOwedMarkers: 1}},
		&BrokerDirectoryRecord{BrokerID: 2, Epoch: 1, DirectoryID: idC},
		&ControlledShutdownRecord{BrokerID: 2, Epoch: 1},
		&VoterDirectoryRecord{NodeID: 2, DirectoryID: idB},
		&PartitionChangeRecord{TopicID: idA, Partition: 0, Leader: 2, LeaderEpoch: 1, ISR: []int32{2}},
		&ReassignmentRecord{TopicID: idA, Partition: 1, Replicas: []int32{4, 3, 2, 1}, Adding: []int32{4},
			Removing: []int32{2, 1}, ISR: []int32{2, 3, 1}, Leader: 2},
		&RemoveTopicRecord{TopicID: idB},
		&TopicRecord{Name: "c", ID: idC, Configs: map[string]string{"cleanup.policy": "compact"}},
		&PartitionRecord{TopicID: idC, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: NoLeader, LeaderEpoch: 3},
		&ProducerIDsRecord{BrokerID: 1, BrokerEpoch: 1, NextProducerID: 2000},
	)
	return img.WithOffset(42)
}

func TestSnapshotRoundTrip(t *testing.T) {
	img := richImage(t)
	got, err := DecodeSnapshot(EncodeSnapshot(img))
	if err != nil {
		t.Fatal(err)
	}
	if got.Offset() != 42 {
		t.Errorf("offset = %d", got.Offset())
	}
	if !reflect.DeepEqual(got.Records(), img.Records()) {
		t.Errorf("records differ:\n got %+v\nwant %+v", got.Records(), img.Records())
	}
	for _, name := range []string{"orders", "c"} {
		if !reflect.DeepEqual(got.Topic(name), img.Topic(name)) {
			t.Errorf("topic %s:\n got %+v\nwant %+v", name, got.Topic(name), img.Topic(name))
		}
	}
	if p := got.Partition("orders", 1); !p.Reassigning() || p.PartitionEpoch != 1 {
		t.Errorf("restored reassignment: %+v", p)
	}
	if !reflect.DeepEqual(got.Brokers(), img.Brokers()) || got.NextProducerID() != 2000 ||
		got.NumPartitions() != img.NumPartitions() || got.Topic("logs") != nil {
		t.Error("brokers, producer ids or counts differ")
	}
	if got.Topic("c").Config.RetentionMs != 5000 {
		t.Error("restored topic lost the cluster default")
	}
	if _, err := DecodeSnapshot(EncodeSnapshot(NewImage())); err != nil {
		t.Errorf("empty image: %v", err)
	}
}

func TestDecodeSnapshotErrors(t *testing.T) {
	good := EncodeSnapshot(richImage(t))
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 1
		return b
	}
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrCorrupt},
		{"truncated", good[:len(good)-1], ErrCorrupt},
		{"bad magic", flip(0), ErrCorrupt},
		{"flipped body bit", flip(len(good) / 2), ErrCorrupt},
		{"flipped crc bit", flip(len(good) - 1), ErrCorrupt},
		{"a batch is not a snapshot", EncodeBatch(sampleRecords()), ErrCorrupt},
	}
	for _, tt := range tests {
		if img, err := DecodeSnapshot(tt.b); !errors.Is(err, tt.want) || img != nil {
			t.Errorf("%s: DecodeSnapshot = %v, %v; want %v", tt.name, img, err, tt.want)
		}
	}
}

// FuzzDecodeSnapshot fuzzes a snapshot's offset and record batch under a valid
// checksum (a checksum over the raw bytes would turn away nearly every
// mutation before the decoder): whatever decodes and applies must encode to
// a snapshot that decodes again, stably, as a follower installing it needs.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(uint64(0), EncodeBatch(nil))
	one, _ := Apply(NewImage(), register(1, 1))
	f.Add(uint64(42), EncodeBatch(one.Records()))
	f.Add(uint64(7), EncodeBatch(sampleRecords()))
	f.Fuzz(func(t *testing.T, offset uint64, batch []byte) {
		img, err := DecodeSnapshot(sealSnapshot(offset, batch))
		if err != nil {
			return
		}
		if img.Offset() != offset {
			t.Fatalf("snapshot at offset %d decoded at %d", offset, img.Offset())
		}
		enc := EncodeSnapshot(img)
		again, err := DecodeSnapshot(enc)
		if err != nil {
			t.Fatalf("re-encoded snapshot does not decode: %v", err)
		}
		if !bytes.Equal(EncodeSnapshot(again), enc) {
			t.Fatal("snapshot encoding is not stable")
		}
	})
}
