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
//     INVALID_REQUEST) and are recorded on the ConnInfo. The features are
//     transaction.version, supported 0-2 and finalized at 2 (KIP-890's
//     transaction protocol, Kafka 4's default; KIP-1022), which clients read to
//     use Produce v12, TxnOffsetCommit v5 and EndTxn v5.
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
		resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{{Name: transactionVersion, MinVersion: 0, MaxVersion: 2}}
		resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{{Name: transactionVersion, MinVersionLevel: 2, MaxVersionLevel: 2}}
		resp.FinalizedFeaturesEpoch = finalizedFeaturesEpoch
	}
	return resp, r.Version
}

// transactionVersion is the feature of the transaction protocol's version
// (KIP-1022); level 2 is KIP-890's.
const transactionVersion = "transaction.version"

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
