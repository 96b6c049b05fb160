package controller

import (
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

// TestPlanDeadLetterGroupConfigs: a share group's dead-letter topic (KIP-1191) is
// refused with INVALID_CONFIG unless it carries the cluster's prefix and, when it
// exists, errors.deadletterqueue.group.enable=true; internal names never pass.
func TestPlanDeadLetterGroupConfigs(t *testing.T) {
	base := clusterImage(t, 1)
	base = withTopic(t, base, "dlq.ok", metadata.UUID{7, 1}, map[string]string{metadata.TopicDeadLetterGroupEnable: "true"}, []int32{1})
	base = withTopic(t, base, "dlq.closed", metadata.UUID{7, 2}, nil, []int32{1})
	base = withTopic(t, base, "dead.ok", metadata.UUID{7, 3}, map[string]string{metadata.TopicDeadLetterGroupEnable: "true"}, []int32{1})
	set := func(topic string) IncrementalAlterConfigsResource {
		return IncrementalAlterConfigsResource{Type: metadata.ResourceGroup, Name: "g",
			Ops: []AlterConfigOp{{Key: metadata.GroupDeadLetterTopic, Op: OpSet, Value: topic}}}
	}
	tests := []struct {
		name  string
		img   *metadata.Image
		topic string
		err   error
	}{
		{"enabled topic with the prefix", base, "dlq.ok", nil},
		{"missing topic with the prefix (created on first write, if allowed)", base, "dlq.later", nil},
		{"blank: no dead-letter topic", base, "", nil},
		{"topic without the enable flag", base, "dlq.closed", metadata.ErrInvalidConfig},
		{"enabled topic without the prefix", base, "dead.ok", metadata.ErrInvalidConfig},
		{"internal name", base, "__consumer_offsets", metadata.ErrInvalidConfig},
		{"another prefix set for the cluster", apply(t, base, &metadata.ConfigRecord{ResourceType: metadata.ResourceBroker,
			Key: metadata.BrokerDeadLetterPrefix, Value: "dead."}), "dead.ok", nil},
		{"empty prefix allows any name", apply(t, base, &metadata.ConfigRecord{ResourceType: metadata.ResourceBroker,
			Key: metadata.BrokerDeadLetterPrefix, Value: ""}), "anything", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, res := PlanIncrementalAlterConfigs(tt.img, []IncrementalAlterConfigsResource{set(tt.topic)}, true)
			checkConfigResults(t, res, []error{tt.err})
			if tt.err == nil && tt.topic != "" {
				if got := apply(t, tt.img, recs...).GroupConfig("g", metadata.GroupDeadLetterTopic); got != tt.topic {
					t.Errorf("group config = %q, want %q", got, tt.topic)
				}
			}
		})
	}

	// A topic set earlier is not checked again when another key changes (the write
	// checks it), and the copy flag is a boolean.
	img := apply(t, base, &metadata.ConfigRecord{ResourceType: metadata.ResourceGroup, ResourceName: "g", Key: metadata.GroupDeadLetterTopic, Value: "dlq.closed"})
	_, res := PlanIncrementalAlterConfigs(img, []IncrementalAlterConfigsResource{{Type: metadata.ResourceGroup, Name: "g",
		Ops: []AlterConfigOp{{Key: metadata.GroupDeadLetterCopyRecord, Op: OpSet, Value: "true"}}}}, true)
	checkConfigResults(t, res, []error{nil})
	_, res = PlanIncrementalAlterConfigs(img, []IncrementalAlterConfigsResource{{Type: metadata.ResourceGroup, Name: "g",
		Ops: []AlterConfigOp{{Key: metadata.GroupDeadLetterCopyRecord, Op: OpSet, Value: "yes"}}}}, true)
	checkConfigResults(t, res, []error{metadata.ErrInvalidConfig})

	// The broker keys are dynamic cluster-wide configs.
	_, res = PlanIncrementalAlterConfigs(base, []IncrementalAlterConfigsResource{{Type: metadata.ResourceBroker, Name: "",
		Ops: []AlterConfigOp{{Key: metadata.BrokerDeadLetterAutoCreate, Op: OpSet, Value: "true"}, {Key: metadata.BrokerDeadLetterPrefix, Op: OpSet, Value: "x."}}}}, true)
	checkConfigResults(t, res, []error{nil})
}
