package protocol

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// answerApiVersions builds the ApiVersions response (key 18) and the version to
// encode it at. Versions 0..apiVersionsMax:
//
//   - v0: error code and the key ranges.
//   - v1+: ThrottleMillis, always 0.
//   - v3+: flexible; the request carries the client software name and version,
//     which must match [a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])? (else
//     INVALID_REQUEST) and are recorded on the ConnInfo. The supported and
//     finalized features are Features, each at its one level. (Kafka leaves
//     supported features whose minimum is 0 out of v3 answers, KAFKA-17011;
//     none of Features has minimum 0, so v3 and v4 list the same.)
//   - above apiVersionsMax: a v0 response with UNSUPPORTED_VERSION that lists only
//     the ApiVersions range, so the client retries at that version (KIP-511).
func (g *registry) answerApiVersions(c *ConnInfo, r *Request) (*kmsg.ApiVersionsResponse, int16) {
	resp := kmsg.NewPtrApiVersionsResponse()
	if r.Version > apiVersionsMax {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: apiVersionsKey, MinVersion: 0, MaxVersion: apiVersionsMax}}
		return resp, 0
	}
	if req, ok := r.Msg.(*kmsg.ApiVersionsRequest); ok && r.Version >= 3 {
		if !validSoftwareField(req.ClientSoftwareName) || !validSoftwareField(req.ClientSoftwareVersion) {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, r.Version
		}
		c.software.Store(&clientSoftware{name: req.ClientSoftwareName, version: req.ClientSoftwareVersion})
	}
	resp.ApiKeys = g.apiKeys
	if r.Version >= 3 {
		resp.SupportedFeatures, resp.FinalizedFeatures = supportedFeatures, finalizedFeatures
		resp.FinalizedFeaturesEpoch = finalizedFeaturesEpoch
	}
	return resp, r.Version
}

// Feature is a feature flag of KIP-584 at the one level Strata runs it.
type Feature struct {
	Name  string
	Level int16
}

// Features are the features Strata advertises in ApiVersions (kafka-features
// describe), each supported and finalized at one level only: Strata has no
// other behaviour to switch to, so UpdateFeatures refuses any other level
// (kafka-features upgrade, downgrade, disable). Each level is one whose
// promise to clients Strata keeps, as Kafka 4.4 defines it:
//   - group.version 1: the consumer group protocol of KIP-848
//     (ConsumerGroupHeartbeat, ConsumerGroupDescribe);
//   - kraft.version 1: a dynamic controller quorum (KIP-853: AddRaftVoter,
//     RemoveRaftVoter, DescribeQuorum v2);
//   - share.version 2: share groups (KIP-932, level 1) with dead-letter topics
//     (KIP-1191, level 2);
//   - streams.version 1: streams groups (KIP-1071: StreamsGroupHeartbeat,
//     StreamsGroupDescribe; Kafka Streams' group.protocol=streams), the level a
//     Kafka 4.4 cluster is formatted with;
//   - transaction.version 2: KIP-890's transaction protocol (KIP-1022), which
//     clients read to use Produce v12, TxnOffsetCommit v5 and EndTxn v5.
//
// Left out, so clients and kafka-features see them as unsupported:
// metadata.version (its levels name Kafka's KRaft metadata records and
// inter-node RPCs, which Strata does not use), eligible.leader.replicas.version
// (no KIP-966 eligible leader replicas).
var Features = []Feature{
	{"group.version", 1},
	{"kraft.version", 1},
	{"share.version", 2},
	{"streams.version", 1},
	{"transaction.version", 2},
}

// FeatureLevel is the level Strata runs feature name at, and whether it
// advertises name at all.
func FeatureLevel(name string) (int16, bool) {
	for _, f := range Features {
		if f.Name == name {
			return f.Level, true
		}
	}
	return 0, false
}

var supportedFeatures, finalizedFeatures = func() ([]kmsg.ApiVersionsResponseSupportedFeature, []kmsg.ApiVersionsResponseFinalizedFeature) {
	var s []kmsg.ApiVersionsResponseSupportedFeature
	var f []kmsg.ApiVersionsResponseFinalizedFeature
	for _, ft := range Features {
		s = append(s, kmsg.ApiVersionsResponseSupportedFeature{Name: ft.Name, MinVersion: ft.Level, MaxVersion: ft.Level})
		f = append(f, kmsg.ApiVersionsResponseFinalizedFeature{Name: ft.Name, MinVersionLevel: ft.Level, MaxVersionLevel: ft.Level})
	}
	return s, f
}()

// finalizedFeaturesEpoch versions the finalized features; they never change.
const finalizedFeaturesEpoch = 1

// validSoftwareField checks a client software name or version: ASCII letters,
// digits, '.' and '-', starting and ending with a letter or digit.
func validSoftwareField(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		alnum := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9'
		edge := i == 0 || i == len(s)-1
		if !alnum && (edge || ch != '.' && ch != '-') {
			return false
		}
	}
	return true
}
