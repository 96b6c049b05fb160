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
