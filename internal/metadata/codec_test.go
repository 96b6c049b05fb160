package metadata

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/strata-stream/strata/internal/acl"
)

var (
	idA = UUID{0xa, 1, 2, 3, 4, 5, 0x46, 7, 0x88, 9, 10, 11, 12, 13, 14, 15}
	idB = UUID{0xb, 1, 2, 3, 4, 5, 0x46, 7, 0x88, 9, 10, 11, 12, 13, 14, 15}
)

// sampleRecords has one record of every type with every field set.
func sampleRecords() []Record {
	return []Record{
		&RegisterBrokerRecord{BrokerID: 1, Incarnation: idB, Epoch: 7, Host: "127.0.0.1", Port: 9092, Rack: "r1", Fenced: true},
		&FenceBrokerRecord{BrokerID: 1, Epoch: 7},
		&UnfenceBrokerRecord{BrokerID: 1, Epoch: 7},
		&TopicRecord{Name: "orders", ID: idA, Configs: map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"}},
		&PartitionRecord{TopicID: idA, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9},
		&PartitionChangeRecord{TopicID: idA, Partition: 0, BasePartitionEpoch: 9, Leader: 2, LeaderEpoch: 5, ISR: []int32{2}},
		&RemoveTopicRecord{TopicID: idA},
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "", Key: "log.retention.ms", Value: "5", Delete: false},
		&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders", Key: "retention.ms", Delete: true},
		&ProducerIDsRecord{BrokerID: 1, BrokerEpoch: 7, NextProducerID: 3000},
		&ReassignmentRecord{TopicID: idA, Partition: 0, BasePartitionEpoch: 10, Replicas: []int32{4, 2, 1}, Adding: []int32{4},
			Removing: []int32{1}, ISR: []int32{2, 1}, Leader: 2, LeaderEpoch: 5},
		&UnregisterBrokerRecord{BrokerID: 4, Epoch: 3},
		&ScramCredentialRecord{ScramCredential: ScramCredential{User: "alice", Mechanism: ScramSHA512, Salt: []byte("salt"), StoredKey: []byte("sk"), ServerKey: []byte("svk"), Iterations: 4096}},
		&ScramCredentialRecord{ScramCredential: ScramCredential{User: "alice", Mechanism: ScramSHA256}, Delete: true},
		&ClientQuotaRecord{Entity: QuotaEntity{User: QuotaName{Set: true, Name: "alice"}, ClientID: QuotaName{Set: true, Default: true}}, Key: "producer_byte_rate", Value: 1024.5},
		&IPQuotaRecord{IP: QuotaName{Set: true, Name: "10.0.0.1"}, Key: "connection_creation_rate", Value: 5},
		&AclRecord{Binding: acl.Binding{ResourceType: 2, ResourceName: "orders", PatternType: 4, Principal: "User:alice", Host: "*", Operation: 3, Permission: 3}},
		&DelegationTokenRecord{DelegationToken: DelegationToken{ID: "tok", Owner: "User:alice", Requester: "User:admin",
			Renewers: []string{"User:bob", "User:carol"}, IssueTimestamp: 1, ExpiryTimestamp: 2, MaxTimestamp: 3}},
		&RemoveDelegationTokenRecord{ID: "tok"},
		&BrokerFeaturesRecord{BrokerID: 1, Epoch: 7, Features: map[string]int32{FeatureOwedMarkers: 1, "strata.other": 3}},
		&BrokerDirectoryRecord{BrokerID: 1, Epoch: 7, DirectoryID: idA},
		&VoterDirectoryRecord{NodeID: 3, DirectoryID: idB},
		&VoterDirectoryRecord{NodeID: 2},
		&FormerDirectoryRecord{BrokerID: 4, DirectoryID: idC},
		&ControlledShutdownRecord{BrokerID: 1, Epoch: 7},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, rec := range sampleRecords() {
		b := AppendRecord(nil, rec)
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("DecodeRecord(%T): %v", rec, err)
		}
		if !reflect.DeepEqual(got, rec) {
			t.Errorf("round trip of %T:\n got %+v\nwant %+v", rec, got, rec)
		}
	}
	recs := sampleRecords()
	got, err := DecodeBatch(EncodeBatch(recs))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Errorf("batch round trip:\n got %+v\nwant %+v", got, recs)
	}
	if got, err := DecodeBatch(EncodeBatch(nil)); err != nil || len(got) != 0 {
		t.Errorf("empty batch: %v, %v", got, err)
	}
}

// TestRecordRoundTripProperty encodes random records of every type.
func TestRecordRoundTripProperty(t *testing.T) {
	uuidGen := rapid.Custom(func(t *rapid.T) UUID {
		var u UUID
		copy(u[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "uuid"))
		return u
	})
	ids := rapid.SliceOfN(rapid.Int32(), 1, 8)
	str := rapid.String()
	recGen := rapid.OneOf(
		rapid.Custom(func(t *rapid.T) Record {
			return &RegisterBrokerRecord{BrokerID: rapid.Int32().Draw(t, "id"), Incarnation: uuidGen.Draw(t, "inc"),
				Epoch: rapid.Int64().Draw(t, "epoch"), Host: str.Draw(t, "host"), Port: rapid.Int32().Draw(t, "port"),
				Rack: str.Draw(t, "rack"), Fenced: rapid.Bool().Draw(t, "fenced")}
		}),
		rapid.Custom(func(t *rapid.T) Record {
			return &FenceBrokerRecord{BrokerID: rapid.Int32().Draw(t, "id"), Epoch: rapid.Int64().Draw(t, "epoch")}
		}),
		rapid.Custom(func(t *rapid.T) Record {
			return &UnfenceBrokerRecord{BrokerID: rapid.Int32().Draw(t, "id"), Epoch: rapid.Int64().Draw(t, "epoch")}
		}),
		rapid.Custom(func(t *rapid.T) Record {
			cfg := rapid.MapOf(str, str).Draw(t, "configs")
			if len(cfg) == 0 {
				cfg = nil
			}
			return &TopicRecord{Name: str.Draw(t, "name"), ID: uuidGen.Draw(t, "id"), Configs: cfg}
		}),
		rapid.Custom(func(t *rapid.T) Record {
			return &PartitionRecord{TopicID: uuidGen.Draw(t, "id"), Partition: rapid.Int32().Draw(t, "p"),
				Replicas: ids.Draw(t, "replicas"), ISR: ids.Draw(t, "isr"), Leader: rapid.Int32().Draw(t, "leader"),
				LeaderEpoch: rapid.Int32().Draw(t, "le"), PartitionEpoch: rapid.Int32().Draw(t, "pe")}
		}),
		rapid.Custom(func(t *rapid.T) Record {
			return &PartitionChangeRecord{TopicID: uuidGen.Draw(t, "id"), Partition: rapid.Int32().Draw(t, "p"),
				BasePartitionEpoch: rapid.Int32().Draw(t, "pe"), Leader: rapid.Int32().Draw(t, "leader"),
				LeaderEpoch: rapid.Int32().Draw(t, "le"), ISR: ids.Draw(t, "isr")}
		}),
		rapid.Custom(func(t *rapid.T) Record { return &RemoveTopicRecord{TopicID: uuidGen.Draw(t, "id")} }),
		rapid.Custom(func(t *rapid.T) Record {
			return &ConfigRecord{ResourceType: ResourceType(rapid.Int8().Draw(t, "rt")), ResourceName: str.Draw(t, "name"),
				Key: str.Draw(t, "key"), Value: str.Draw(t, "value"), Delete: rapid.Bool().Draw(t, "delete")}
		}),
		rapid.Custom(func(t *rapid.T) Record {
			return &ReassignmentRecord{TopicID: uuidGen.Draw(t, "id"), Partition: rapid.Int32().Draw(t, "p"),
				BasePartitionEpoch: rapid.Int32().Draw(t, "pe"), Replicas: ids.Draw(t, "replicas"),
				Adding: ids.Draw(t, "adding"), Removing: ids.Draw(t, "removing"), ISR: ids.Draw(t, "isr"),
				Leader: rapid.Int32().Draw(t, "leader"), LeaderEpoch: rapid.Int32().Draw(t, "le")}
		}),
		rapid.Custom(func(t *rapid.T) Record {
			return &UnregisterBrokerRecord{BrokerID: rapid.Int32().Draw(t, "id"), Epoch: rapid.Int64().Draw(t, "epoch")}
		}),
		rapid.Custom(func(t *rapid.T) Record {
			return &ProducerIDsRecord{BrokerID: rapid.Int32().Draw(t, "id"), BrokerEpoch: rapid.Int64().Draw(t, "epoch"),
				NextProducerID: rapid.Int64().Draw(t, "next")}
		}),
		rapid.Custom(func(t *rapid.T) Record {
			f := rapid.MapOf(str, rapid.Int32()).Draw(t, "features")
			if len(f) == 0 {
				f = nil
			}
			return &BrokerFeaturesRecord{BrokerID: rapid.Int32().Draw(t, "id"), Epoch: rapid.Int64().Draw(t, "epoch"), Features: f}
		}),
		rapid.Custom(func(t *rapid.T) Record {
			return &BrokerDirectoryRecord{BrokerID: rapid.Int32().Draw(t, "id"), Epoch: rapid.Int64().Draw(t, "epoch"),
				DirectoryID: uuidGen.Draw(t, "dir")}
		}),
		rapid.Custom(func(t *rapid.T) Record {
			return &VoterDirectoryRecord{NodeID: rapid.Int32().Draw(t, "id"), DirectoryID: uuidGen.Draw(t, "dir")}
		}),
		rapid.Custom(func(t *rapid.T) Record {
			return &FormerDirectoryRecord{BrokerID: rapid.Int32().Draw(t, "id"), DirectoryID: uuidGen.Draw(t, "dir")}
		}),
		rapid.Custom(func(t *rapid.T) Record {
			return &ControlledShutdownRecord{BrokerID: rapid.Int32().Draw(t, "id"), Epoch: rapid.Int64().Draw(t, "epoch")}
		}),
	)
	rapid.Check(t, func(t *rapid.T) {
		recs := rapid.SliceOf(recGen).Draw(t, "records")
		got, err := DecodeBatch(EncodeBatch(recs))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if len(recs) == 0 {
			recs = []Record{}
		}
		if !reflect.DeepEqual(got, recs) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, recs)
		}
	})
}

// TestDecodeRegisterBrokerVersion0: a registration is written in the layout
// of version 0, the only one every earlier build decodes (the data directory
// id goes in a BrokerDirectoryRecord of its own), and that layout decodes.
func TestDecodeRegisterBrokerVersion0(t *testing.T) {
	want := &RegisterBrokerRecord{BrokerID: 1, Incarnation: idB, Epoch: 7, Host: "h", Port: 9092, Rack: "r1", Fenced: true}
	body := []byte{byte(TypeRegisterBroker), 0}
	body = appendInt32(body, want.BrokerID)
	body = append(body, want.Incarnation[:]...)
	body = appendInt64(body, want.Epoch)
	body = appendString(body, want.Host)
	body = appendInt32(body, want.Port)
	body = appendString(body, want.Rack)
	body = appendBool(body, want.Fenced)
	b := append([]byte{batchMagic, batchVersion, 1, byte(len(body))}, body...)
	recs, err := DecodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || !reflect.DeepEqual(recs[0], want) {
		t.Fatalf("decoded %+v, want %+v", recs, want)
	}
	if got := EncodeBatch([]Record{want}); !bytes.Equal(got, b) {
		t.Fatalf("written as %x, want version 0's %x", got, b)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := EncodeBatch(sampleRecords())
	topic := AppendRecord(nil, &TopicRecord{Name: "t", ID: idA, Configs: map[string]string{"a": "1", "b": "2"}})
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrCorrupt},
		{"bad magic", append([]byte{0x00}, good[1:]...), ErrCorrupt},
		{"newer batch version", append([]byte{batchMagic, 2}, good[2:]...), ErrUnsupportedVersion},
		{"truncated", good[:len(good)-1], ErrCorrupt},
		{"trailing byte", append(bytes.Clone(good), 0), ErrCorrupt},
		{"huge count", []byte{batchMagic, batchVersion, 0xff, 0xff, 0xff, 0xff, 0x0f}, ErrCorrupt},
		{"non-minimal count", []byte{batchMagic, batchVersion, 0x80, 0x00}, ErrCorrupt},
		{"record too short", []byte{batchMagic, batchVersion, 1, 1, byte(TypeTopic)}, ErrCorrupt},
		{"unknown type", []byte{batchMagic, batchVersion, 1, 2, 200, 0}, ErrUnsupportedVersion},
		{"newer record version", []byte{batchMagic, batchVersion, 1, 18, byte(TypeRemoveTopic), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ErrUnsupportedVersion},
		{"register broker version 1", func() []byte {
			b := EncodeBatch([]Record{&RegisterBrokerRecord{BrokerID: 1, Host: "h", Port: 1}})
			b[5] = 1 // magic, batch version, count, length, type, version
			return b
		}(), ErrUnsupportedVersion},
		{"record body short", []byte{batchMagic, batchVersion, 1, 3, byte(TypeRemoveTopic), 0, 0}, ErrCorrupt},
		{"record body long", append([]byte{batchMagic, batchVersion, 1, 19, byte(TypeRemoveTopic), 0}, make([]byte, 17)...), ErrCorrupt},
		{"bool 2", func() []byte {
			b := EncodeBatch([]Record{&ConfigRecord{ResourceType: ResourceTopic}})
			b[len(b)-1] = 2
			return b
		}(), ErrCorrupt},
		{"unordered map keys", func() []byte {
			b := append([]byte{batchMagic, batchVersion, 1}, topic...)
			i := bytes.Index(b, []byte{1, 'a', 1, '1', 1, 'b'})
			copy(b[i:], []byte{1, 'b', 1, '1', 1, 'a'})
			return b
		}(), ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := DecodeBatch(tt.b)
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeBatch = %v, %v; want error %v", recs, err, tt.want)
			}
			if recs != nil {
				t.Fatalf("DecodeBatch returned records with error %v", err)
			}
		})
	}
	if _, err := DecodeRecord(append(AppendRecord(nil, &RemoveTopicRecord{}), 0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("DecodeRecord with a trailing byte = %v, want ErrCorrupt", err)
	}
}

// FuzzDecodeBatch checks that no input panics and that whatever decodes
// re-encodes to the same bytes (the encoding is canonical).
func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch(sampleRecords()))
	for _, rec := range sampleRecords() {
		f.Add(EncodeBatch([]Record{rec}))
	}
	f.Add(EncodeBatch(nil))
	f.Add([]byte{batchMagic, batchVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := DecodeBatch(b)
		if err != nil {
			return
		}
		if again := EncodeBatch(recs); !bytes.Equal(again, b) {
			t.Fatalf("decoded %d records that re-encode differently:\n in %x\nout %x", len(recs), b, again)
		}
		_, _ = ApplyAll(NewImage(), recs)
	})
}
