package handlers

// UpdateFeatures (key 57), v0-v2 (flexible; KIP-584, kafka-features upgrade,
// downgrade and disable). Strata runs each feature it advertises at one level
// (protocol.Features) and the others not at all, so the only update that
// succeeds is one to the level a feature already has (0 for one of Kafka's
// that Strata does not advertise); it changes nothing, with or without
// ValidateOnly. Any other fails the whole request with INVALID_UPDATE_VERSION
// and Kafka's message. The checks, in Kafka's order, for each update until
// one fails:
//   - an upgrade type other than 1 (upgrade), 2 (safe downgrade) or 3 (unsafe
//     downgrade); v0's AllowDowngrade means 2, else 1;
//   - a level below 0;
//   - a level Strata does not run the feature at (metadata.version at none);
//   - at level 0, a feature Kafka does not define ("Feature X not found.").
// v0-v1 answer a result per feature when every update succeeds; v2 only the
// top-level error. CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster.

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) updateFeatures(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	for _, u := range req.FeatureUpdates {
		if msg := h.refuseFeatureUpdate(req.Version, u); msg != "" {
			resp.ErrorCode = kerr.InvalidUpdateVersion.Code
			full := fmt.Sprintf("The update failed for all features since the following feature had an error: Invalid update version %d for feature %s. %s",
				u.MaxVersionLevel, u.Feature, msg)
			resp.ErrorMessage = &full
			return reply(resp)
		}
	}
	if req.Version <= 1 {
		for _, u := range req.FeatureUpdates {
			res := kmsg.NewUpdateFeaturesResponseResult()
			res.Feature = u.Feature
			resp.Results = append(resp.Results, res)
		}
	}
	return reply(resp)
}

// refuseFeatureUpdate is why update u cannot be made, in Kafka's words, or ""
// when u asks for the level the feature already has.
func (h *Handlers) refuseFeatureUpdate(version int16, u kmsg.UpdateFeaturesRequestFeatureUpdate) string {
	upgradeType := u.UpgradeType
	if version == 0 {
		upgradeType = 1
		if u.AllowDowngrade {
			upgradeType = 2
		}
	}
	level, advertised := protocol.FeatureLevel(u.Feature)
	switch {
	case upgradeType < 1 || upgradeType > 3:
		return "The controller does not support the given upgrade type."
	case u.MaxVersionLevel < 0:
		return "A feature version cannot be less than 0."
	case u.MaxVersionLevel == level && (advertised || slices.Contains(unadvertisedKafkaFeatures, u.Feature)):
		return ""
	case !advertised && u.MaxVersionLevel == 0 && u.Feature != "metadata.version":
		return fmt.Sprintf("Feature %s not found.", u.Feature)
	case !advertised:
		return fmt.Sprintf("Local controller %d does not support this feature.", h.cfg.NodeID)
	}
	return fmt.Sprintf("Local controller %d only supports versions %d.", h.cfg.NodeID, level)
}

// unadvertisedKafkaFeatures are the features Kafka 4.4 defines, besides
// metadata.version, that Strata does not advertise: left at 0, as Kafka
// takes such an update. Kafka knows no other name, at any level.
var unadvertisedKafkaFeatures = []string{"eligible.leader.replicas.version"}
