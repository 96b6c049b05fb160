package metadata

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
)

// QuotaName is one part of a client quota entity: absent (Set false), a name, or
// the default for that part (Default true; Kafka's null name).
type QuotaName struct {
	Set     bool
	Default bool
	Name    string
}

// QuotaEntity is what a client quota applies to: a user, a client id, or a user
// and a client id (Kafka's /users/U/clients/C).
type QuotaEntity struct {
	User     QuotaName
	ClientID QuotaName
}

// The quota keys Strata enforces.
const (
	QuotaProducerByteRate = "producer_byte_rate"
	QuotaConsumerByteRate = "consumer_byte_rate"
	// QuotaControllerMutationRate is partitions created or deleted per second
	// (KIP-599).
	QuotaControllerMutationRate = "controller_mutation_rate"
	// QuotaRequestPercentage is the share of one request-handling thread a
	// client may use, in percent per second (KIP-124).
	QuotaRequestPercentage = "request_percentage"
)

// ClientQuotaRecord sets (or with Remove deletes) one quota value of an entity.
type ClientQuotaRecord struct {
	Entity QuotaEntity
	Key    string
	Value  float64
	Remove bool
}

func (*ClientQuotaRecord) Type() RecordType { return TypeClientQuota }

func appendQuotaName(b []byte, n QuotaName) []byte {
	b = appendBool(b, n.Set)
	b = appendBool(b, n.Default)
	return appendString(b, n.Name)
}

func readQuotaName(rd *reader) QuotaName {
	return QuotaName{Set: rd.bool(), Default: rd.bool(), Name: rd.string()}
}

func (r *ClientQuotaRecord) appendBody(b []byte) []byte {
	b = appendQuotaName(b, r.Entity.User)
	b = appendQuotaName(b, r.Entity.ClientID)
	b = appendString(b, r.Key)
	b = appendInt64(b, int64(math.Float64bits(r.Value)))
	return appendBool(b, r.Remove)
}

func (r *ClientQuotaRecord) readBody(rd *reader) {
	r.Entity.User = readQuotaName(rd)
	r.Entity.ClientID = readQuotaName(rd)
	r.Key = rd.string()
	r.Value = math.Float64frombits(uint64(rd.int64()))
	r.Remove = rd.bool()
}

// ValidateQuota checks an entity and a key's value: a user and/or a client id
// (named or default, a default with no name), a known key, a positive value.
func ValidateQuota(e QuotaEntity, key string, value float64, remove bool) error {
	if !e.User.Set && !e.ClientID.Set {
		return fmt.Errorf("%w: a quota entity needs a user or a client id", ErrInvalidRequest)
	}
	for _, n := range []QuotaName{e.User, e.ClientID} {
		if n.Set && n.Default == (n.Name != "") {
			return fmt.Errorf("%w: an entity part is either named or the default", ErrInvalidRequest)
		}
	}
	switch key {
	case QuotaProducerByteRate, QuotaConsumerByteRate, QuotaControllerMutationRate, QuotaRequestPercentage:
	default:
		return fmt.Errorf("%w: quota key %q (supported: %s, %s, %s, %s)", ErrInvalidRequest, key,
			QuotaProducerByteRate, QuotaConsumerByteRate, QuotaControllerMutationRate, QuotaRequestPercentage)
	}
	if !remove && (value <= 0 || math.IsInf(value, 0) || math.IsNaN(value)) {
		return fmt.Errorf("%w: quota %s must be a positive number, got %v", ErrInvalidRequest, key, value)
	}
	return nil
}

func (b *builder) clientQuota(r *ClientQuotaRecord) error {
	if err := ValidateQuota(r.Entity, r.Key, r.Value, r.Remove); err != nil {
		return err
	}
	if !b.ownQuotas {
		b.img.quotas = cloneOrMake(b.img.quotas)
		b.ownQuotas = true
	}
	values := maps.Clone(b.img.quotas[r.Entity])
	if r.Remove {
		delete(values, r.Key)
	} else {
		if values == nil {
			values = map[string]float64{}
		}
		values[r.Key] = r.Value
	}
	if len(values) == 0 {
		delete(b.img.quotas, r.Entity)
	} else {
		b.img.quotas[r.Entity] = values
	}
	return nil
}

// Quota returns the entity's value for key.
func (img *Image) Quota(e QuotaEntity, key string) (float64, bool) {
	v, ok := img.quotas[e][key]
	return v, ok
}

// QuotaEntities returns every entity with a quota, in a stable order.
func (img *Image) QuotaEntities() []QuotaEntity {
	return slices.SortedFunc(maps.Keys(img.quotas), func(a, b QuotaEntity) int {
		return cmp.Or(compareQuotaName(a.User, b.User), compareQuotaName(a.ClientID, b.ClientID))
	})
}

// QuotaValues returns the entity's quota values by key.
func (img *Image) QuotaValues(e QuotaEntity) map[string]float64 { return img.quotas[e] }

func compareQuotaName(a, b QuotaName) int {
	if a.Set != b.Set {
		return cmp.Compare(boolInt(a.Set), boolInt(b.Set))
	}
	if a.Default != b.Default {
		return cmp.Compare(boolInt(a.Default), boolInt(b.Default))
	}
	return cmp.Compare(a.Name, b.Name)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (img *Image) quotaRecords() []Record {
	var recs []Record
	for _, e := range img.QuotaEntities() {
		values := img.quotas[e]
		for _, k := range slices.Sorted(maps.Keys(values)) {
			recs = append(recs, &ClientQuotaRecord{Entity: e, Key: k, Value: values[k]})
		}
	}
	return recs
}
