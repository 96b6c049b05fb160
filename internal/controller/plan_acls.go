package controller

import (
	"fmt"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/metadata"
)

// PlanCreateAcls plans records adding bindings; errs[i] is the outcome of
// bindings[i] (INVALID_REQUEST for a binding that cannot be stored). A binding
// that exists already, or twice in the request, succeeds without a record.
func PlanCreateAcls(img *metadata.Image, bindings []acl.Binding) ([]metadata.Record, []error) {
	var recs []metadata.Record
	errs := make([]error, len(bindings))
	added := map[acl.Binding]bool{}
	for i, b := range bindings {
		if err := b.Validate(); err != nil {
			errs[i] = fmt.Errorf("%w: %v", metadata.ErrInvalidRequest, err)
			continue
		}
		if img.HasACL(b) || added[b] {
			continue
		}
		added[b] = true
		recs = append(recs, &metadata.AclRecord{Binding: b})
	}
	return recs, errs
}

// AclDeletion is the outcome of one DeleteAcls filter: the bindings it matched
// (each deleted once, even when several filters match it), or an error.
type AclDeletion struct {
	Matched []acl.Binding
	Err     error
}

// PlanDeleteAcls plans records removing every binding a filter matches.
func PlanDeleteAcls(img *metadata.Image, filters []acl.Filter) ([]metadata.Record, []AclDeletion) {
	var recs []metadata.Record
	results := make([]AclDeletion, len(filters))
	deleted := map[acl.Binding]bool{}
	all := img.ACLs()
	for i, f := range filters {
		if err := f.Validate(); err != nil {
			results[i].Err = fmt.Errorf("%w: %v", metadata.ErrInvalidRequest, err)
			continue
		}
		for _, b := range all {
			if !f.Matches(b) {
				continue
			}
			results[i].Matched = append(results[i].Matched, b)
			if !deleted[b] {
				deleted[b] = true
				recs = append(recs, &metadata.AclRecord{Binding: b, Delete: true})
			}
		}
	}
	return recs, results
}
