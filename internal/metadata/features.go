package metadata

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
)

// Strata-internal broker features: what a broker's build can do that another
// build of Strata cannot, reported in its registration (BrokerRegistration's
// Features, as Kafka's brokers report the feature ranges they support) and
// kept per registration, so a behaviour that older brokers would misread is
// turned on only once every registered broker supports it. They are never
// Kafka features: ApiVersions and kafka-features do not show them.
const (
	// FeatureOwedMarkers, level 1: the broker's transaction coordinator reads
	// the markers a __transaction_state record names as owed (the overlap of a
	// transaction's markers with the next transaction, docs/transactions.md).
	// A build without it reads such a record as a plain state and would not
	// write those markers.
	FeatureOwedMarkers = "strata.txn.owed.markers"
	// FeaturePreadded, level 1: the broker's transaction coordinator resumes
	// a loaded Prepare state that pre-added its partitions to the producer's
	// next transaction (docs/transactions.md, "Pre-added partitions"). A
	// build without it completes such a state and would leave the next
	// transaction, begun on those partitions, open for good.
	FeaturePreadded = "strata.txn.preadded"
	// FeatureVoterDirectory, level 1: the node's controller listener reads
	// the voter identity that a Raft connection may open with, and refuses
	// one that names another data directory than its own (controllerlink). A
	// build without it would read that opening as a Raft message and drop
	// the connection, so a voter's directory (VoterDirectoryRecord) is
	// recorded only for a node that reports it.
	FeatureVoterDirectory = "strata.voter.directory"
)

// SupportedFeatures are the Strata-internal features this build supports, at
// their highest level. Never modify it.
var SupportedFeatures = map[string]int32{FeatureOwedMarkers: 1, FeaturePreadded: 1, FeatureVoterDirectory: 1}

// BrokerFeaturesRecord (type 32, version 0) records the Strata-internal
// features registration Epoch of broker BrokerID supports, each at its highest
// level. A new registration of the broker starts with none.
//
// The controller proposes it in a batch of its own after the registration's:
// a build that predates the record type refuses the batch that holds it (and
// only that batch), so older nodes in a rolling upgrade keep the registration
// and miss only the features, which they do not use.
type BrokerFeaturesRecord struct {
	BrokerID int32
	Epoch    int64
	Features map[string]int32
}

func (*BrokerFeaturesRecord) Type() RecordType { return TypeBrokerFeatures }

// appendBody writes the features in ascending name order, so equal maps
// encode to equal bytes.
func (r *BrokerFeaturesRecord) appendBody(b []byte) []byte {
	b = appendInt64(appendInt32(b, r.BrokerID), r.Epoch)
	names := slices.Sorted(maps.Keys(r.Features))
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		b = appendInt32(appendString(b, name), r.Features[name])
	}
	return b
}

func (r *BrokerFeaturesRecord) readBody(rd *reader) {
	r.BrokerID = rd.int32()
	r.Epoch = rd.int64()
	n := rd.count(5)
	if n == 0 {
		return
	}
	r.Features = make(map[string]int32, n)
	prev := ""
	for i := 0; i < n && rd.err == nil; i++ {
		name, level := rd.string(), rd.int32()
		if i > 0 && name <= prev {
			rd.fail("feature names not strictly ascending: %q after %q", name, prev)
		}
		r.Features[name], prev = level, name
	}
}

// brokerFeatures sets the features of the broker's current registration.
func (b *builder) brokerFeatures(r *BrokerFeaturesRecord) error {
	old, err := b.registration(r.BrokerID, r.Epoch)
	if err != nil {
		return err
	}
	for name, level := range r.Features {
		if name == "" || level < 0 {
			return fmt.Errorf("%w: broker %d feature %q level %d", ErrInvalidRequest, r.BrokerID, name, level)
		}
	}
	c := *old
	c.Features = nil
	if len(r.Features) > 0 {
		c.Features = maps.Clone(r.Features)
	}
	b.mutBrokers()[r.BrokerID] = &c
	return nil
}

// BrokersSupport reports whether every registered broker, fenced or not,
// supports Strata-internal feature name at level or above. An image without
// brokers supports nothing.
func (img *Image) BrokersSupport(name string, level int32) bool {
	if len(img.brokers) == 0 {
		return false
	}
	for _, b := range img.brokers {
		if got, ok := b.Features[name]; !ok || got < level {
			return false
		}
	}
	return true
}
