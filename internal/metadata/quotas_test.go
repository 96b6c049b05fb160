package metadata

import (
	"errors"
	"net/netip"
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

// TestIPQuotas: connection_creation_rate on IP entities (KIP-612): an address
// and the default, kept in snapshots, found in any notation of the address,
// and Kafka's refusals.
func TestIPQuotas(t *testing.T) {
	ip := func(name string) QuotaEntity { return QuotaEntity{IP: QuotaName{Set: true, Name: name}} }
	def := QuotaEntity{IP: QuotaName{Set: true, Default: true}}
	img, err := ApplyAll(NewImage(), []Record{
		QuotaRecord(ip("10.0.0.1"), QuotaConnectionCreationRate, 5, false),
		QuotaRecord(ip("0:0::1"), QuotaConnectionCreationRate, 7, false),
		QuotaRecord(def, QuotaConnectionCreationRate, 100, false),
		QuotaRecord(QuotaEntity{User: QuotaName{Set: true, Name: "alice"}}, QuotaProducerByteRate, 10, false),
	})
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]float64{"10.0.0.1": 5, "::ffff:10.0.0.1": 5, "::1": 7, "10.0.0.2": 100} {
		if v, ok := img.ConnectionCreationRate(netip.MustParseAddr(addr)); !ok || v != want {
			t.Errorf("rate of %s: %v %t, want %v", addr, v, ok, want)
		}
	}
	snap, err := DecodeSnapshot(EncodeSnapshot(img))
	if err != nil || !reflect.DeepEqual(snap.QuotaEntities(), img.QuotaEntities()) || !reflect.DeepEqual(snap.QuotaValues(def), img.QuotaValues(def)) {
		t.Fatalf("snapshot: %v %v", err, snap.QuotaEntities())
	}
	next, err := Apply(img, QuotaRecord(def, QuotaConnectionCreationRate, 0, true))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := next.ConnectionCreationRate(netip.MustParseAddr("10.0.0.2")); ok {
		t.Error("the default removed still applies")
	}
	if _, err := Apply(img, QuotaRecord(ip("10.0.0.1"), QuotaConnectionCreationRate, 2.5, false)); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("a fractional rate applied: %v", err)
	}
	for name, tc := range map[string]struct {
		e     QuotaEntity
		key   string
		value float64
	}{
		"ip with user":             {QuotaEntity{IP: def.IP, User: QuotaName{Set: true, Name: "alice"}}, QuotaConnectionCreationRate, 1},
		"ip with client id":        {QuotaEntity{IP: ip("10.0.0.1").IP, ClientID: QuotaName{Set: true, Default: true}}, QuotaConnectionCreationRate, 1},
		"not an address":           {ip("not-an-ip"), QuotaConnectionCreationRate, 1},
		"byte rate on an ip":       {ip("10.0.0.1"), QuotaProducerByteRate, 1},
		"fractional":               {ip("10.0.0.1"), QuotaConnectionCreationRate, 1.5},
		"over int32":               {def, QuotaConnectionCreationRate, 1 << 31},
		"zero":                     {def, QuotaConnectionCreationRate, 0},
		"connection rate for user": {QuotaEntity{User: QuotaName{Set: true, Name: "alice"}}, QuotaConnectionCreationRate, 1},
	} {
		if err := ValidateQuota(tc.e, tc.key, tc.value, false); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
