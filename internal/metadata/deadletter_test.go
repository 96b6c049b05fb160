package metadata

import (
	"errors"
	"testing"
)

func TestDeadLetterBrokerConfigs(t *testing.T) {
	img := NewImage()
	wantEq(t, "default prefix", img.BrokerConfig(BrokerDeadLetterPrefix), "dlq.")
	if img.DeadLetterAutoCreate() {
		t.Error("auto-create on by default")
	}
	img = mustApply(t, img,
		&ConfigRecord{ResourceType: ResourceBroker, Key: BrokerDeadLetterPrefix, Value: "dead."},
		&ConfigRecord{ResourceType: ResourceBroker, Key: BrokerDeadLetterAutoCreate, Value: "true"})
	wantEq(t, "prefix", img.BrokerConfig(BrokerDeadLetterPrefix), "dead.")
	if !img.DeadLetterAutoCreate() {
		t.Error("auto-create off after setting it")
	}
	found := 0
	for _, e := range img.BrokerConfigEntries("") {
		if e.Name == BrokerDeadLetterPrefix || e.Name == BrokerDeadLetterAutoCreate {
			found++
			if e.Source != SourceClusterDefault {
				t.Errorf("%s: source %d, want the cluster default", e.Name, e.Source)
			}
		}
	}
	if found != 2 {
		t.Errorf("broker entries list %d of the 2 dead-letter keys", found)
	}
	if _, err := Apply(img, &ConfigRecord{ResourceType: ResourceBroker, Key: BrokerDeadLetterAutoCreate, Value: "maybe"}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("auto-create=maybe: err %v, want invalid request", err)
	}
	if _, err := Apply(img, &ConfigRecord{ResourceType: ResourceGroup, ResourceName: "g", Key: GroupDeadLetterTopic, Value: "__x"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("internal dead-letter topic: err %v, want invalid config", err)
	}
}
