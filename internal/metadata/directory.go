package metadata

import "fmt"

// BrokerDirectoryRecord (type 33, version 0) records the data directory id
// that registration Epoch of broker BrokerID was made with (the node's
// directory.id). A new registration of the broker starts without one; the
// controller compares a registration's directory with the recorded one to
// tell a restart from a replaced, empty data directory
// (controller.PlanRegisterBroker).
//
// Like BrokerFeaturesRecord it goes in a Raft entry of its own after the
// registration's: a build that predates the type refuses that entry only, so
// the older nodes of a rolling upgrade still apply every registration (a
// RegisterBrokerRecord of version 0) and miss only the directory ids, which
// they do not use.
type BrokerDirectoryRecord struct {
	BrokerID    int32
	Epoch       int64
	DirectoryID UUID
}

func (*BrokerDirectoryRecord) Type() RecordType { return TypeBrokerDirectory }

func (r *BrokerDirectoryRecord) appendBody(b []byte) []byte {
	b = appendInt64(appendInt32(b, r.BrokerID), r.Epoch)
	return append(b, r.DirectoryID[:]...)
}

func (r *BrokerDirectoryRecord) readBody(rd *reader) {
	r.BrokerID = rd.int32()
	r.Epoch = rd.int64()
	r.DirectoryID = rd.uuid()
}

// brokerDirectory sets the directory id of the broker's current registration.
func (b *builder) brokerDirectory(r *BrokerDirectoryRecord) error {
	old, err := b.registration(r.BrokerID, r.Epoch)
	switch {
	case err != nil:
		return err
	case r.DirectoryID.IsZero():
		return fmt.Errorf("%w: broker %d zero directory id", ErrInvalidRequest, r.BrokerID)
	}
	c := *old
	c.DirectoryID = r.DirectoryID
	b.mutBrokers()[r.BrokerID] = &c
	return nil
}
