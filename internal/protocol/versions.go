package protocol

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// VersionRange is the range of versions the broker lists in ApiVersions for one
// API key. Versions below RefuseBelow (0: none) are listed but refused: their
// requests close the connection, as an unsupported version does. Kafka 4 lists
// Produce from v0 so, although it refuses v0-v2 (KIP-896), because old clients
// (librdkafka) refuse to send compressed data to a broker that does not list v0.
type VersionRange struct{ Key, Min, Max, RefuseBelow int16 }

const (
	apiVersionsKey = 18 // ApiVersions, answered by this package
	// apiVersionsMax is the highest ApiVersions version answered (v5: KIP-1242,
	// Kafka 4.4's highest).
	apiVersionsMax        = 5
	controlledShutdownKey = 7 // v0 of this key has no client id in its header
)

// apiEntry is one registered key.
type apiEntry struct {
	ok       bool
	min, max int16 // the versions served
	// respFlexibleFrom is the first version whose response is flexible (its header
	// carries a tag byte), or max+1 when no registered version is.
	respFlexibleFrom int16
}

// registry is the immutable version table built from Server.Versions. The
// dispatcher checks requests against it and ApiVersions is answered from it.
type registry struct {
	entries []apiEntry                       // indexed by API key
	apiKeys []kmsg.ApiVersionsResponseApiKey // sorted by key; shared, read-only
}

// newRegistry validates ranges and builds the registry. ApiVersions and the SASL
// keys must not be listed: they are always registered (0..apiVersionsMax and
// saslVersions).
func newRegistry(ranges []VersionRange) (*registry, error) {
	if slices.ContainsFunc(ranges, func(vr VersionRange) bool {
		return vr.Key == apiVersionsKey || vr.Key == saslHandshakeKey || vr.Key == saslAuthenticateKey
	}) {
		return nil, fmt.Errorf("%w: ApiVersions (18), SaslHandshake (17) and SaslAuthenticate (36) are answered by the protocol package and must not be listed", ErrInvalidVersions)
	}
	all := append(slices.Clone(ranges), VersionRange{Key: apiVersionsKey, Min: 0, Max: apiVersionsMax})
	all = append(all, saslVersions...)
	slices.SortFunc(all, func(a, b VersionRange) int { return int(a.Key) - int(b.Key) })
	g := &registry{entries: make([]apiEntry, int(all[len(all)-1].Key)+1)}
	for i, vr := range all {
		if i > 0 && all[i-1].Key == vr.Key {
			return nil, fmt.Errorf("%w: key %d listed twice", ErrInvalidVersions, vr.Key)
		}
		req := kmsg.RequestForKey(vr.Key)
		if req == nil {
			return nil, fmt.Errorf("%w: key %d is unknown to kmsg", ErrInvalidVersions, vr.Key)
		}
		if vr.Min < 0 || vr.Min > vr.Max || vr.Max > req.MaxVersion() {
			return nil, fmt.Errorf("%w: key %d range %d..%d (kmsg supports 0..%d)", ErrInvalidVersions, vr.Key, vr.Min, vr.Max, req.MaxVersion())
		}
		if vr.RefuseBelow != 0 && (vr.RefuseBelow <= vr.Min || vr.RefuseBelow > vr.Max) {
			return nil, fmt.Errorf("%w: key %d refuses below %d, outside %d..%d", ErrInvalidVersions, vr.Key, vr.RefuseBelow, vr.Min+1, vr.Max)
		}
		served := max(vr.Min, vr.RefuseBelow)
		e := apiEntry{ok: true, min: served, max: vr.Max, respFlexibleFrom: vr.Max + 1}
		resp := req.ResponseKind()
		for v := served; v <= vr.Max; v++ {
			resp.SetVersion(v)
			if resp.IsFlexible() {
				e.respFlexibleFrom = v
				break
			}
		}
		g.entries[vr.Key] = e
		g.apiKeys = append(g.apiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: vr.Key, MinVersion: vr.Min, MaxVersion: vr.Max})
	}
	return g, nil
}

// lookup returns the entry for key; ok is false when the key is not registered.
func (g *registry) lookup(key int16) (apiEntry, bool) {
	if key < 0 || int(key) >= len(g.entries) {
		return apiEntry{}, false
	}
	e := g.entries[key]
	return e, e.ok
}

// flexibleResponseHeader reports whether the response header for key at version
// carries the tag byte.
func (g *registry) flexibleResponseHeader(key, version int16) bool {
	e, ok := g.lookup(key)
	return ok && key != apiVersionsKey && version >= e.respFlexibleFrom
}
