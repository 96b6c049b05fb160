package metadata

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"net/netip"
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
// and a client id (Kafka's /users/U/clients/C); or a client IP address (KIP-612),
// never combined with the others.
type QuotaEntity struct {
	User     QuotaName
	ClientID QuotaName
	IP       QuotaName
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
	// QuotaConnectionCreationRate is connections accepted per second from one
	// IP address (KIP-612): the only key of an IP entity, and a whole number.
	QuotaConnectionCreationRate = "connection_creation_rate"
)

// ClientQuotaRecord sets (or with Remove deletes) one quota value of an entity.
type ClientQuotaRecord struct {
	Entity QuotaEntity
	Key    string
	Value  float64
	Remove bool
}

func (*ClientQuotaRecord) Type() RecordType { return TypeClientQuota }

// IPQuotaRecord sets (or with Remove deletes) one quota value of an IP entity:
// the entity QuotaEntity{IP: IP}. (ClientQuotaRecord's encoding has no room for
// an IP, so IP entities have their own record type.)
type IPQuotaRecord struct {
	IP     QuotaName
	Key    string
	Value  float64
	Remove bool
}

func (*IPQuotaRecord) Type() RecordType { return TypeIPQuota }

// QuotaRecord is the record that sets (or with remove deletes) key on e:
// an IPQuotaRecord for an IP entity, else a ClientQuotaRecord.
func QuotaRecord(e QuotaEntity, key string, value float64, remove bool) Record {
	if e.IP.Set {
		return &IPQuotaRecord{IP: e.IP, Key: key, Value: value, Remove: remove}
	}
	return &ClientQuotaRecord{Entity: e, Key: key, Value: value, Remove: remove}
}

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

func (r *IPQuotaRecord) appendBody(b []byte) []byte {
	b = appendQuotaName(b, r.IP)
	b = appendString(b, r.Key)
	b = appendInt64(b, int64(math.Float64bits(r.Value)))
	return appendBool(b, r.Remove)
}

func (r *IPQuotaRecord) readBody(rd *reader) {
	r.IP = readQuotaName(rd)
	r.Key = rd.string()
	r.Value = math.Float64frombits(uint64(rd.int64()))
	r.Remove = rd.bool()
}

// ValidateQuota checks an entity and a key's value as Kafka's controller does:
// a user and/or a client id, or an IP address alone (each part named or the
// default, a default with no name); unless the key is removed (Kafka checks
// only the keys it sets), a key the entity takes (IP entities take
// connection_creation_rate only, which the others do not take) and a positive
// value, a whole number within int32 for connection_creation_rate.
func ValidateQuota(e QuotaEntity, key string, value float64, remove bool) error {
	if err := ValidateQuotaEntity(e); err != nil {
		return err
	}
	if remove {
		return nil
	}
	switch {
	case e.IP.Set && key != QuotaConnectionCreationRate:
		return fmt.Errorf("%w: invalid configuration key %s for an ip entity (supported: %s)", ErrInvalidRequest, key, QuotaConnectionCreationRate)
	case e.IP.Set:
	case key == QuotaProducerByteRate, key == QuotaConsumerByteRate, key == QuotaControllerMutationRate, key == QuotaRequestPercentage:
	default:
		return fmt.Errorf("%w: invalid configuration key %s (supported: %s, %s, %s, %s; %s for ip entities)", ErrInvalidRequest, key,
			QuotaProducerByteRate, QuotaConsumerByteRate, QuotaControllerMutationRate, QuotaRequestPercentage, QuotaConnectionCreationRate)
	}
	if value <= 0 || math.IsInf(value, 0) || math.IsNaN(value) {
		return fmt.Errorf("%w: quota %s must be a positive number, got %v", ErrInvalidRequest, key, value)
	}
	if key == QuotaConnectionCreationRate {
		if value > math.MaxInt32 {
			return fmt.Errorf("%w: proposed value for %s is too large for an INT", ErrInvalidRequest, key)
		}
		if math.Abs(math.Mod(value, 1)) > 1e-6 {
			return fmt.Errorf("%w: %s cannot be a fractional value", ErrInvalidRequest, key)
		}
	}
	return nil
}

// ValidateQuotaEntity checks an entity: a user and/or a client id, or an IP
// address alone, each part named or the default (a default has no name).
func ValidateQuotaEntity(e QuotaEntity) error {
	if !e.User.Set && !e.ClientID.Set && !e.IP.Set {
		return fmt.Errorf("%w: a quota entity needs a user, a client id or an ip", ErrInvalidRequest)
	}
	if e.IP.Set && (e.User.Set || e.ClientID.Set) {
		return fmt.Errorf("%w: invalid quota entity combination: an ip entity is not combined with a user or a client id", ErrInvalidRequest)
	}
	for _, n := range []QuotaName{e.User, e.ClientID, e.IP} {
		if n.Set && n.Default == (n.Name != "") {
			return fmt.Errorf("%w: an entity part is either named or the default", ErrInvalidRequest)
		}
	}
	if e.IP.Set && !e.IP.Default {
		if _, err := netip.ParseAddr(e.IP.Name); err != nil {
			return fmt.Errorf("%w: %s is not a valid IP address", ErrInvalidRequest, e.IP.Name)
		}
	}
	return nil
}

func (b *builder) clientQuota(r *ClientQuotaRecord) error {
	if r.Entity.IP.Set { // unreachable from a decoded record: its encoding has no ip
		return fmt.Errorf("%w: an ip entity travels in an IPQuotaRecord", ErrInvalidRequest)
	}
	return b.setQuota(r.Entity, r.Key, r.Value, r.Remove)
}

func (b *builder) ipQuota(r *IPQuotaRecord) error {
	if !r.IP.Set {
		return fmt.Errorf("%w: an ip quota record without an ip", ErrInvalidRequest)
	}
	return b.setQuota(QuotaEntity{IP: r.IP}, r.Key, r.Value, r.Remove)
}

func (b *builder) setQuota(e QuotaEntity, key string, value float64, remove bool) error {
	if err := ValidateQuota(e, key, value, remove); err != nil {
		return err
	}
	if !b.ownQuotas {
		b.img.quotas = cloneOrMake(b.img.quotas)
		b.ownQuotas = true
	}
	values := maps.Clone(b.img.quotas[e])
	if remove {
		delete(values, key)
	} else {
		if values == nil {
			values = map[string]float64{}
		}
		values[key] = value
	}
	if len(values) == 0 {
		delete(b.img.quotas, e)
	} else {
		b.img.quotas[e] = values
	}
	return nil
}

// HasQuotas reports whether any entity has a quota: without one, every request
// skips the lookups of Quota.
func (img *Image) HasQuotas() bool { return len(img.quotas) > 0 }

// Quota returns the entity's value for key.
func (img *Image) Quota(e QuotaEntity, key string) (float64, bool) {
	v, ok := img.quotas[e][key]
	return v, ok
}

// QuotaEntities returns every entity with a quota, in a stable order.
func (img *Image) QuotaEntities() []QuotaEntity {
	return slices.SortedFunc(maps.Keys(img.quotas), func(a, b QuotaEntity) int {
		return cmp.Or(compareQuotaName(a.User, b.User), compareQuotaName(a.ClientID, b.ClientID), compareQuotaName(a.IP, b.IP))
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
			recs = append(recs, QuotaRecord(e, k, values[k], false))
		}
	}
	return recs
}

// ConnectionCreationRate returns the connection_creation_rate quota of the
// client IP address ip: the one set on that address (named in any notation of
// it), else the default IP entity's.
func (img *Image) ConnectionCreationRate(ip netip.Addr) (float64, bool) {
	ip = ip.Unmap()
	if v, ok := img.quotas[QuotaEntity{IP: QuotaName{Set: true, Name: ip.String()}}][QuotaConnectionCreationRate]; ok {
		return v, true
	}
	for e, values := range img.quotas { // a name in another notation (IPv6 zeros, IPv4-mapped)
		if v, ok := values[QuotaConnectionCreationRate]; ok && e.IP.Set && !e.IP.Default {
			if a, err := netip.ParseAddr(e.IP.Name); err == nil && a.Unmap() == ip {
				return v, true
			}
		}
	}
	v, ok := img.quotas[QuotaEntity{IP: QuotaName{Set: true, Default: true}}][QuotaConnectionCreationRate]
	return v, ok
}
