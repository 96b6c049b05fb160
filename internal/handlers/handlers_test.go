package handlers

import (
	"testing"

	"github.com/strata-stream/strata/internal/group"
)

// TestRegistryComplete: every registered API has a handler, and no key is served
// twice (the group APIs come from the coordinator's version table).
func TestRegistryComplete(t *testing.T) {
	seen := map[int16]bool{}
	for _, a := range allApis() {
		if a.serve == nil {
			t.Errorf("API key %d is registered without a handler", a.key)
		}
		if seen[a.key] {
			t.Errorf("API key %d registered twice", a.key)
		}
		seen[a.key] = true
	}
	for _, v := range group.Versions() {
		if !seen[v.Key] {
			t.Errorf("group API key %d is not served", v.Key)
		}
	}
	for _, a := range linkApis {
		if a.serve == nil {
			t.Errorf("link API key %d has no handler", a.key)
		}
	}
}

// TestMaxVersionsAsKafka44: the APIs brought up to Kafka 4.4.0's maxima (as a
// Kafka 4.4.0 node's ApiVersions answered) are advertised at them.
func TestMaxVersionsAsKafka44(t *testing.T) {
	want := map[int16]int16{
		0:  13, // Produce
		8:  10, // OffsetCommit
		9:  10, // OffsetFetch
		15: 6,  // DescribeGroups
		25: 4,  // AddOffsetsToTxn
		28: 6,  // TxnOffsetCommit
		42: 3,  // DeleteGroups
	}
	for _, v := range Versions() {
		if w, ok := want[v.Key]; ok {
			if v.Max != w {
				t.Errorf("key %d: max %d, Kafka 4.4's is %d", v.Key, v.Max, w)
			}
			delete(want, v.Key)
		}
	}
	for k := range want {
		t.Errorf("key %d not advertised", k)
	}
}
