package controller

import "github.com/strata-stream/strata/internal/metadata"

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
// outcome (all of an entry's changes apply or none do).
func PlanAlterClientQuotas(img *metadata.Image, entries []QuotaAlteration) ([]metadata.Record, []error) {
	var recs []metadata.Record
	errs := make([]error, len(entries))
	for i, e := range entries {
		var mine []metadata.Record
		if err := metadata.ValidateQuotaEntity(e.Entity); err != nil {
			errs[i] = err
			continue
		}
		for _, op := range e.Ops {
			if err := metadata.ValidateQuota(e.Entity, op.Key, op.Value, op.Remove); err != nil {
				errs[i] = err
				break
			}
			if _, ok := img.Quota(e.Entity, op.Key); op.Remove && !ok {
				continue // removing what is not set changes nothing
			}
			mine = append(mine, metadata.QuotaRecord(e.Entity, op.Key, op.Value, op.Remove))
		}
		if errs[i] == nil {
			recs = append(recs, mine...)
		}
	}
	return recs, errs
}
