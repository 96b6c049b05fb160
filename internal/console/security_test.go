package console_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/console"
	"github.com/strata-stream/strata/internal/httpauth"
	"github.com/strata-stream/strata/internal/metadata"
)

// anonymousGuard is a guard without SASL whose ACLs are bindings: every request
// is User:ANONYMOUS's.
func anonymousGuard(bindings ...acl.Binding) *httpauth.Guard {
	authz := acl.New(acl.Config{}, bindings)
	return httpauth.New(httpauth.Config{Authorizer: func() *acl.Authorizer { return authz }})
}

func anonymousACL(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string, perm kmsg.ACLPermissionType) acl.Binding {
	return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:ANONYMOUS", Host: acl.WildcardHost, Operation: op, Permission: perm}
}

// TestCreateTopicDenyACL: a DENY on CREATE of one topic holds against the
// form, whatever spaces surround the name. The name was authorized as typed
// and created trimmed, so " secret" passed a wildcard ALLOW and created
// "secret".
func TestCreateTopicDenyACL(t *testing.T) {
	ctrl := &changingController{calls: 2} // creates at the next request
	ctrl.img.Store(metadata.NewImage().WithOffset(1))
	c := console.New(console.Config{NodeID: 1, Cluster: ctrl, Controller: ctrl, Replicas: appliedReplicas{}, Logger: testLogger(),
		Guard: anonymousGuard(
			anonymousACL(kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, acl.WildcardResource, kmsg.ACLPermissionTypeAllow),
			anonymousACL(kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, "secret", kmsg.ACLPermissionTypeDeny))})
	for _, name := range []string{"secret", " secret", "secret\t"} {
		form := url.Values{"name": {name}, "partitions": {"1"}, "replication_factor": {"1"}}
		req := httptest.NewRequest(http.MethodPost, "/console/topics", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		c.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden || ctrl.calls != 2 {
			t.Fatalf("name %q: answered %d after %d controller requests, want %d and none", name, rec.Code, ctrl.calls-2, http.StatusForbidden)
		}
	}
}

// TestGroupPageListsOnlyDescribableTopics: the group page's reset form offers
// the group's topics and the others the principal may DESCRIBE; it listed
// every topic of the cluster to anyone who could see the group.
func TestGroupPageListsOnlyDescribableTopics(t *testing.T) {
	n, adm, ctx := nodeWithJobs(t)
	for _, topic := range []string{"visible", "secret"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	var o kadm.Offsets
	o.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 0, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "g", o); err != nil {
		t.Fatal(err)
	}
	cfg := n.ConsoleConfig()
	cfg.Guard = anonymousGuard(
		anonymousACL(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, "g", kmsg.ACLPermissionTypeAllow),
		anonymousACL(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "jobs", kmsg.ACLPermissionTypeAllow),
		anonymousACL(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, "visible", kmsg.ACLPermissionTypeAllow))
	srv := httptest.NewServer(console.New(cfg).Handler())
	defer srv.Close()
	status, body := get(t, srv.URL+"/console/groups/g")
	if status != http.StatusOK {
		t.Fatalf("group page: %d:\n%s", status, body)
	}
	mustContain(t, "group page", body, "<option selected>jobs</option>", "<option >visible</option>")
	if strings.Contains(body, "secret") {
		t.Fatalf("the group page names topic secret, which the principal may not describe:\n%s", body)
	}
}

// TestGroupLagListsOnlyDescribableTopics: the group page's lag rows, its lag
// JSON and the groups list's partitions and lag cover the topics the principal
// may DESCRIBE only, as Kafka's OffsetFetch answers them; they showed every
// topic the group committed to anyone allowed to see the group.
func TestGroupLagListsOnlyDescribableTopics(t *testing.T) {
	n, adm, ctx := nodeWithJobs(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "secret"); err != nil {
		t.Fatal(err)
	}
	cl, _ := client(t, n)
	produce(t, cl, "secret", 0, "s", 3)
	var o kadm.Offsets
	o.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 0, LeaderEpoch: -1})
	o.Add(kadm.Offset{Topic: "secret", Partition: 0, At: 0, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "g", o); err != nil {
		t.Fatal(err)
	}
	cfg := n.ConsoleConfig()
	cfg.Guard = anonymousGuard(
		anonymousACL(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, acl.ClusterName, kmsg.ACLPermissionTypeAllow),
		anonymousACL(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, "g", kmsg.ACLPermissionTypeAllow),
		anonymousACL(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, "jobs", kmsg.ACLPermissionTypeAllow))
	srv := httptest.NewServer(console.New(cfg).Handler())
	defer srv.Close()
	status, body := get(t, srv.URL+"/console/groups/g")
	if status != http.StatusOK || strings.Contains(body, "secret") {
		t.Fatalf("group page: %d, names topic secret, which the principal may not describe:\n%s", status, body)
	}
	mustContain(t, "group page", body, `<span class="value" id="total-lag">0</span>`)
	status, body = get(t, srv.URL+"/console/api/groups/g/lag")
	if status != http.StatusOK || strings.Contains(body, "secret") || !strings.Contains(body, `"total":0`) {
		t.Fatalf("lag JSON: %d, want only topic jobs and total 0:\n%s", status, body)
	}
	status, body = get(t, srv.URL+"/console/groups")
	if status != http.StatusOK {
		t.Fatalf("groups list: %d:\n%s", status, body)
	}
	row := body[strings.Index(body, `<tr data-group="g">`):]
	row = row[:strings.Index(row, "</tr>")]
	mustContain(t, "groups list row", row, `<td class="num">1</td>`, `data-field="lag">0<`)
}

// TestPagesRefuseFraming: every answer forbids other sites to frame it (else a
// page could overlay the reset-offsets button and have a user click it: a
// same-origin post that cross-origin protection lets through) and to sniff
// its type.
func TestPagesRefuseFraming(t *testing.T) {
	c := imageConsole(t, "orders", 1)
	for _, path := range []string{"/console/", "/console/topics/orders", "/console/new-topic", "/console/groups/g",
		"/console/api/topics/orders", "/console/static/console.js", "/console/nowhere"} {
		h := serve(c, path).Header()
		if h.Get("X-Frame-Options") != "DENY" || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
			h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v, want framing and sniffing refused", path, h)
		}
	}
}
