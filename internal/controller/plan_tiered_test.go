package controller

import (
	"errors"
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

// Compacted topics refuse remote storage on create and on alter, as Kafka does.
func TestPlanRemoteStorageRefusedForCompactedTopics(t *testing.T) {
	base := configBase(t) // "orders" is compact,delete
	_, res := PlanIncrementalAlterConfigs(base, []IncrementalAlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders",
		Ops: []AlterConfigOp{{Key: "remote.storage.enable", Op: OpSet, Value: "true"}}}})
	if !errors.Is(res[0].Err, metadata.ErrInvalidConfig) {
		t.Fatalf("enabling remote storage on a compacted topic: %v", res[0].Err)
	}
	_, res = PlanIncrementalAlterConfigs(base, []IncrementalAlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders",
		Ops: []AlterConfigOp{{Key: "remote.storage.enable", Op: OpSet, Value: "true"}, {Key: "cleanup.policy", Op: OpSet, Value: "delete"}}}})
	if res[0].Err != nil {
		t.Fatalf("remote storage with cleanup.policy=delete: %v", res[0].Err)
	}
	_, err := planCreateTopic(base, CreateTopic{Name: "tiered", NumPartitions: 1, ReplicationFactor: 1,
		Configs: map[string]string{"remote.storage.enable": "true", "cleanup.policy": "compact"}}, 1, nil, nil)
	if !errors.Is(err, metadata.ErrInvalidConfig) {
		t.Fatalf("creating a compacted tiered topic: %v", err)
	}
}
