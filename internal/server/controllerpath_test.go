package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/sasl"
	"github.com/strata-stream/strata/internal/wait"
)

// TestAdminFromAnyNode: every admin operation works from a node that is not
// the active controller, a combined voter that does not lead and a broker-only
// node, through the node's one path to the controller: the console's topic
// form (which answered 503 on such nodes before), the HTTP API's topic
// routes, and Kafka admin requests sent to that node itself: configs, ACLs,
// SCRAM users, partitions, reassignments, the quorum, and DeleteTopics v5
// (whose topic names were lost when the link re-sent it at v6).
func TestAdminFromAnyNode(t *testing.T) {
	c := startCluster(t, 3, func(_ int, cfg *config.Config) {
		cfg.Authorizer, cfg.AllowEveryoneIfNoACL = "acl", true
	})
	broker, err := c.addNode(4, brokerOnly)
	if err != nil {
		t.Fatal(err)
	}
	_, adm := c.client()
	wait.For(t, "four live brokers in Metadata", func() bool {
		md, err := adm.Metadata(context.Background())
		return err == nil && len(md.Brokers) == 4
	})
	var follower *Node
	wait.For(t, "an active controller among the voters", func() bool {
		for i, n := range c.nodes[:3] {
			if n.ctrl.IsLeader() {
				follower = c.nodes[(i+1)%3]
				return true
			}
		}
		return false
	})
	for _, n := range []*Node{follower, broker} {
		t.Run(fmt.Sprintf("node %d", n.cfg.NodeID), func(t *testing.T) {
			if n.ctrl.IsLeader() {
				t.Logf("node %d has become the active controller meanwhile", n.cfg.NodeID)
			}
			adminThrough(t, n)
		})
	}
}

// adminThrough runs every admin operation through node n alone and checks
// each took effect in n's own metadata image.
func adminThrough(t *testing.T, n *Node) {
	ctx := context.Background()
	id := n.cfg.NodeID
	base := "http://" + n.HTTPAddr()
	img := func() *metadata.Image { return n.ctrl.Image() }

	// The console's form.
	name := fmt.Sprintf("console-%d", id)
	form := url.Values{"name": {name}, "partitions": {"2"}, "replication_factor": {"2"}, "configs": {"retention.ms=3600000"}}
	status, loc, body := httpDo(t, http.MethodPost, base+"/console/topics", "application/x-www-form-urlencoded", form.Encode())
	if status != http.StatusSeeOther || loc != "/console/topics/"+name+"?created=1" {
		t.Fatalf("console create topic: %d to %q\n%s", status, loc, body)
	}
	if tp := img().Topic(name); tp == nil || len(tp.Partitions) != 2 || tp.Overrides["retention.ms"] != "3600000" {
		t.Fatalf("after the console answered, node %d's image has topic %s as %+v", id, name, tp)
	}
	if status, _, body := httpDo(t, http.MethodPost, base+"/console/topics", "application/x-www-form-urlencoded", form.Encode()); status != http.StatusConflict {
		t.Fatalf("console create of an existing topic: %d, want 409\n%s", status, body)
	}

	// The HTTP API's topic routes.
	httpTopic := fmt.Sprintf("http-%d", id)
	if status, _, body := httpDo(t, http.MethodPost, base+"/topics", "application/json", fmt.Sprintf(`{"topic":%q,"partitions":1,"replication_factor":2}`, httpTopic)); status != http.StatusCreated {
		t.Fatalf("POST /topics: %d\n%s", status, body)
	}
	if status, _, body := httpDo(t, http.MethodDelete, base+"/topics/"+httpTopic, "", ""); status != http.StatusOK {
		t.Fatalf("DELETE /topics/%s: %d\n%s", httpTopic, status, body)
	}
	wait.For(t, "node's image to drop "+httpTopic, func() bool { return img().Topic(httpTopic) == nil })

	// Kafka admin requests sent to n alone. DeleteTopics goes at v5, with
	// topic names (v6 names topics differently).
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.DeleteTopics.Int16(), 5)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.MaxVersions(versions))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	self := cl.Broker(int(id))
	request := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := self.Request(ctx, req)
		if err != nil {
			t.Fatalf("%s to node %d: %v", kmsg.NameForKey(req.Key()), id, err)
		}
		return resp
	}
	ok := func(what string, code int16) {
		t.Helper()
		if err := kerr.ErrorForCode(code); err != nil {
			t.Fatalf("%s through node %d: %v", what, id, err)
		}
	}

	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, name
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("7200000")
	res.Configs = append(res.Configs, cfg)
	alter.Resources = append(alter.Resources, res)
	for _, r := range request(alter).(*kmsg.IncrementalAlterConfigsResponse).Resources {
		ok("IncrementalAlterConfigs", r.ErrorCode)
	}
	wait.For(t, "the new retention.ms in the node's image", func() bool { return img().Topic(name).Overrides["retention.ms"] == "7200000" })

	principal := fmt.Sprintf("User:reader-%d", id)
	create := kmsg.NewPtrCreateACLsRequest()
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, name, kmsg.ACLResourcePatternTypeLiteral
	cr.Principal, cr.Host, cr.Operation, cr.PermissionType = principal, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	create.Creations = append(create.Creations, cr)
	for _, r := range request(create).(*kmsg.CreateACLsResponse).Results {
		ok("CreateAcls", r.ErrorCode)
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, &name, kmsg.ACLResourcePatternTypeLiteral
	f.Principal, f.Operation, f.PermissionType = &principal, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	for _, r := range request(del).(*kmsg.DeleteACLsResponse).Results {
		ok("DeleteAcls", r.ErrorCode)
		if len(r.MatchingACLs) != 1 {
			t.Fatalf("DeleteAcls through node %d matched %d bindings, want the one created", id, len(r.MatchingACLs))
		}
	}

	user := fmt.Sprintf("user-%d", id)
	salt, salted, err := sasl.SaltPassword(sasl.ScramSHA256, "pw", 4096)
	if err != nil {
		t.Fatal(err)
	}
	users := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = user, int8(metadata.ScramSHA256), 4096, salt, salted
	users.Upsertions = append(users.Upsertions, up)
	for _, r := range request(users).(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		ok("AlterUserScramCredentials", r.ErrorCode)
	}
	wait.For(t, "the new user in the node's image", func() bool {
		_, has := img().ScramCredential(user, metadata.ScramSHA256)
		return has
	})

	parts := kmsg.NewPtrCreatePartitionsRequest()
	pt := kmsg.NewCreatePartitionsRequestTopic()
	pt.Topic, pt.Count = name, 3
	parts.Topics, parts.TimeoutMillis = append(parts.Topics, pt), 10000
	for _, r := range request(parts).(*kmsg.CreatePartitionsResponse).Topics {
		ok("CreatePartitions", r.ErrorCode)
	}
	wait.For(t, "three partitions in the node's image", func() bool { return len(img().Topic(name).Partitions) == 3 })

	// Move partition 0 onto the two brokers it is not on.
	var target []int32
	for _, b := range img().Brokers() {
		if !slices.Contains(img().Partition(name, 0).Replicas, b.ID) {
			target = append(target, b.ID)
		}
	}
	move := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	mt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	mt.Topic = name
	mp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	mp.Partition, mp.Replicas = 0, target
	mt.Partitions = append(mt.Partitions, mp)
	move.Topics = append(move.Topics, mt)
	moved := request(move).(*kmsg.AlterPartitionAssignmentsResponse)
	ok("AlterPartitionReassignments", moved.ErrorCode)
	for _, r := range moved.Topics {
		for _, p := range r.Partitions {
			ok("AlterPartitionReassignments", p.ErrorCode)
		}
	}
	ok("ListPartitionReassignments", request(kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse).ErrorCode)
	wait.For(t, fmt.Sprintf("partition 0 on %v in the node's image", target), func() bool {
		got := slices.Sorted(slices.Values(img().Partition(name, 0).Replicas))
		return slices.Equal(got, slices.Sorted(slices.Values(target)))
	})

	quorum := kmsg.NewPtrDescribeQuorumRequest()
	qt := kmsg.NewDescribeQuorumRequestTopic()
	qt.Topic = "__cluster_metadata"
	qt.Partitions = append(qt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	quorum.Topics = append(quorum.Topics, qt)
	q := request(quorum).(*kmsg.DescribeQuorumResponse)
	ok("DescribeQuorum", q.ErrorCode)
	if len(q.Topics) != 1 || len(q.Topics[0].Partitions) != 1 || len(q.Topics[0].Partitions[0].CurrentVoters) != 3 {
		t.Fatalf("DescribeQuorum through node %d: %+v", id, q)
	}
	ok("DescribeQuorum", q.Topics[0].Partitions[0].ErrorCode)

	delTopics := kmsg.NewPtrDeleteTopicsRequest()
	delTopics.TopicNames, delTopics.TimeoutMillis = []string{name}, 10000
	deleted := request(delTopics).(*kmsg.DeleteTopicsResponse)
	if deleted.Version != 5 || len(deleted.Topics) != 1 || deleted.Topics[0].Topic == nil || *deleted.Topics[0].Topic != name {
		t.Fatalf("DeleteTopics v5 through node %d answered v%d for %+v", id, deleted.Version, deleted.Topics)
	}
	ok("DeleteTopics", deleted.Topics[0].ErrorCode)
	wait.For(t, "the node's image to drop "+name, func() bool { return img().Topic(name) == nil })
}

// httpDo sends one request without following redirects and returns the
// status, the Location header and the body.
func httpDo(t *testing.T, method, url, contentType, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	cl := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Location"), strings.TrimSpace(string(b))
}
