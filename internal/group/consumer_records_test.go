package group

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// kafkaConsumerRecords are consumer group records as Kafka 4.4's own classes
// write them (the generated ConsumerGroup*Key/Value of
// kafka-group-coordinator 4.4.0, serialized with
// MessageUtil.toCoordinatorTypePrefixedBytes and toVersionPrefixedBytes; topic
// ids 0102...10 and 1112...20; strings not set are Kafka's default "", not
// null): name, key, value. A null ClassicMemberMetadata and a metadata hash of
// 0 are left out of the tagged fields, a null AssignmentEpochs is not (a null
// array); a classic member's metadata is a present nullable struct (a leading
// 1).
var kafkaConsumerRecords = [][3]string{
	{"metadata", "000300026367", "000000000007010008ffffffffffffffd6"},
	{"metadata-unhashed", "000300026367", "00000000000200"},
	{"member", "00050002636700026d31", "00000369310372310363310b2f3132372e302e302e3103037431037432010000afc80672616e676500"},
	{"member-regex", "00050002636700026d32", "0000010103633202680104742e2a000493e00100"},
	{"member-classic", "00050002636700026d33", "00000101036333026802037431010000ea6001010028010000afc8030672616e676505000300000013636f6f70657261746976652d737469636b79010000"},
	{"target-metadata", "000600026367", "0000000000070100080000018bcfe56800"},
	{"target-metadata-untimed", "000600026367", "00000000000300"},
	{"target", "00070002636700026d31", "0000030102030405060708090a0b0c0d0e0f10030000000000000002001112131415161718191a1b1c1d1e1f2002000000010000"},
	{"current", "00080002636700026d31", "0000000000070000000602020102030405060708090a0b0c0d0e0f10030000000000000002010009030000000500000007021112131415161718191a1b1c1d1e1f2002000000010100010000"},
	{"current-empty", "00080002636700026d32", "0000fffffffe0000000401010100"},
}

// TestConsumerRecordsAsKafka decodes each record Kafka 4.4 wrote and encodes
// it again: the bytes must be Kafka's.
func TestConsumerRecordsAsKafka(t *testing.T) {
	checkRecordsAsKafka(t, kafkaConsumerRecords, kindConsumer, "cg", map[int16]func([]byte) ([]byte, error){
		typeConsumerMetadata: reencode(decodeConsumerMetadata),
		typeConsumerMember:   reencode(decodeConsumerMember),
		typeConsumerTargetMetadata: reencode(func(b []byte) (targetMetaValue, error) {
			return decodeTargetMeta(typeConsumerTargetMetadata, b)
		}),
		typeConsumerTargetMember: reencode(func(b []byte) (targetMemberValue, error) {
			return decodeTargetMember(typeConsumerTargetMember, b)
		}),
		typeConsumerCurrent: reencode(decodeConsumerCurrent),
	})
}

// TestConsumerRecordsFromSchema pins what the encoders write for values built
// by hand, byte by byte from the schemas, so that the round trip above cannot
// hide a field that decodes and encodes alike but wrongly.
func TestConsumerRecordsFromSchema(t *testing.T) {
	t1 := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"metadata", consumerMetadataValue{epoch: 7, metadataHash: -42}.appendTo(nil),
			"0000" + "00000007" + "01" + "00" + "08" + "ffffffffffffffd6"},
		{"member-classic", consumerMemberValue{
			clientID: "c3", clientHost: "h", topics: []string{"t1"}, rebalanceTimeoutMs: 60000,
			classic: &classicMemberValue{sessionTimeoutMs: 45000, protocols: []protocol{
				{name: "range", metadata: []byte{0, 3, 0, 0}}, {name: "cooperative-sticky", metadata: []byte{}},
			}},
		}.appendTo(nil),
			"0000" + "00" + "00" + "03" + "6333" + "02" + "68" + "02" + "03" + "7431" + "00" + "0000ea60" + "00" +
				"01" + "00" + "28" + "01" + "0000afc8" + "03" + "06" + "72616e6765" + "05" + "00030000" + "00" +
				"13" + hex.EncodeToString([]byte("cooperative-sticky")) + "01" + "00" + "00"},
		{"current", consumerCurrentValue{epoch: 7, prevEpoch: 6, state: kafkaMemberUnrevoked,
			assigned: []epochPartitions{{topicID: t1, partitions: []int32{0, 2}, epochs: []int32{5, 7}}},
			revoking: []epochPartitions{{topicID: t1, partitions: []int32{1}}},
		}.appendTo(nil),
			"0000" + "00000007" + "00000006" + "02" +
				"02" + hex.EncodeToString(t1[:]) + "03" + "00000000" + "00000002" + "01" + "00" + "09" + "03" + "00000005" + "00000007" +
				"02" + hex.EncodeToString(t1[:]) + "02" + "00000001" + "01" + "00" + "01" + "00" +
				"00"},
	}
	for _, tt := range tests {
		if got := hex.EncodeToString(tt.got); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestConsumerRecordErrors: a truncated consumer value, one with bytes left
// over, a classic member's metadata cut short and a key with trailing bytes
// are corrupt, and replaying one fails the load.
func TestConsumerRecordErrors(t *testing.T) {
	key, _ := hex.DecodeString(kafkaConsumerRecords[4][1])
	value, _ := hex.DecodeString(kafkaConsumerRecords[4][2])
	classicCut := bytes.Clone(value)
	classicCut[bytes.Index(classicCut, []byte{0x01, 0x00, 0x28})+2] = 0x05 // the classic field's length
	for name, rec := range map[string]Record{
		"truncated":   {Key: key, Value: value[:6]},
		"trailing":    {Key: key, Value: append(bytes.Clone(value), 0)},
		"classic cut": {Key: key, Value: classicCut},
		"key":         {Key: append(bytes.Clone(key), 0), Value: value},
	} {
		if err := newReplayed().apply(rec); err == nil {
			t.Errorf("%s: replayed", name)
		}
	}
}
