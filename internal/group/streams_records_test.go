package group

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
)

// kafkaStreamsRecords are streams group records as Kafka 4.4's own classes
// write them (the generated StreamsGroup*Key/Value of kafka-group-coordinator
// 4.4.0, serialized with MessageUtil.toCoordinatorTypePrefixedBytes and
// toVersionPrefixedBytes): name, key, value.
var kafkaStreamsRecords = [][3]string{
	{"metadata", "00110003617070", "000000000005ffffffffffffffd601000400000003"},
	{"metadata-unvalidated", "00110003617070", "000000000001000000000000000700"},
	{"member", "0013000361707000026d31", "0000036931000363310b2f3132372e302e302e310000753000000002037031010368311f900002026b02760000"},
	{"member-plain", "0013000361707000026d32", "00000101036332032f68000003e800000000037032ff0100"},
	{"target-metadata", "00140003617070", "0000000000050100080000018bcfe56800"},
	{"target", "0015000361707000026d31", "0000020230030000000000000001000202310200000001000100"},
	{"current", "0016000361707000026d31", "000000000005000000040202023003000000000000000101000903000000030000000502023102000000010001020231020000000000010100"},
	{"topology", "00170003617070", "0000000000010302300203696e010102086170702d7265700101000231010102086170702d636867000000000000020f636c65616e75702e706f6c69637908636f6d7061637400000102086170702d7265700000000200030100020101020000000000"},
}

// TestStreamsRecordsAsKafka decodes each record Kafka 4.4 wrote and encodes it
// again: the bytes must be Kafka's.
func TestStreamsRecordsAsKafka(t *testing.T) {
	checkRecordsAsKafka(t, kafkaStreamsRecords, kindStreams, "app", map[int16]func([]byte) ([]byte, error){
		typeStreamsMetadata: reencode(decodeStreamsMetadata),
		typeStreamsMember:   reencode(decodeStreamsMember),
		typeStreamsTargetMetadata: reencode(func(b []byte) (targetMetaValue, error) {
			return decodeTargetMeta(typeStreamsTargetMetadata, b)
		}),
		typeStreamsTargetMember: reencode(decodeStreamsTarget),
		typeStreamsCurrent:      reencode(decodeStreamsCurrent),
		typeStreamsTopology: func(b []byte) ([]byte, error) {
			v, err := decodeStreamsTopology(b)
			return appendTopologyValue(nil, v), err
		},
	})
}

// checkRecordsAsKafka decodes each of Kafka's records (name, key, value in
// hex), all of kind and group, and encodes it again with recode by record
// type: the bytes must be Kafka's.
func checkRecordsAsKafka(t *testing.T, recs [][3]string, kind recordKind, group string, recode map[int16]func([]byte) ([]byte, error)) {
	for _, rec := range recs {
		t.Run(rec[0], func(t *testing.T) {
			key, _ := hex.DecodeString(rec[1])
			value, _ := hex.DecodeString(rec[2])
			k, err := decodeKey(key)
			if err != nil || k.kind != kind || k.group != group {
				t.Fatalf("key %s = %+v, %v", rec[1], k, err)
			}
			if got := recordKey(k.typ, k.group, k.member); !bytes.Equal(got, key) {
				t.Fatalf("key encodes as %x, Kafka's is %s", got, rec[1])
			}
			again, err := recode[k.typ](value)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, value) {
				t.Fatalf("value encodes as\n%x\nKafka's is\n%s", again, rec[2])
			}
		})
	}
}

// reencode decodes a value with decode and encodes it again.
func reencode[V interface{ appendTo([]byte) []byte }](decode func([]byte) (V, error)) func([]byte) ([]byte, error) {
	return func(b []byte) ([]byte, error) {
		v, err := decode(b)
		return v.appendTo(nil), err
	}
}

// TestStreamsValueErrors: a value of another version, a truncated one and one
// with bytes left over are corrupt; tagged fields this package does not know
// are skipped.
func TestStreamsValueErrors(t *testing.T) {
	good := targetMetaValue{epoch: 3}.appendTo(nil) // no tagged field: it ends in 0
	withTags := append(good[:len(good)-1:len(good)-1], appendTags(nil,
		taggedField{tagAssignmentTimestamp, kbin.AppendInt64(nil, 9)}, taggedField{7, []byte{1, 2, 3}})...)
	if v, err := decodeTargetMeta(typeStreamsTargetMetadata, withTags); err != nil || v.epoch != 3 || v.timeMs != 9 {
		t.Fatalf("unknown tag: %+v, %v", v, err)
	}
	v1 := append(kbin.AppendInt16(nil, 1), good[2:]...)
	for name, b := range map[string][]byte{
		"version 1": v1,
		"truncated": good[:5],
		"trailing":  append(bytes.Clone(good), 0),
		"empty":     {},
	} {
		if _, err := decodeTargetMeta(typeStreamsTargetMetadata, b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestStreamsSteadyHeartbeatEncodesNothing: in a settled streams group a
// heartbeat that changes nothing encodes no record, neither its member's nor
// the group's, and appends nothing, also after a topic outside the topology
// was created; one that changes the member's rebalance timeout encodes that
// member's records only.
func TestStreamsSteadyHeartbeatEncodesNothing(t *testing.T) {
	r := newStreamsBenchRig(t, 8)
	defer r.c.Close()
	groups, members := checkSteadyHeartbeats(t, &streamsKind, r.c, r.store, r.topics, len(r.epochs), func(i int) { r.heartbeat(t, i) })
	req := r.request(0)
	req.RebalanceTimeoutMillis = 45000
	r.send(t, 0, &req)
	if *groups != 0 || *members != 1 {
		t.Fatalf("a new rebalance timeout encoded the group's records %d times and members' %d times, want 0 and 1", *groups, *members)
	}
}
