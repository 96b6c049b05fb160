package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

// Compacted topics refuse remote storage on create and on alter, as Kafka does.
func TestPlanRemoteStorageRefusedForCompactedTopics(t *testing.T) {
	base := configBase(t) // "orders" is compact,delete
	_, res := PlanIncrementalAlterConfigs(base, []IncrementalAlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders",
		Ops: []AlterConfigOp{{Key: "remote.storage.enable", Op: OpSet, Value: "true"}}}}, true)
	if !errors.Is(res[0].Err, metadata.ErrInvalidConfig) {
		t.Fatalf("enabling remote storage on a compacted topic: %v", res[0].Err)
	}
	_, res = PlanIncrementalAlterConfigs(base, []IncrementalAlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders",
		Ops: []AlterConfigOp{{Key: "remote.storage.enable", Op: OpSet, Value: "true"}, {Key: "cleanup.policy", Op: OpSet, Value: "delete"}}}}, true)
	if res[0].Err != nil {
		t.Fatalf("remote storage with cleanup.policy=delete: %v", res[0].Err)
	}
	_, err := planCreateTopic(base, CreateTopic{Name: "tiered", NumPartitions: 1, ReplicationFactor: 1,
		Configs: map[string]string{"remote.storage.enable": "true", "cleanup.policy": "compact"}}, 1, nil, nil, true)
	if !errors.Is(err, metadata.ErrInvalidConfig) {
		t.Fatalf("creating a compacted tiered topic: %v", err)
	}
}

// A tiered topic turns remote storage off only with
// remote.log.delete.on.disable=true (KIP-950), whichever request does it.
func TestPlanTurningRemoteStorageOff(t *testing.T) {
	base := configBase(t)
	recs, res := PlanIncrementalAlterConfigs(base, []IncrementalAlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders",
		Ops: []AlterConfigOp{{Key: "remote.storage.enable", Op: OpSet, Value: "true"}, {Key: "cleanup.policy", Op: OpSet, Value: "delete"}}}}, true)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	tiered, err := metadata.ApplyAll(base, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		ops  []AlterConfigOp
		ok   bool
	}{
		{"set false", []AlterConfigOp{{Key: "remote.storage.enable", Op: OpSet, Value: "false"}}, false},
		{"delete the key", []AlterConfigOp{{Key: "remote.storage.enable", Op: OpDelete}}, false},
		{"set false and delete", []AlterConfigOp{{Key: "remote.storage.enable", Op: OpSet, Value: "false"},
			{Key: "remote.log.delete.on.disable", Op: OpSet, Value: "true"}}, true},
		{"stop copying", []AlterConfigOp{{Key: "remote.log.copy.disable", Op: OpSet, Value: "true"}}, true},
	} {
		_, res := PlanIncrementalAlterConfigs(tiered, []IncrementalAlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders", Ops: tt.ops}}, true)
		if tt.ok != (res[0].Err == nil) || res[0].Err != nil && !errors.Is(res[0].Err, metadata.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ok=%v", tt.name, res[0].Err, tt.ok)
		}
	}
	_, ares := PlanAlterConfigs(tiered, []AlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders",
		Configs: map[string]string{"cleanup.policy": "delete"}}}, true)
	if !errors.Is(ares[0].Err, metadata.ErrInvalidConfig) {
		t.Errorf("AlterConfigs leaving remote.storage.enable out: %v, want INVALID_CONFIG", ares[0].Err)
	}
}

// Without remote storage on the controller's node, no topic may have
// remote.storage.enable=true, whichever request sets it, and a tiered topic
// takes no other change either, as Kafka's LogConfig refuses with
// remote.log.storage.system.enable=false.
func TestPlanRemoteStorageNeedsTheSystemEnabled(t *testing.T) {
	const want = "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, metadata.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s without remote storage: %v, want INVALID_CONFIG %q", what, err, want)
		}
	}
	base := configBase(t)
	tiered := map[string]string{"remote.storage.enable": "true"}
	_, err := planCreateTopic(base, CreateTopic{Name: "tiered", NumPartitions: 1, ReplicationFactor: 1, Configs: tiered}, 1, testRand(1), nil, false)
	check("CreateTopics", err)
	_, res := PlanAlterConfigs(base, []AlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders", Configs: tiered}}, false)
	check("AlterConfigs", res[0].Err)
	// Checked before the compaction rule, as in Kafka ("orders" is compacted).
	_, res = PlanIncrementalAlterConfigs(base, []IncrementalAlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders",
		Ops: []AlterConfigOp{{Key: "remote.storage.enable", Op: OpSet, Value: "true"}}}}, false)
	check("IncrementalAlterConfigs", res[0].Err)

	recs, res := PlanIncrementalAlterConfigs(base, []IncrementalAlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders",
		Ops: []AlterConfigOp{{Key: "remote.storage.enable", Op: OpSet, Value: "true"}, {Key: "cleanup.policy", Op: OpSet, Value: "delete"}}}}, true)
	if res[0].Err != nil {
		t.Fatalf("remote.storage.enable=true with remote storage: %v", res[0].Err)
	}
	_, res = PlanIncrementalAlterConfigs(apply(t, base, recs...), []IncrementalAlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders",
		Ops: []AlterConfigOp{{Key: "retention.ms", Op: OpSet, Value: "60000"}}}}, false)
	check("altering a tiered topic", res[0].Err)
}
