package controller

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/metadata"
)

func TestPlanAcls(t *testing.T) {
	bind := func(name string, op kmsg.ACLOperation) acl.Binding {
		return acl.Binding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: name, PatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:alice", Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
	}
	bad := bind("x", kmsg.ACLOperationRead)
	bad.PatternType = kmsg.ACLResourcePatternTypeMatch
	recs, errs := PlanCreateAcls(metadata.NewImage(), []acl.Binding{bind("a", kmsg.ACLOperationRead), bind("a", kmsg.ACLOperationRead), bad, bind("b", kmsg.ACLOperationWrite)})
	if len(recs) != 2 || errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], metadata.ErrInvalidRequest) || errs[3] != nil {
		t.Fatalf("create: %d records, errors %v", len(recs), errs)
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if recs, errs := PlanCreateAcls(img, []acl.Binding{bind("a", kmsg.ACLOperationRead)}); len(recs) != 0 || errs[0] != nil {
		t.Fatalf("re-creating an ACL: %d records, %v", len(recs), errs)
	}
	name := "a"
	byName := acl.Filter{ResourceType: kmsg.ACLResourceTypeAny, ResourceName: &name, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	everything := byName
	everything.ResourceName = nil
	invalid := byName
	invalid.Operation = kmsg.ACLOperationUnknown
	recs, results := PlanDeleteAcls(img, []acl.Filter{byName, everything, invalid})
	if len(recs) != 2 || len(results[0].Matched) != 1 || len(results[1].Matched) != 2 || !errors.Is(results[2].Err, metadata.ErrInvalidRequest) {
		t.Fatalf("delete: %d records, results %+v", len(recs), results)
	}
	if _, err := metadata.ApplyAll(img, recs); err != nil {
		t.Fatalf("planned deletions do not apply: %v", err)
	}
}
