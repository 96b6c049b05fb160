package server

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// TestAuditLog: ACL, user and quota changes over the Kafka API, refused ones
// included, and failed logins each write an audit line with audit=true, the
// principal who asked and the result.
func TestAuditLog(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.SASLMechanisms = "SCRAM-SHA-512"
	cfg.AddScram = []string{"SCRAM-SHA-512=[name=admin,password=admin-secret]", "SCRAM-SHA-512=[name=alice,password=alice-secret]"}
	cfg.Authorizer, cfg.SuperUsers = "acl", "User:admin"
	logs := &wait.Buffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg, slog.New(slog.NewJSONHandler(logs, nil)), vfs.Default)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	client := func(user, pass string) *kadm.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.RequestRetries(0),
			kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	admin, alice := client("admin", "admin-secret"), client("alice", "alice-secret")

	if _, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("orders").Operations(kadm.OpRead)); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("orders").Operations(kadm.OpRead)); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("all").Operations(kadm.OpAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha256}}, nil); err != nil {
		t.Fatal(err)
	}
	user := "alice"
	if _, err := admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &user}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}},
	}}); err != nil {
		t.Fatal(err)
	}
	client("alice", "wrong").ListTopics(ctx) // refused at login

	for _, c := range []struct {
		attrs map[string]any
		want  int
	}{
		{map[string]any{"event": "acl_change", "action": "create", "by": "User:admin", "result": "success", "resource": "orders", "operation": "READ"}, 1},
		{map[string]any{"event": "acl_change", "action": "delete", "by": "User:admin", "result": "success", "deleted": float64(1)}, 1},
		{map[string]any{"event": "acl_change", "action": "create", "by": "User:alice", "result": "CLUSTER_AUTHORIZATION_FAILED"}, 1},
		{map[string]any{"event": "user_change", "action": "upsert", "by": "User:admin", "user": "carol", "mechanism": "SCRAM-SHA-256", "result": "success"}, 1},
		{map[string]any{"event": "user_change", "action": "delete", "by": "User:admin", "user": "carol", "result": "success"}, 1},
		{map[string]any{"event": "user_change", "by": "--add-scram"}, 2},
		{map[string]any{"event": "quota_change", "by": "User:admin", "entity": "user=alice", "keys": "producer_byte_rate", "result": "success"}, 1},
		{map[string]any{"event": "authentication", "listener": "kafka", "user": "alice", "result": "failure"}, 1},
	} {
		c.attrs["audit"] = true
		if got := logLines(t, logs, c.attrs); len(got) != c.want {
			t.Errorf("%d audit lines with %v, want %d", len(got), c.attrs, c.want)
		}
	}
}
