package controller

import (
	"fmt"
	"math"

	"github.com/strata-stream/strata/internal/metadata"
)

// QuotaAlteration is one AlterClientQuotas entry: value changes to one entity.
type QuotaAlteration struct {
	Entity metadata.QuotaEntity
	Ops    []QuotaOp
}

// QuotaOp sets or removes one key.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// PlanAlterClientQuotas plans each entry's records; errs[i] is entry i's
// outcome (all of an entry's changes apply or none do). As Kafka's
// controller, it refuses (INVALID_REQUEST) a key given twice in one entry,
// an entity given again in a later entry, and a fractional or too large value
// of a byte rate (a whole number of bytes in Kafka's quota configs); removing
// a key that is not set is a no-op, whatever the key.
func PlanAlterClientQuotas(img *metadata.Image, entries []QuotaAlteration) ([]metadata.Record, []error) {
	var recs []metadata.Record
	errs := make([]error, len(entries))
	seen := map[metadata.QuotaEntity]bool{}
	for i, e := range entries {
		var mine []metadata.Record
		if err := metadata.ValidateQuotaEntity(e.Entity); err != nil {
			errs[i] = err
			continue
		}
		if seen[e.Entity] {
			errs[i] = fmt.Errorf("%w: ignoring an entity given twice", metadata.ErrInvalidRequest)
			continue
		}
		seen[e.Entity] = true
		keys := map[string]bool{}
		for _, op := range e.Ops {
			if keys[op.Key] {
				errs[i] = fmt.Errorf("%w: duplicate quota key %s, not updating this entity's quotas", metadata.ErrInvalidRequest, op.Key)
				break
			}
			keys[op.Key] = true
			if op.Remove {
				// As Kafka's controller, the key of a removal is not checked:
				// only a key that is set (so valid) has anything to remove.
				if _, ok := img.Quota(e.Entity, op.Key); ok {
					mine = append(mine, metadata.QuotaRecord(e.Entity, op.Key, 0, true))
				}
				continue
			}
			if err := metadata.ValidateQuota(e.Entity, op.Key, op.Value, false); err != nil {
				errs[i] = err
				break
			}
			if err := validateByteRate(op); err != nil {
				errs[i] = err
				break
			}
			mine = append(mine, metadata.QuotaRecord(e.Entity, op.Key, op.Value, false))
		}
		if errs[i] == nil {
			recs = append(recs, mine...)
		}
	}
	return recs, errs
}

// validateByteRate refuses what Kafka's LONG-typed byte-rate quotas refuse: a
// fractional value, or one past the largest long.
func validateByteRate(op QuotaOp) error {
	if op.Key != metadata.QuotaProducerByteRate && op.Key != metadata.QuotaConsumerByteRate {
		return nil
	}
	if op.Value >= math.MaxInt64 {
		return fmt.Errorf("%w: proposed value for %s is too large for a LONG", metadata.ErrInvalidRequest, op.Key)
	}
	if math.Abs(math.Mod(op.Value, 1)) > 1e-6 {
		return fmt.Errorf("%w: %s cannot be a fractional value", metadata.ErrInvalidRequest, op.Key)
	}
	return nil
}
