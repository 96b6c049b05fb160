package metadata

import (
	"errors"
	"reflect"
	"testing"
)

func TestClientQuotas(t *testing.T) {
	alice := QuotaEntity{User: QuotaName{Set: true, Name: "alice"}}
	defaults := QuotaEntity{User: QuotaName{Set: true, Default: true}, ClientID: QuotaName{Set: true, Default: true}}
	img, err := ApplyAll(NewImage(), []Record{
		&ClientQuotaRecord{Entity: alice, Key: QuotaProducerByteRate, Value: 100},
		&ClientQuotaRecord{Entity: alice, Key: QuotaConsumerByteRate, Value: 200},
		&ClientQuotaRecord{Entity: defaults, Key: QuotaProducerByteRate, Value: 50},
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := img.Quota(alice, QuotaConsumerByteRate); !ok || v != 200 {
		t.Fatalf("alice consumer quota %v %t", v, ok)
	}
	snap, err := DecodeSnapshot(EncodeSnapshot(img))
	if err != nil || !reflect.DeepEqual(snap.QuotaEntities(), img.QuotaEntities()) || !reflect.DeepEqual(snap.QuotaValues(alice), img.QuotaValues(alice)) {
		t.Fatalf("snapshot: %v", err)
	}
	next, err := ApplyAll(img, []Record{
		&ClientQuotaRecord{Entity: alice, Key: QuotaProducerByteRate, Remove: true},
		&ClientQuotaRecord{Entity: alice, Key: QuotaConsumerByteRate, Remove: true},
	})
	if err != nil || len(next.QuotaEntities()) != 1 || len(img.QuotaEntities()) != 2 {
		t.Fatalf("remove: %v, %v", err, next.QuotaEntities())
	}
	for name, rec := range map[string]*ClientQuotaRecord{
		"no entity":     {Key: QuotaProducerByteRate, Value: 1},
		"named default": {Entity: QuotaEntity{User: QuotaName{Set: true, Default: true, Name: "x"}}, Key: QuotaProducerByteRate, Value: 1},
		"unknown key":   {Entity: alice, Key: "connection_creation_rate", Value: 1},
		"zero":          {Entity: alice, Key: QuotaProducerByteRate, Value: 0},
	} {
		if _, err := Apply(img, rec); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
