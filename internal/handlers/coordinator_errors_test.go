package handlers

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
)

// allowAnonymous is an authorizer that lets User:ANONYMOUS do what rules
// name, as (operation, resource type, resource name) triples, and nothing
// else.
func allowAnonymous(rules ...any) func() *acl.Authorizer {
	var bindings []acl.Binding
	for i := 0; i < len(rules); i += 3 {
		bindings = append(bindings, acl.Binding{
			ResourceType: rules[i+1].(kmsg.ACLResourceType), ResourceName: rules[i+2].(string),
			PatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:ANONYMOUS", Host: acl.WildcardHost,
			Operation: rules[i].(kmsg.ACLOperation), Permission: kmsg.ACLPermissionTypeAllow,
		})
	}
	a := acl.New(acl.Config{}, bindings)
	return func() *acl.Authorizer { return a }
}

// TestFindCoordinatorErrors: FindCoordinator v3 (one key) and v4 (several)
// check DESCRIBE on the group or on the transactional id, as Kafka does,
// answer an unknown key type INVALID_REQUEST, and a transaction coordinator
// on a broker without one COORDINATOR_NOT_AVAILABLE.
func TestFindCoordinatorErrors(t *testing.T) {
	describe := kmsg.ACLOperationDescribe
	h := newErrorsHandlersWith(t, Config{Authorizer: allowAnonymous(describe, resGroup, "g-ok", describe, resTxnID, "tx-ok")})
	for _, tc := range []struct {
		name    string
		keyType int8
		key     string
		want    *kerr.Error
		node    int32
	}{
		{"group allowed", 0, "g-ok", nil, 1},
		{"group denied", 0, "g-no", kerr.GroupAuthorizationFailed, -1},
		{"transactional id denied", 1, "tx-no", kerr.TransactionalIDAuthorizationFailed, -1},
		{"no transaction coordinator", 1, "tx-ok", kerr.CoordinatorNotAvailable, -1},
		{"unknown key type", 5, "g-ok", kerr.InvalidRequest, -1},
	} {
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(3)
		req.CoordinatorType, req.CoordinatorKey = tc.keyType, tc.key
		resp := serve(t, h, req).(*kmsg.FindCoordinatorResponse)
		if resp.ErrorCode != want || resp.NodeID != tc.node {
			t.Errorf("v3 %s: %v at node %d, want %v at node %d", tc.name, kerr.ErrorForCode(resp.ErrorCode), resp.NodeID, kerr.ErrorForCode(want), tc.node)
		}
		req = kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(4)
		req.CoordinatorType, req.CoordinatorKeys = tc.keyType, []string{tc.key, tc.key + "-other"}
		resp = serve(t, h, req).(*kmsg.FindCoordinatorResponse)
		if len(resp.Coordinators) != 2 {
			t.Fatalf("v4 %s: %d coordinators for 2 keys", tc.name, len(resp.Coordinators))
		}
		if c := resp.Coordinators[0]; c.Key != tc.key || c.ErrorCode != want || c.NodeID != tc.node {
			t.Errorf("v4 %s: %s %v at node %d, want %s %v at node %d", tc.name, c.Key, kerr.ErrorForCode(c.ErrorCode), c.NodeID, tc.key, kerr.ErrorForCode(want), tc.node)
		}
	}
}
