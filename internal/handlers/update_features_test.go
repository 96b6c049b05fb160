package handlers

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestUpdateFeatures: only the level a feature already has is accepted (a
// no-op); any other level, a negative one, an unknown upgrade type, a feature
// Kafka does not define (even at 0) or metadata.version fails the whole
// request with INVALID_UPDATE_VERSION and Kafka's message. v0-v1 answer
// a result per feature on success, v2 none.
func TestUpdateFeatures(t *testing.T) {
	h := newErrorsHandlers(t)
	type update struct {
		feature string
		level   int16
		typ     int8
	}
	run := func(version int16, validateOnly bool, ups ...update) *kmsg.UpdateFeaturesResponse {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		req.SetVersion(version)
		req.ValidateOnly = validateOnly
		for _, u := range ups {
			fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
			fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = u.feature, u.level, u.typ
			fu.AllowDowngrade = u.typ == 2
			req.FeatureUpdates = append(req.FeatureUpdates, fu)
		}
		return serve(t, h, req).(*kmsg.UpdateFeaturesResponse)
	}
	for _, tc := range []struct {
		name    string
		version int16
		ups     []update
		want    string // "" for success, else a part of the error message
	}{
		{"the current levels", 1, []update{{"transaction.version", 2, 1}, {"group.version", 1, 1}, {"share.version", 2, 1}, {"kraft.version", 1, 1}, {"streams.version", 1, 1}}, ""},
		{"an unadvertised feature left at 0", 2, []update{{"eligible.leader.replicas.version", 0, 2}}, ""},
		{"upgrade to a level Strata does not have", 1, []update{{"group.version", 1, 1}, {"share.version", 3, 1}},
			"Invalid update version 3 for feature share.version. Local controller 1 only supports versions 2."},
		{"safe downgrade", 2, []update{{"transaction.version", 1, 2}}, "only supports versions 2."},
		{"disable (unsafe downgrade to 0)", 1, []update{{"group.version", 0, 3}}, "only supports versions 1."},
		{"v0 downgrade", 0, []update{{"transaction.version", 0, 2}}, "only supports versions 2."},
		{"an unadvertised feature", 2, []update{{"eligible.leader.replicas.version", 1, 1}},
			"Invalid update version 1 for feature eligible.leader.replicas.version. Local controller 1 does not support this feature."},
		{"metadata.version", 1, []update{{"metadata.version", 31, 1}}, "does not support this feature."},
		{"metadata.version at 0", 1, []update{{"metadata.version", 0, 3}},
			"Invalid update version 0 for feature metadata.version. Local controller 1 does not support this feature."},
		{"an unknown feature at 0", 2, []update{{"group.version", 1, 1}, {"no.such.version", 0, 1}},
			"Invalid update version 0 for feature no.such.version. Feature no.such.version not found."},
		{"a negative level", 1, []update{{"group.version", -1, 3}}, "A feature version cannot be less than 0."},
		{"an unknown upgrade type", 1, []update{{"group.version", 1, 4}}, "The controller does not support the given upgrade type."},
	} {
		for _, validateOnly := range []bool{false, true} {
			resp := run(tc.version, validateOnly, tc.ups...)
			if tc.want == "" {
				if resp.ErrorCode != 0 {
					t.Errorf("%s: error %v %v", tc.name, kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
				}
				wantResults := len(tc.ups)
				if tc.version >= 2 {
					wantResults = 0
				}
				if len(resp.Results) != wantResults {
					t.Errorf("%s: %d results at v%d, want %d", tc.name, len(resp.Results), tc.version, wantResults)
				}
				continue
			}
			if resp.ErrorCode != kerr.InvalidUpdateVersion.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, tc.want) || len(resp.Results) != 0 {
				t.Errorf("%s: error %v %v, %d results; want INVALID_UPDATE_VERSION with %q and none",
					tc.name, kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage, len(resp.Results), tc.want)
			}
		}
	}
}
