package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestACLAuthorization: with --authorizer acl, the admin (a super user) grants
// alice WRITE and READ on topics prefixed "ord" and READ on group "app"; alice
// sees only those topics, produces and consumes there, and gets Kafka's
// authorization errors everywhere else; a DENY wins over the prefixed ALLOW.
func TestACLAuthorization(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.SASLMechanisms = "SCRAM-SHA-512"
	cfg.AddScram = []string{"SCRAM-SHA-512=[name=admin,password=admin-secret]", "SCRAM-SHA-512=[name=alice,password=alice-secret]"}
	cfg.Authorizer = "acl"
	cfg.SuperUsers = "User:admin"
	cfg.AutoCreateTopics = false
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	as := func(user, password string, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
		return n.client(t, append([]kgo.Opt{kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism()), kgo.RequestRetries(1)}, opts...)...)
	}
	_, admin := as("admin", "admin-secret")
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "secret"); err != nil {
		t.Fatal(err)
	}
	acls := kadm.NewACLs().Allow("User:alice").ResourcePatternType(kadm.ACLPatternPrefixed).Topics("ord").
		Operations(kadm.OpWrite, kadm.OpRead)
	groupACL := kadm.NewACLs().Allow("User:alice").Groups("app").Operations(kadm.OpRead)
	for _, b := range []*kadm.ACLBuilder{acls, groupACL} {
		res, err := admin.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("CreateACLs: %v", r.Err)
			}
		}
	}
	adminCl, _ := as("admin", "admin-secret")
	if d, err := describeAllACLs().RequestWith(ctx, adminCl); err != nil || d.ErrorCode != 0 || len(d.Resources) != 2 {
		t.Fatalf("DescribeACLs: %v %+v", err, d)
	}

	aliceCl, alice := as("alice", "alice-secret", kgo.DefaultProduceTopic("orders"))
	md, err := alice.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := md.Topics["orders"]; !ok || len(md.Topics) != 1 {
		t.Fatalf("alice's metadata lists %v, want only orders", md.Topics.Names())
	}
	if err := aliceCl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("alice producing to orders: %v", err)
	}
	if err := aliceCl.ProduceSync(ctx, &kgo.Record{Topic: "secret", Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice producing to secret: %v", err)
	}
	if _, err := alice.CreateTopic(ctx, 1, 1, nil, "orders-2"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice creating a topic: %v", err)
	}
	if d, err := describeAllACLs().RequestWith(ctx, aliceCl); err != nil || d.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alice describing ACLs: %v %+v", err, d)
	}
	// A group she may read, and one she may not.
	consumer, _ := as("alice", "alice-secret", kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("app"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := consumer.PollFetches(ctx)
	if err := fs.Err(); err != nil || len(fs.Records()) != 1 {
		t.Fatalf("alice consuming in group app: %v, %d records", err, len(fs.Records()))
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("committing in group app: %v", err)
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "other", "consumer", 30000, 30000
	join.Protocols = append(join.Protocols, kmsg.JoinGroupRequestProtocol{Name: "range"})
	// (kgo turns the group error code into err for JoinGroup.)
	if resp, err := join.RequestWith(ctx, aliceCl); !errors.Is(err, kerr.GroupAuthorizationFailed) && (resp == nil || resp.ErrorCode != kerr.GroupAuthorizationFailed.Code) {
		t.Fatalf("joining group other: %v %+v", err, resp)
	}
	// Fetching secret directly is refused per partition.
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.MaxBytes = -1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	adminMD, err := admin.Metadata(ctx, "secret")
	if err != nil {
		t.Fatal(err)
	}
	ft.Topic, ft.TopicID = "secret", adminMD.Topics["secret"].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fetch.SetVersion(12)
	fr, err := fetch.RequestWith(ctx, aliceCl.Broker(1))
	if err != nil || fr.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("fetching secret: %v %+v", err, fr)
	}

	// DENY wins over the prefixed ALLOW.
	if _, err := admin.CreateACLs(ctx, kadm.NewACLs().Deny("User:alice").DenyHosts("*").Topics("orders").Operations(kadm.OpWrite)); err != nil {
		t.Fatal(err)
	}
	if err := aliceCl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice producing after the DENY: %v", err)
	}
	deleted, err := admin.DeleteACLs(ctx, kadm.NewACLs().Deny("User:alice").DenyHosts("*").Topics("orders").Operations(kadm.OpWrite))
	if err != nil || len(deleted) != 1 || len(deleted[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs: %v %+v", err, deleted)
	}
	if err := aliceCl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("alice producing after the DENY went: %v", err)
	}
}

// TestACLAPIsWithoutAuthorizer: Kafka answers the ACL APIs with
// SECURITY_DISABLED when no authorizer is configured.
func TestACLAPIsWithoutAuthorizer(t *testing.T) {
	n := startNode(t, nodeConfig(t.TempDir()))
	cl, adm := n.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if d, err := describeAllACLs().RequestWith(ctx, cl); err != nil || d.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("DescribeACLs: %v %+v", err, d)
	}
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:a").Topics("t").Operations(kadm.OpRead))
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("CreateACLs: %v %+v", err, res)
	}
}

// describeAllACLs is a DescribeAcls request matching every binding.
func describeAllACLs() *kmsg.DescribeACLsRequest {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	return req
}
