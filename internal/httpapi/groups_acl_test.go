package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/httpapi"
	"github.com/strata-stream/strata/internal/httpauth"
)

// TestDescribeGroupListsOnlyDescribableTopics: GET /groups/{group} shows the
// offsets and lag of the topics the caller may DESCRIBE only, as Kafka's
// OffsetFetch answers them; it showed every topic the group committed to
// anyone allowed to DESCRIBE the group.
func TestDescribeGroupListsOnlyDescribableTopics(t *testing.T) {
	n := sharedNode(t)
	n.createTopic("lagacl-seen", 1)
	n.createTopic("lagacl-secret", 1)
	n.must(http.StatusOK, "POST", "/topics/lagacl-secret/records", map[string]any{"records": []any{map[string]any{"value": 1}}})
	_, adm := n.kafka()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var o kadm.Offsets
	o.Add(kadm.Offset{Topic: "lagacl-seen", Partition: 0, At: 0, LeaderEpoch: -1})
	o.Add(kadm.Offset{Topic: "lagacl-secret", Partition: 0, At: 0, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "lagacl-g", o); err != nil {
		t.Fatal(err)
	}
	allow := func(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) acl.Binding {
		return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:ANONYMOUS", Host: acl.WildcardHost, Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
	}
	group := allow(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, "lagacl-g")
	seen := allow(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, "lagacl-seen")
	for _, tc := range []struct {
		name   string
		acls   []acl.Binding
		topics []string
		lag    int64
	}{
		{"one topic", []acl.Binding{group, seen}, []string{"lagacl-seen"}, 0},
		{"READ implies DESCRIBE", []acl.Binding{group, seen, allow(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "lagacl-secret")},
			[]string{"lagacl-secret", "lagacl-seen"}, 1},
		{"no topic", []acl.Binding{group}, []string{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			authz := acl.New(acl.Config{}, tc.acls)
			a, err := httpapi.New(httpapi.Config{KafkaAddr: n.KafkaAddr(), Cluster: n.ConsoleConfig().Cluster, Logger: testLogger(),
				Guard: httpauth.New(httpauth.Config{Authorizer: func() *acl.Authorizer { return authz }})})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close(context.Background())
			mux := http.NewServeMux()
			a.Register(mux)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/groups/lagacl-g")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got struct {
				Offsets []struct{ Topic string }
				Lag     int64
			}
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /groups/lagacl-g: %d, %v", resp.StatusCode, err)
			}
			topics := []string{}
			for _, o := range got.Offsets {
				topics = append(topics, o.Topic)
			}
			if !slices.Equal(topics, tc.topics) || got.Lag != tc.lag {
				t.Fatalf("offsets of topics %q, lag %d; want %q, lag %d", topics, got.Lag, tc.topics, tc.lag)
			}
		})
	}
}
