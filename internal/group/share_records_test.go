package group

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// kafkaShareRecords are share group records as Kafka 4.4's own classes write
// them (the generated ShareGroup*Key/Value of kafka-group-coordinator 4.4.0,
// serialized with MessageUtil.toCoordinatorTypePrefixedBytes and
// toVersionPrefixedBytes; topic ids 0102...10 and 1112...20): name, key, value.
var kafkaShareRecords = [][3]string{
	{"metadata", "000b00027367", "000000000007ffffffffffffffd600"},
	{"member", "000a0002736700026d31", "00000372310363310b2f3132372e302e302e310303743103743200"},
	{"member-plain", "000a0002736700026d32", "0000000102680100"},
	{"target-metadata", "000c00027367", "0000000000070100080000018bcfe56800"},
	{"target-metadata-untimed", "000c00027367", "00000000000300"},
	{"target", "000d0002736700026d31", "0000030102030405060708090a0b0c0d0e0f10030000000000000002001112131415161718191a1b1c1d1e1f2002000000010000"},
	{"current", "000e0002736700026d31", "0000000000070000000601020102030405060708090a0b0c0d0e0f100300000000000000020000"},
	{"current-empty", "000e0002736700026d32", "00000000000700000000010100"},
}

// TestShareRecordsAsKafka decodes each record Kafka 4.4 wrote and encodes it
// again: the bytes must be Kafka's.
func TestShareRecordsAsKafka(t *testing.T) {
	checkRecordsAsKafka(t, kafkaShareRecords, kindShare, "sg", map[int16]func([]byte) ([]byte, error){
		typeShareMetadata: reencode(decodeShareMetadata),
		typeShareMember:   reencode(decodeShareMember),
		typeShareTargetMetadata: reencode(func(b []byte) (targetMetaValue, error) {
			return decodeTargetMeta(typeShareTargetMetadata, b)
		}),
		typeShareTargetMember: reencode(func(b []byte) (targetMemberValue, error) {
			return decodeTargetMember(typeShareTargetMember, b)
		}),
		typeShareCurrent: reencode(decodeShareCurrent),
	})
}

// TestShareRecordErrors: a truncated share value, one with bytes left over and
// a key with trailing bytes are corrupt, and replaying one fails the load.
func TestShareRecordErrors(t *testing.T) {
	key, _ := hex.DecodeString(kafkaShareRecords[1][1])
	value, _ := hex.DecodeString(kafkaShareRecords[1][2])
	for name, rec := range map[string]Record{
		"truncated": {Key: key, Value: value[:6]},
		"trailing":  {Key: key, Value: append(bytes.Clone(value), 0)},
		"key":       {Key: append(bytes.Clone(key), 0), Value: value},
	} {
		if err := newReplayed().apply(rec); err == nil {
			t.Errorf("%s: replayed", name)
		}
	}
}

// TestShareSteadyHeartbeatEncodesNothing: in a settled share group a
// heartbeat that changes nothing encodes no record, neither its member's nor
// the group's, and appends nothing, also after a topic nobody subscribes to
// was created; one that changes the member's rack encodes that member's
// records only.
func TestShareSteadyHeartbeatEncodesNothing(t *testing.T) {
	r := newShareBenchRig(t, 8)
	defer r.c.Close()
	groups, members := checkSteadyHeartbeats(t, &shareKind, r.c, r.store, r.topics, len(r.epochs), func(i int) { r.heartbeat(t, i) })
	req := shareHeartbeatRequest("m0", r.epochs[0])
	req.RackID = ptr("rack-a")
	r.send(t, req)
	if *groups != 0 || *members != 1 {
		t.Fatalf("a new rack encoded the group's records %d times and members' %d times, want 0 and 1", *groups, *members)
	}
}
