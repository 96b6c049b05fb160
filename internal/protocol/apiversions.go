package protocol

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// answerApiVersions builds the ApiVersions response (key 18) and the version to
// encode it at. self is the broker the listener serves, or nil where requests
// are not checked against it (see Server.ClusterID). Versions 0..apiVersionsMax:
//
//   - v0: error code and the key ranges.
//   - v1+: ThrottleMillis, the client's request-quota throttle
//     (Server.RequestThrottle, set by conn.chargeRequest; never before SASL
//     authentication), else 0.
//   - v3+: flexible; the request carries the client software name and version,
//     which must match [a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])? (else
//     INVALID_REQUEST) and are recorded on the ConnInfo. The supported and
//     finalized features are Features, each at its one level. (Kafka leaves
//     supported features whose minimum is 0 out of v3 answers, KAFKA-17011;
//     none of Features has minimum 0, so v3 and v4 list the same.)
//   - v5+ (KIP-1242): the request may name the cluster and node the client
//     believes it reached, both or neither (one alone: INVALID_REQUEST). Naming
//     another cluster or node than self gets REBOOTSTRAP_REQUIRED: the client's
//     metadata is stale and it should bootstrap again. Both error answers carry
//     no keys and no features, and the connection stays open, as Kafka 4.4's.
//   - above apiVersionsMax, or below 0: a v0 response with UNSUPPORTED_VERSION
//     that lists only the ApiVersions range, so the client retries at that
//     version (KIP-511); the connection stays open. Kafka answers any version
//     it does not support so (RequestContext.isUnsupportedApiVersionsRequest).
func (g *registry) answerApiVersions(c *ConnInfo, r *Request, self *brokerIdentity) (*kmsg.ApiVersionsResponse, int16) {
	resp := kmsg.NewPtrApiVersionsResponse()
	if !apiVersionsSupported(r.Version) {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: apiVersionsKey, MinVersion: 0, MaxVersion: apiVersionsMax}}
		return resp, 0
	}
	if req, ok := r.Msg.(*kmsg.ApiVersionsRequest); ok && r.Version >= 3 {
		if !validSoftwareField(req.ClientSoftwareName) || !validSoftwareField(req.ClientSoftwareVersion) ||
			r.Version >= 5 && (req.ClusterID == nil) != (req.NodeID == -1) {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, r.Version
		}
		c.software.Store(&clientSoftware{name: req.ClientSoftwareName, version: req.ClientSoftwareVersion})
		if r.Version >= 5 && self.misrouted(req.ClusterID, req.NodeID) {
			resp.ErrorCode = kerr.RebootstrapRequired.Code
			return resp, r.Version
		}
	}
	resp.ApiKeys = g.apiKeys
	if r.Version >= 3 {
		resp.SupportedFeatures, resp.FinalizedFeatures = supportedFeatures, finalizedFeatures
		resp.FinalizedFeaturesEpoch = finalizedFeaturesEpoch
	}
	return resp, r.Version
}

// apiVersionsSupported reports whether ApiVersions at version is answered at
// that version (0..apiVersionsMax); any other is answered at v0.
func apiVersionsSupported(version int16) bool { return version >= 0 && version <= apiVersionsMax }

// brokerIdentity is the cluster and node a listener serves (KIP-1242).
type brokerIdentity struct {
	clusterID string
	nodeID    int32
}

// misrouted reports whether a client that names clusterID and nodeID (nil:
// it names none) meant another broker than b. A nil b checks nothing.
func (b *brokerIdentity) misrouted(clusterID *string, nodeID int32) bool {
	return b != nil && clusterID != nil && (*clusterID != b.clusterID || nodeID != b.nodeID)
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
